import CJpegPlanes
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// An upright 4:2:0 JPEG taken as coded (``ItemPlan/blocks``): its store
/// requantized from its blocks, its thumbnail from their means, and both as
/// good as decoding and encoding it.
@Suite("JPEG blocks taken as coded", .vipsStarted, .serialized)
struct BlocksAsCodedTests {
    /// libjpeg's luminance table at quality 50 (the standard's), in natural order.
    static let quality50: [UInt16] = [
        16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29,
        51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92, 49, 64, 78, 87, 103, 121,
        120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
    ]

    /// The table at another quality, as libjpeg scales it (baseline: 1…255).
    static func table(quality: Int) -> [UInt16] {
        let scale = quality < 50 ? 5000 / quality : 200 - 2 * quality
        return quality50.map { UInt16(min(255, max(1, (Int($0) * scale + 50) / 100))) }
    }

    static func requantized(_ block: [Int16], source: [UInt16], store: [UInt16]) -> [Int16] {
        var out = [Int16](repeating: 0, count: 64)
        block.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = CJpegPlanes_requantize(input.baseAddress, output.baseAddress, 1, source, store)
            }
        }
        return out
    }

    @Test(
        "Requantizing: DC to nearest, ACs at 0.48, clamped to ±1023, the sign kept, steps coarser than the store's too")
    func arithmetic() {
        let twos = [UInt16](repeating: 2, count: 64), sixteens = [UInt16](repeating: 16, count: 64)
        // (coefficient, source step, store step, DC's result, an AC's result)
        let cases: [(Int16, [UInt16], Int16, Int16)] = [
            (4, twos, 1, 0),  // 0.5: the DC rounds up, an AC (under 0.52) down
            (5, twos, 1, 1),  // 0.625
            (-5, twos, -1, -1),
            (0, twos, 0, 0),
            (32767, twos, 1023, 1023),  // 4,096: clamped
            (-32768, twos, -1023, -1023),
            (3, [UInt16](repeating: 40, count: 64), 8, 7),  // 7.5 with a source step past the store's
            (8, sixteens, 8, 8),  // equal steps: unchanged
        ]
        for (c, source, dc, ac) in cases {
            let out = Self.requantized([Int16](repeating: c, count: 64), source: source, store: sixteens)
            #expect(out[0] == dc && out[1] == ac && out[63] == ac, "\(c) × \(source[0]) / 16: \(out[0]), \(out[1])")
        }
        // A photo's steps (quality 92) to the store's (50): within half a store step of the exact quotient.
        let source = Self.table(quality: 92), store = Self.quality50
        let block = (0..<64).map { Int16(($0 * 37 % 41) - 20) }
        let out = Self.requantized(block, source: source, store: store)
        for k in 0..<64 {
            let exact = Double(block[k]) * Double(source[k]) / Double(store[k])
            #expect(abs(Double(out[k]) - exact) <= 0.52, "\(k): \(out[k]) for \(exact)")
        }
    }

    @Test("The AVX2 loop requantizes exactly as the portable one, over a million random coefficients and 5 table pairs")
    func avx2MatchesPortable() throws {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let avx2 = cpu.contains(" avx2")
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 33
        }
        // Mostly small coefficients, as photos have, and some at the ends of the range.
        let blocks: [Int16] = (0..<(64 * 16384)).map { _ in
            let r = next()
            return r % 16 == 0 ? Int16(truncatingIfNeeded: r >> 4) : Int16(Int(r >> 4 & 0x3FF) - 512)
        }
        for (from, to) in [(92, 50), (75, 50), (100, 50), (95, 80), (60, 10), (50, 50), (40, 50)] {
            let mismatches = blocks.withUnsafeBufferPointer {
                CJpegPlanes_requantize_mismatches(
                    $0.baseAddress, 16384, Self.table(quality: from), Self.table(quality: to))
            }
            // Steps as coarse as the store's or coarser (a ratio of 2^15 or more) are the portable loop's alone.
            let vector = avx2 && from > to
            #expect(mismatches == (vector ? 0 : -1), "quality \(from) to \(to): \(mismatches)")
        }
    }

    /// The store `CJpegPlanes_transcode` makes of `bytes` at quality 50, taken as coded or not.
    static func transcode(_ bytes: Data, width: Int, height: Int, blocks: Bool) throws -> (
        store: Data, requantized: Bool
    ) {
        var job = CJpegPlanesJob(
            width: Int32(width), height: Int32(height), orientation: 1, quality: 50, optimize_coding: 0, tap: nil,
            shaper: nil, blocks: blocks ? 1 : 0)
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = bytes.withUnsafeBytes { raw in
            CJpegPlanes_transcode(
                raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &job, &result, &error, error.count)
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        try #require(status == 0)
        let jpeg = try #require(result.jpeg)
        return (Data(bytes: jpeg, count: Int(result.size)), result.requantized != 0)
    }

    @Test(
        "Upright 4:2:0 JPEGs taken as coded (odd sizes, quality 40 to 89): a store at most 2 % larger than decoding and encoding makes and within 0.25 dB of it against the source, and the same thumbnail within 40 dB; the fixture photos (4:2:2) decode"
    )
    func fixtures() throws {
        var taken = 0
        let made = [(1601, 1283, Int32(85)), (2048, 1536, Int32(89)), (1600, 1280, Int32(40)), (1700, 1300, Int32(70))]
        let sources = try made.map { try PlanePathTests.oriented(1, width: $0.0, height: $0.1, quality: $0.2) }
        for path in sources + PlanePathTests.planeJPEGs.map({ TestPaths.fixture($0) }) {
            let name = URL(fileURLWithPath: path).lastPathComponent
            let header = try Decode(limits: PipelineSettings().limits).header(of: path)
            let plan = ItemPlan.make(
                header: header, makeStore: true, canvasWidth: 80, canvasHeight: 80, store: PipelineSettings.Store(),
                planes: true)
            guard plan.blocks else { continue }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let coded = try Self.transcode(bytes, width: header.width, height: header.height, blocks: true)
            let decoded = try Self.transcode(bytes, width: header.width, height: header.height, blocks: false)
            let is420 = PlanePathTests.samplingFactors(bytes) == [0x22, 0x11, 0x11]
            if PlanePathTests.samplingFactors(bytes).count == 3 { #expect(coded.requantized == is420, "\(name)") }
            #expect(!decoded.requantized, "\(name)")
            guard coded.requantized else { continue }
            taken += 1
            let source = try DecodedTestImage.load(path)
            let (a, b) = (try PlanePathTests.decoded(coded.store), try PlanePathTests.decoded(decoded.store))
            let (pa, pb) = (psnr(a.pixels, source.pixels), psnr(b.pixels, source.pixels))
            print(
                "as coded\t\(name)\t\(String(format: "%.3f", pa)) dB, \(coded.store.count) B\tdecoded \(String(format: "%.3f", pb)) dB, \(decoded.store.count) B"
            )
            // Measured: quality 89, 0.19 dB lower and 4.9 % smaller; 70, 0.64 dB higher and 1.0 % larger.
            #expect(pa >= pb - 0.25, "\(name): as coded \(pa) dB, decoded \(pb) dB")
            #expect(
                Double(coded.store.count) <= Double(decoded.store.count) * 1.02,
                "\(name): \(coded.store.count) B against \(decoded.store.count)")
            #expect(PlanePathTests.samplingFactors(coded.store) == [0x22, 0x11, 0x11], "\(name)")
            // Through the item job: the route reported, and the thumbnail from the blocks' means.
            let planes = try PlanePathTests.store(path, planes: true)
            let libvips = try PlanePathTests.store(path, planes: false)
            #expect(planes.path == .planesRequantized, "\(name)")
            #expect(planes.bytes == coded.store, "\(name): the item's store is the transcode's")
            let ta = try DecodedTestImage.load(png: try #require(planes.thumbnail))
            let tb = try DecodedTestImage.load(png: try #require(libvips.thumbnail))
            #expect(psnr(ta.pixels, tb.pixels) >= 40, "\(name): thumbnail \(psnr(ta.pixels, tb.pixels)) dB")
        }
        #expect(taken == made.count, "\(taken) sources taken as coded")
    }

    @Test(
        "Turned 4:2:0 JPEGs, all 8 orientations: taken as coded when the turn keeps the block grid (1600 × 1280; 1601 × 1283 upright or transposed only), upright as libvips turns them, as good as its store, the same thumbnail"
    )
    func turned() throws {
        for (width, height) in [(1600, 1280), (1601, 1283)] {
            // The upright source's store: a turned one's must be it turned, but for the IDCT's rounding
            // (measured 66 dB or identical; a quarter turn with its signs wrong gave 47).
            let upright = try PlanePathTests.decoded(
                PlanePathTests.store(
                    try PlanePathTests.oriented(1, width: width, height: height, quality: 85), planes: true
                ).bytes)
            for orientation in 1...8 {
                let path = try PlanePathTests.oriented(orientation, width: width, height: height, quality: 85)
                let label = "\(width)×\(height), orientation \(orientation)"
                try PlanePathTests.expectPlanesAsGood(path, label)
                let keeps = ItemPlan.turnKeepsBlocks(width: width, height: height, orientation: orientation)
                let made = try PlanePathTests.store(path, planes: true)
                #expect(
                    made.path == (keeps ? .planesRequantized : .planes), "\(label): \(String(describing: made.path))")
                guard keeps else { continue }
                let store = try PlanePathTests.decoded(made.bytes)
                let expected = Self.turn(upright, orientation)
                try #require(store.pixels.count == expected.count, "\(label)")
                #expect(psnr(store.pixels, expected) >= 60, "\(label): \(psnr(store.pixels, expected)) dB")
            }
        }
    }

    /// `image`'s pixels as EXIF `orientation` shows them (AspectFillScale.storedPixel's mapping).
    static func turn(_ image: DecodedTestImage, _ orientation: Int) -> [UInt8] {
        let (w, h, b) = (image.width, image.height, image.bands)
        let (uw, uh) = orientation >= 5 ? (h, w) : (w, h)
        var out = [UInt8](repeating: 0, count: uw * uh * b)
        for y in 0..<uh {
            for x in 0..<uw {
                let (column, row): (Int, Int)
                switch orientation {
                case 2: (column, row) = (w - 1 - x, y)
                case 3: (column, row) = (w - 1 - x, h - 1 - y)
                case 4: (column, row) = (x, h - 1 - y)
                case 5: (column, row) = (y, x)
                case 6: (column, row) = (y, h - 1 - x)
                case 7: (column, row) = (w - 1 - y, h - 1 - x)
                case 8: (column, row) = (w - 1 - y, x)
                default: (column, row) = (x, y)
                }
                for i in 0..<b { out[(y * uw + x) * b + i] = image.pixels[(row * w + column) * b + i] }
            }
        }
        return out
    }
}
