import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("Image store", .vipsStarted)
struct StoreTests {
    @Test(
        "Stored JPEGs display upright at the source's size and decode fully",
        arguments: [
            ("photos/Canon-EOS-1000D.jpg", 2592, 3888),  // orientation 6
            ("photos/Leica-T-Typ-701.jpg", 3264, 4928),  // orientation 8
            ("photos/Nikon-Coolpix-P7000.webp", 2736, 3648),  // WebP, orientation 6
            ("edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg", 500, 333),
            ("edge/png-palette-trns_paletted-transparent.png", 300, 225),
        ])
    func uprightAndComplete(relative: String, width: Int, height: Int) throws {
        let (output, result) = try runManifest([corpusItem(relative, index: 0)])
        #expect(result.failures.isEmpty)
        let path = output + "/item-0"
        let upright = try DecodedTestImage.load(path, autorotate: true)
        #expect(upright.loader == "jpegload")
        #expect(upright.width == width && upright.height == height)
        #expect(upright.bands == 3, "8-bit sRGB, no alpha")
        let fields = try imageFields(path)
        #expect(fields["jpeg-multiscan"] == "0", "baseline")
        #expect(!fields.keys.contains { $0.hasPrefix("exif-ifd3") }, "no GPS")
        #expect(fields["icc-profile-data"] == nil)
        // No temporaries are left behind.
        let names = try FileManager.default.contentsOfDirectory(atPath: output)
        #expect(!names.contains { $0.hasPrefix(TemporaryFile.prefix) })
    }

    @Test("Quality 0.5 is libvips Q=50")
    func quality() throws {
        let relative = "edge/orientation-1_Landscape_1.jpg"
        var low = PipelineSettings()
        low.store.quality = 0.5
        var high = PipelineSettings()
        high.store.quality = 0.95
        let a = try runManifest([corpusItem(relative, index: 0)], settings: low).output + "/item-0"
        let b = try runManifest([corpusItem(relative, index: 0)], settings: high).output + "/item-0"
        let sizeA = try FileManager.default.attributesOfItem(atPath: a)[.size] as! Int
        let sizeB = try FileManager.default.attributesOfItem(atPath: b)[.size] as! Int
        #expect(sizeA < sizeB / 2, "Q50 \(sizeA) B vs Q95 \(sizeB) B")
        // The Q=50 file is close to what libvips itself writes at Q=50.
        let original = try DecodedTestImage.load(TestPaths.corpus(relative))
        let stored = try DecodedTestImage.load(a)
        #expect(psnr(original.pixels, stored.pixels) > 30)
    }

    @Test("A failed item writes no store file and removes an old one")
    func failedItemHasNoStoreFile() throws {
        let folder = TestPaths.temporaryFolder("store")
        writeFile(folder, "item-0", "stale")
        let (_, result) = try runManifest([corpusItem("bad/truncated-jpeg_truncated.jpg", index: 0)], folder: folder)
        #expect(result.failures.count == 1)
        #expect(result.failures.first?.message.contains("truncated JPEG") == true)
        #expect(!FileManager.default.fileExists(atPath: folder + "/item-0"))
    }
}
