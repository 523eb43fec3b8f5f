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
            ("photos/Leica-T-Typ-701-small.jpg", 816, 1232),  // orientation 8
            ("photos/Nikon-Coolpix-P7000.webp", 2736, 3648),  // WebP, orientation 6
            ("edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg", 500, 333),
            ("edge/png-palette-trns_paletted-transparent.png", 300, 225),
        ])
    func uprightAndComplete(relative: String, width: Int, height: Int) throws {
        let (output, result) = try runManifest([fixtureItem(relative, index: 0)])
        #expect(result.failures.isEmpty)
        let path = output + "/item-0"
        // The pixels themselves are upright: any viewer shows them right, EXIF-aware or not.
        let stored = try DecodedTestImage.load(path, autorotate: false)
        #expect(stored.loader == "jpegload")
        #expect(stored.width == width && stored.height == height)
        #expect(stored.bands == 3, "8-bit sRGB, no alpha")
        #expect(stored.orientation == 1)
        let fields = try imageFields(path)
        #expect(fields["jpeg-multiscan"] == "0", "baseline")
        #expect(stored.interpretation == "srgb")
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
        let a = try runManifest([fixtureItem(relative, index: 0)], settings: low).output + "/item-0"
        let b = try runManifest([fixtureItem(relative, index: 0)], settings: high).output + "/item-0"
        let sizeA = try #require(try FileManager.default.attributesOfItem(atPath: a)[.size] as? Int)
        let sizeB = try #require(try FileManager.default.attributesOfItem(atPath: b)[.size] as? Int)
        #expect(sizeA < sizeB / 2, "Q50 \(sizeA) B vs Q95 \(sizeB) B")
        // The Q=50 file is close to what libvips itself writes at Q=50.
        let original = try DecodedTestImage.load(TestPaths.fixture(relative))
        let stored = try DecodedTestImage.load(a)
        #expect(psnr(original.pixels, stored.pixels) > 30)
    }

    @Test("The store JPEG carries libjpeg's Q=50 tables")
    func quantisationTables() throws {
        let (output, _) = try runManifest([fixtureItem("photos/Nikon-D3100.jpg", index: 0)])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: output + "/item-0")))
        // The first DQT segment: at Q=50 libjpeg scales the Annex K tables by 100 %,
        // so luminance starts 16, 11, 12, 14 in zig-zag order.
        var i = 2
        var table: [UInt8] = []
        while i + 4 < bytes.count, bytes[i] == 0xFF {
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if bytes[i + 1] == 0xDB {
                table = Array(bytes[(i + 5)..<(i + 5 + 64)])
                break
            }
            i += 2 + length
        }
        #expect(Array(table.prefix(8)) == [16, 11, 12, 14, 12, 10, 16, 14])
    }

    @Test("Private metadata is dropped unless the pipeline keeps it")
    func metadata() throws {
        let photo = "photos/Apple-iPhone-6-plus-small.jpg"
        #expect(try imageFields(TestPaths.fixture(photo)).keys.contains { $0.hasPrefix("exif-ifd3") }, "source has GPS")
        let stripped = try runManifest([fixtureItem(photo, index: 0)]).output + "/item-0"
        #expect(!(try imageFields(stripped)).keys.contains { $0.hasPrefix("exif-ifd3") })
        var keep = PipelineSettings()
        keep.store.keepMetadata = true
        let kept = try runManifest([fixtureItem(photo, index: 0)], settings: keep).output + "/item-0"
        let fields = try imageFields(kept)
        #expect(fields.keys.contains { $0.hasPrefix("exif-ifd3") })
        #expect(fields["icc-profile-data"] == nil, "the pixels are sRGB now; the source profile would lie")
    }

    @Test("store.orientation tag keeps the pixels and writes the tag")
    func orientationTag() throws {
        var settings = PipelineSettings()
        settings.store.orientation = .tag
        let path =
            try runManifest([fixtureItem("photos/Canon-EOS-1000D.jpg", index: 0)], settings: settings).output
            + "/item-0"
        let stored = try DecodedTestImage.load(path)
        #expect(stored.width == 3888 && stored.height == 2592 && stored.orientation == 6)
        #expect(
            try imageFields(path).keys.filter { $0.hasPrefix("exif-ifd2-Make") || $0.hasPrefix("exif-ifd3") }.isEmpty)
    }

    @Test("A failed item writes no store file and removes an old one")
    func failedItemHasNoStoreFile() throws {
        let folder = TestPaths.temporaryFolder("store")
        writeFile(folder, "item-0", "stale")
        let (_, result) = try runManifest([fixtureItem("bad/truncated-jpeg_truncated.jpg", index: 0)], folder: folder)
        #expect(result.failures.count == 1)
        #expect(result.failures.first?.message.contains("truncated JPEG") == true)
        #expect(!FileManager.default.fileExists(atPath: folder + "/item-0"))
    }
}
