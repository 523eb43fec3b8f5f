import CJpegPlanes
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// A 4:2:0 JPEG's store taken as coded (``ItemPlan/blocks``): requantized from
/// its blocks, as good as decoding and encoding it, and its thumbnail the same
/// bytes as without a store.
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
    static func transcode(_ bytes: Data, width: Int, height: Int, orientation: Int = 1, blocks: Bool) throws -> (
        store: Data, requantized: Bool
    ) {
        let job = CJpegPlanesJob(
            width: Int32(width), height: Int32(height), orientation: Int32(orientation), quality: 50,
            optimize_coding: 0, tap: nil,
            shaper: nil, blocks: blocks ? 1 : 0, tap_means: 0, hold_turned: 0)
        let (store, result) = try job.run(on: bytes)
        return (try #require(store), result.requantized != 0)
    }

    @Test(
        "Upright 4:2:0 JPEGs taken as coded (made at odd sizes, quality 40 to 89, and the fixture photos): a store at most 2 % larger than decoding and encoding makes and within 0.25 dB of it against the source, the thumbnail byte for byte the one made without a store; 4:2:2 ones decode"
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
            // Upright ones: the transcode below does not turn.
            guard plan.onPlanes?.blocks == true, header.orientation == 1 else { continue }
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
            // Through the item job: the route reported, and the thumbnail the one made without a store.
            let planes = try PlanePathTests.store(path, planes: true)
            #expect(planes.path == .planesRequantized, "\(name)")
            // (Compared as a Bool: a failed == on Data has Swift Testing diff megabytes.)
            let sameStore = planes.bytes == coded.store
            #expect(sameStore, "\(name): the item's store is not the transcode's")
            let alone = ItemJobRunner(settings: PipelineSettings()).runHere(
                ItemJob(index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: false, hashSource: false))
            #expect(alone.failure == nil && alone.thumbnail != nil, "\(name)")
            let sameThumbnail = planes.thumbnail == alone.thumbnail
            #expect(sameThumbnail, "\(name): the thumbnail depends on the store's route")
        }
        #expect(taken >= made.count, "\(taken) sources taken as coded")
    }

    @Test(
        "Turned 4:2:0 JPEGs, all 8 orientations: taken as coded when the turn keeps the block grid (1600 × 1280; 1601 × 1283 upright or transposed only), upright as libvips turns them, as good as its store"
    )
    func turned() throws {
        for (width, height) in [(1600, 1280), (1601, 1283)] {
            // The upright source's store: a mirrored one's must be it mirrored, but for the IDCT's
            // rounding (measured 71 dB or identical; a mirror with its signs wrong gave 47), and a
            // quarter-turned one (whose coefficients meet other store steps) as close to its source.
            let uprightSource = try PlanePathTests.oriented(1, width: width, height: height, quality: 85)
            let upright = try PlanePathTests.decoded(PlanePathTests.store(uprightSource, planes: true).bytes)
            let uprightQuality = psnr(upright.pixels, try DecodedTestImage.load(uprightSource).pixels)
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
                if orientation < 5 {
                    let expected = Self.turn(upright, orientation)
                    try #require(store.pixels.count == expected.count, "\(label)")
                    #expect(psnr(store.pixels, expected) >= 60, "\(label): \(psnr(store.pixels, expected)) dB")
                } else {
                    let source = try DecodedTestImage.load(path, autorotate: true)
                    try #require(store.pixels.count == source.pixels.count, "\(label)")
                    let quality = psnr(store.pixels, source.pixels)
                    #expect(quality >= uprightQuality - 0.1, "\(label): \(quality) dB, upright \(uprightQuality)")
                }
            }
        }
    }

    @Test(
        "Progressive, restart intervals and optimised tables, upright and turned: taken as coded, as good as libvips's store"
    )
    func codings() throws {
        let folder = TestPaths.temporaryFolder("blocks-codings")
        let ppm = folder + "/source.ppm"
        let made = try runProcess(
            "/usr/bin/djpeg",
            ["-pnm", "-outfile", ppm, try PlanePathTests.oriented(1, width: 1600, height: 1280, quality: 95)])
        try #require(made.status == 0, "\(made.stderr)")
        for options in [["-progressive"], ["-restart", "1B"], ["-restart", "3"], ["-optimize"]] {
            let path = folder + "/c\(options.joined()).jpg"
            let coded = try runProcess(
                "/usr/bin/cjpeg", ["-sample", "2x2", "-quality", "92"] + options + ["-outfile", path, ppm])
            try #require(coded.status == 0, "\(coded.stderr)")
            let label = options.joined(separator: " ")
            try PlanePathTests.expectPlanesAsGood(path, label)
            #expect(try PlanePathTests.store(path, planes: true).path == .planesRequantized, "\(label)")
        }
    }

    @Test(
        "A textured photo with lopsided tables (steps by horizontal frequency only), all 8 orientations: taken as coded, within 0.25 dB of decoding and encoding it against the source"
    )
    func lopsidedTables() throws {
        let folder = TestPaths.temporaryFolder("blocks-lopsided")
        let ppm = folder + "/photo.ppm", tables = folder + "/tables.txt"
        let cut = try runProcess(
            "/usr/bin/djpeg",
            [
                "-crop", "1600x1200+0+0", "-pnm", "-outfile", ppm,
                TestPaths.fixture("edge/orientation-1_Landscape_1.jpg"),
            ])
        try #require(cut.status == 0, "\(cut.stderr)")
        // Luma steps 5 + 30u (u the horizontal frequency), scaled to 20 % by cjpeg's quality 90:
        // a quarter turn that took a step from the wrong place, source's or store's, is far off.
        let rows = (0..<8).map { _ in (0..<8).map { String(5 + 30 * $0) }.joined(separator: " ") }
        try rows.joined(separator: "\n").write(toFile: tables, atomically: true, encoding: .utf8)
        for orientation in 1...8 {
            let path = try PlanePathTests.sampled(
                "", sampling: "2x2", orientation: orientation, options: ["-qtables", tables], ppm: ppm, name: "lop")
            let label = "lopsided, orientation \(orientation)"
            let made = try PlanePathTests.store(path, planes: true)
            #expect(made.path == .planesRequantized, "\(label): \(String(describing: made.path))")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let coded = try Self.transcode(bytes, width: 1600, height: 1200, orientation: orientation, blocks: true)
            let decoded = try Self.transcode(bytes, width: 1600, height: 1200, orientation: orientation, blocks: false)
            let sameStore = coded.store == made.bytes
            #expect(coded.requantized && sameStore, "\(label)")
            let source = try DecodedTestImage.load(path, autorotate: true)
            let (a, b) = (try PlanePathTests.decoded(coded.store), try PlanePathTests.decoded(decoded.store))
            try #require(a.pixels.count == source.pixels.count && b.pixels.count == source.pixels.count, "\(label)")
            let (pa, pb) = (psnr(a.pixels, source.pixels), psnr(b.pixels, source.pixels))
            print(
                "lopsided\t\(orientation)\tas coded \(String(format: "%.3f", pa)) dB\tdecoded \(String(format: "%.3f", pb)) dB"
            )
            #expect(pa >= pb - 0.25, "\(label): as coded \(pa) dB, decoded \(pb) dB")
        }
    }

    /// `image`'s pixels as EXIF `orientation` shows them (``AspectFillScale``'s `storedPixel`).
    static func turn(_ image: DecodedTestImage, _ orientation: Int) -> [UInt8] {
        let (w, h, b) = (image.width, image.height, image.bands)
        let (uw, uh) = orientation >= 5 ? (h, w) : (w, h)
        var out = [UInt8](repeating: 0, count: uw * uh * b)
        for y in 0..<uh {
            for x in 0..<uw {
                let (column, row) = AspectFillScale.storedPixel(x, y, orientation: orientation, width: w, height: h)
                for i in 0..<b { out[(y * uw + x) * b + i] = image.pixels[(row * w + column) * b + i] }
            }
        }
        return out
    }
}

extension CJpegPlanesJob {
    /// `CJpegPlanes_transcode` of this job on `bytes`: the store it made (nil
    /// without one) and what it says it did. A refusal fails the test, with libjpeg's reason.
    func run(on bytes: Data) throws -> (store: Data?, result: CJpegPlanesResult) {
        var job = self
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = bytes.withUnsafeBytes { raw in
            CJpegPlanes_transcode(
                raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &job, &result, &error, error.count)
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        try #require(
            status == 0, "\(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        let store = result.jpeg.map { Data(bytes: $0, count: Int(result.size)) }
        // The bytes are freed on return: the result handed back does not point at them.
        var reported = result
        reported.jpeg = nil
        return (store, reported)
    }
}
