import CJpegPlanes
import CThumbKernels
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The thumbnail's tap fed a JPEG's blocks' means (``ItemPlan/tapMeans``): each
/// block's DC stands for its 64 pixels, no inverse DCT runs for the tap, and the
/// tap's block means must be the ones its pixels give.
@Suite("The tap from a JPEG's blocks' means", .vipsStarted, .serialized)
struct TapMeansTests {
    /// The tap `CJpegPlanes_transcode` fills from `bytes` (factor 16, the
    /// thumbnail of an 80 × 80 canvas), resampled, and the store it made when
    /// `quality` is not 0.
    static func tapped(
        _ bytes: Data, width: Int, height: Int, orientation: Int = 1, means: Bool, quality: Int32 = 0,
        blocks: Bool = false, hold: Bool = false
    ) throws -> (pixels: [Float], store: Data?, held: Bool) {
        let tap = try AspectFillScale(width: 80, height: 80).tap(
            width: width, height: height, bands: 3, factor: 16, orientation: orientation)
        let job = CJpegPlanesJob(
            width: Int32(width), height: Int32(height), orientation: Int32(orientation), quality: quality,
            optimize_coding: 0, tap: tap.pointer, shaper: nil, blocks: blocks ? 1 : 0, tap_means: means ? 1 : 0,
            hold_turned: hold ? 1 : 0)
        let (store, result) = try job.run(on: bytes)
        return (try tap.resampled(), store, result.held != 0)
    }

    /// JPEGs of every sampling the planes take, coded in every way libjpeg
    /// codes them, at sizes whose right and bottom blocks are partial; and the
    /// fixture photos the plane path takes.
    static func sources() throws -> [String] {
        let folder = TestPaths.temporaryFolder("tap-means")
        let ppm = folder + "/source.ppm"
        try makeTestImage(from: TestPaths.fixture("photos/Nikon-D3100.jpg"), to: ppm, width: 1601, height: 1203)
        var made: [String] = []
        for (name, options) in [
            ("420", ["-sample", "2x2,1x1,1x1"]), ("444", ["-sample", "1x1,1x1,1x1"]),
            ("422", ["-sample", "2x1,1x1,1x1"]), ("440", ["-sample", "1x2,1x1,1x1"]),
            ("420-progressive", ["-sample", "2x2,1x1,1x1", "-progressive"]),
            ("420-restart", ["-sample", "2x2,1x1,1x1", "-restart", "1B"]),
            ("444-progressive-q95", ["-sample", "1x1,1x1,1x1", "-progressive", "-quality", "95"]),
        ] {
            let jpeg = folder + "/\(name).jpg"
            let result = try runProcess("/usr/bin/cjpeg", options + ["-outfile", jpeg, ppm])
            try #require(result.status == 0, "cjpeg: \(result.stderr)")
            made.append(jpeg)
        }
        return made + PlanePathTests.planeJPEGs.map { TestPaths.fixture($0) }
    }

    @Test(
        "Every sampling and coding: the tap from the blocks' means is the tap from the pixels, up to rounding and clipping (mean difference under 0.2 levels, none over 4.5)"
    )
    func meansArePixelMeans() throws {
        var compared = 0
        for path in try Self.sources() {
            let name = URL(fileURLWithPath: path).lastPathComponent
            let header = try Decode(limits: PipelineSettings().limits).header(of: path)
            guard header.jpegColour == .sRGB else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let (width, height, turn) = (header.width, header.height, header.orientation)
            let means = try Self.tapped(bytes, width: width, height: height, orientation: turn, means: true).pixels
            let pixels = try Self.tapped(bytes, width: width, height: height, orientation: turn, means: false).pixels
            try #require(means.count == pixels.count)
            let differences = zip(means, pixels).map { abs(Double($0) - Double($1)) }
            let mean = differences.reduce(0, +) / Double(differences.count)
            let worst = differences.max() ?? 0
            print("tap means\t\(name)\tmean \(String(format: "%.4f", mean))\tworst \(String(format: "%.3f", worst))")
            // Measured: means 0.014–0.15, the worst 3.7 (Blackberry-Z10-small: samples clipped at 0 or 255
            // in the pixels, not in a DC). Edge blocks' DCs counted the encoder's padding: 11.4 before.
            #expect(mean < 0.2 && worst <= 4.5, "\(name): mean difference \(mean), worst \(worst)")
            compared += 1
        }
        #expect(compared >= 12, "\(compared) sources compared")
    }

    @Test(
        "The thumbnail from the blocks' means does not depend on the store: none, taken as coded, or decoded and encoded"
    )
    func independentOfStore() throws {
        for path in try Self.sources().prefix(4) {
            let name = URL(fileURLWithPath: path).lastPathComponent
            let header = try Decode(limits: PipelineSettings().limits).header(of: path)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let alone = try Self.tapped(bytes, width: header.width, height: header.height, means: true)
            #expect(alone.store == nil)
            for blocks in [false, true] {
                let stored = try Self.tapped(
                    bytes, width: header.width, height: header.height, means: true, quality: 50, blocks: blocks)
                #expect(stored.store != nil, "\(name)")
                let same = stored.pixels == alone.pixels
                #expect(same, "\(name), blocks \(blocks): the thumbnail changed with the store")
            }
        }
    }

    @Test(
        "Turned 4:2:0 JPEGs whose turn moves the block grid, held as coded through the decode: the store byte for byte the one from the decoded planes, and the same thumbnail (orientations 2–8, odd sizes, progressive)"
    )
    func heldTurned() throws {
        let folder = TestPaths.temporaryFolder("held")
        var held = 0
        for orientation in 2...8 {
            var paths = [try PlanePathTests.oriented(orientation, width: 1601, height: 1283, quality: 85)]
            if orientation == 6 {
                // Progressive, from the same pixels.
                let ppm = folder + "/source.ppm"
                try makeTestImage(from: paths[0], to: ppm, width: 1601, height: 1283)
                let progressive = folder + "/progressive.jpg"
                let made = try runProcess("/usr/bin/cjpeg", ["-progressive", "-outfile", progressive, ppm])
                try #require(made.status == 0, "cjpeg: \(made.stderr)")
                paths.append(progressive)
            }
            for path in paths {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                let turn = path.hasSuffix("progressive.jpg") ? 6 : orientation
                let planes = try Self.tapped(
                    bytes, width: 1601, height: 1283, orientation: turn, means: true, quality: 50)
                let kept = try Self.tapped(
                    bytes, width: 1601, height: 1283, orientation: turn, means: true, quality: 50, hold: true)
                #expect(!planes.held && kept.held, "orientation \(turn): the route")
                let sameStore = planes.store == kept.store, sameThumbnail = planes.pixels == kept.pixels
                #expect(
                    sameStore && sameThumbnail, "orientation \(turn): store \(sameStore), thumbnail \(sameThumbnail)")
                held += kept.held ? 1 : 0
            }
        }
        #expect(held == 8)
        // A file so dense (quality 100) that its packed blocks would outgrow the planes: not held.
        let dense = try PlanePathTests.oriented(6, width: 1601, height: 1283, quality: 100)
        let denseBytes = try Data(contentsOf: URL(fileURLWithPath: dense))
        let denseHeld = try Self.tapped(
            denseBytes, width: 1601, height: 1283, orientation: 6, means: true, quality: 50, hold: true)
        #expect(!denseHeld.held, "\(denseBytes.count) bytes")
        // A tap that reads pixels needs the planes: not held.
        let path = try PlanePathTests.oriented(6, width: 1601, height: 1283, quality: 85)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let pixels = try Self.tapped(
            bytes, width: 1601, height: 1283, orientation: 6, means: false, quality: 50, hold: true)
        #expect(!pixels.held)
    }

    @Test(
        "A tap refuses block sums it cannot place: a factor not a multiple of 16, odd blocks, a short row, pixels first"
    )
    func refusals() throws {
        func tap(factor: Int32) -> OpaquePointer? {
            CThumbKernels_tap_new(160, 64, 3, factor, 0.5, 0.5, 0, 0, 16, 16)
        }
        let row = [Int32](repeating: 64 * 128, count: 64)  // two rows of 20 luma blocks, one of chroma
        func add(
            _ tap: OpaquePointer?, first: Int32 = 0, count: Int32 = 16, wide: Int32 = 20, blockWidth: Int32 = 8,
            blockHeight: Int32 = 8
        ) -> Int32 {
            row.withUnsafeBufferPointer { buffer in
                let sums: [UnsafePointer<Int32>?] = [buffer.baseAddress, buffer.baseAddress, buffer.baseAddress]
                let wides = [wide, wide, wide], widths = [blockWidth, 16, 16], heights = [blockHeight, 16, 16]
                return CThumbKernels_tap_add_block_sums(tap, first, count, sums, wides, widths, heights)
            }
        }
        let good = tap(factor: 16)
        defer { CThumbKernels_tap_unref(good) }
        #expect(add(good) == 0, "a 16-row band of 8-pixel luma and 16-pixel chroma blocks")
        let odd = tap(factor: 24)
        defer { CThumbKernels_tap_unref(odd) }
        #expect(add(odd) == -1, "factor 24")
        #expect(add(good, first: 16, blockWidth: 12) == -1, "12-pixel blocks")
        #expect(add(good, first: 16, wide: 19) == -1, "19 blocks of 8 do not cover 160 pixels")
        #expect(add(good, first: 4) == -1, "a band starting inside a block")
        let rows = tap(factor: 16)
        defer { CThumbKernels_tap_unref(rows) }
        var pixels = [UInt8](repeating: 128, count: 160)
        let status = pixels.withUnsafeMutableBufferPointer { buffer in
            let rowPointers: [UnsafeMutablePointer<UInt8>?] = [buffer.baseAddress]
            return CThumbKernels_tap_add_ycbcr_rows(rows, 0, 1, rowPointers, rowPointers, rowPointers, 0, 0, 160, 160)
        }
        #expect(status == 0)
        #expect(add(rows, first: 16) == -1, "block sums after rows of pixels")
        _ = Vips.takeError(operation: "tap")
    }
}
