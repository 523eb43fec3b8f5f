import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The parent's check of a worker's store file: what passes is exactly what
/// thumbpipe's encoders write; anything that could smuggle bytes or trip a viewer fails.
@Suite("Store check: a worker's store file, checked by the parent", .vipsStarted)
struct StoreCheckTests {
    /// A store file as a worker makes it (plane path and libvips path), with its expected size.
    static func made(_ relative: String, planes: Bool, keepMetadata: Bool = false) throws -> (Data, Int, Int) {
        var settings = PipelineSettings()
        settings.store.keepMetadata = keepMetadata
        var runner = ItemJobRunner(settings: settings)
        runner.planes = planes
        let job = ItemJob(
            index: 0, itemKey: "k", source: TestPaths.fixture(relative), makeThumbnail: true, makeStore: true,
            hashSource: false)
        let outcome = runner.runHere(job)
        if let failure = outcome.failure { throw failure }
        let header = try #require(outcome.header)
        return (try #require(outcome.store), header.uprightSize.width, header.uprightSize.height)
    }

    static func problem(_ bytes: Data, _ width: Int, _ height: Int, metadata: Bool = false) -> String? {
        bytes.withUnsafeBytes { StoreCheck.problem($0, width: width, height: height, metadata: metadata) }
    }

    @Test(
        "Every store thumbpipe's encoders write passes, planes and libvips, metadata kept or not",
        arguments: [
            ("photos/Nikon-D3100.jpg", true), ("photos/Canon-EOS-1000D.jpg", true), ("photos/Nikon-D3100.jpg", false),
            ("photos/Nikon-Coolpix-P7000.webp", false), ("photos/Apple-iPhone-13-Pro-Max.HEIC", false),
            ("edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg", false),
        ])
    func encodersPass(relative: String, planes: Bool) throws {
        let (bytes, width, height) = try Self.made(relative, planes: planes)
        #expect(Self.problem(bytes, width, height) == nil)
        let (kept, w, h) = try Self.made(relative, planes: false, keepMetadata: true)
        #expect(Self.problem(kept, w, h, metadata: true) == nil, "\(relative) with metadata kept")
    }

    @Test("What a hostile worker could hand back fails, each with its reason")
    func tamperedFails() throws {
        let (good, width, height) = try Self.made("photos/Nikon-D3100.jpg", planes: true)
        let com = Data([0xFF, 0xFE, 0x00, 0x08]) + Data("secret".utf8)
        let sof2 = Data(good.map { $0 })  // progressive: SOF0 → SOF2 at the frame marker
        var progressive = sof2
        if let at = progressive.firstRange(of: Data([0xFF, 0xC0]))?.lowerBound { progressive[at + 1] = 0xC2 }
        let cases: [(String, Data, String)] = [
            ("not a JPEG", Data("HOSTILE, not a JPEG".utf8), "is not a JPEG"),
            ("bytes after the end", good + Data("tail".utf8), "bytes after its end"),
            ("truncated", good.prefix(good.count / 2), "no end-of-image marker"),
            ("a comment", Data(good.prefix(2)) + com + good.dropFirst(2), "does not write (marker 0xFE)"),
            ("progressive", progressive, "is not baseline (SOF2)"),
            ("empty", Data(), "is not a JPEG"),
        ]
        for (name, bytes, reason) in cases {
            let problem = Self.problem(bytes, width, height)
            #expect(problem?.contains(reason) == true, "\(name): \(problem ?? "passed")")
        }
        #expect(Self.problem(good, width + 1, height)?.contains("not \(width + 1)×\(height)") == true)
        // A comment is what a kept-metadata store may carry.
        #expect(Self.problem(Data(good.prefix(2)) + com + good.dropFirst(2), width, height, metadata: true) == nil)
    }
}

/// The parent's check of a thumbnail read back from its own state before it goes
/// into the archive: what passes is what thumbpipe's PNG encoder writes for the canvas.
@Suite("Recorded thumbnail check: the state's PNG, checked before it is archived", .vipsStarted)
struct RecordedThumbnailCheckTests {
    /// A thumbnail as the parent encodes one: 80×80 RGBA, with some structure to compress.
    static func thumbnail() throws -> Data {
        var pixels = [UInt8](repeating: 0, count: 80 * 80 * 4)
        for i in pixels.indices { pixels[i] = UInt8(truncatingIfNeeded: i * 7 / 5) }
        return try PNGEncode().apply(RGBABuffer(width: 80, height: 80, pixels: pixels))
    }

    /// CRC-32 (ISO 3309, as PNG uses it), bit by bit: written apart from zlib's, which the check uses.
    static func crc(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    static func be32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }

    /// A chunk with a right CRC.
    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(data.count) + body + be32(Int(crc(body)))
    }

    /// The chunks of `png`: (type, data), in order.
    static func chunks(_ png: Data) -> [(String, [UInt8])] {
        let bytes = [UInt8](png)
        var at = 8
        var result: [(String, [UInt8])] = []
        while at + 12 <= bytes.count {
            let length = bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            result.append(
                (String(decoding: bytes[at + 4..<at + 8], as: UTF8.self), Array(bytes[at + 8..<at + 8 + length])))
            at += 12 + length
        }
        return result
    }

    /// A PNG made of `chunks`, each with a right CRC.
    static func assemble(_ chunks: [(String, [UInt8])]) -> Data {
        Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunks.flatMap { chunk($0.0, $0.1) })
    }

    static func problem(_ png: Data) -> String? { PNGInfo.thumbnailProblem(png, width: 80, height: 80) }

    @Test("thumbpipe's own thumbnail passes, and so does it rebuilt chunk by chunk with an ancillary chunk added")
    func made() throws {
        let made = try Self.thumbnail()
        #expect(Self.problem(made) == nil)
        var chunks = Self.chunks(made)
        #expect(Self.assemble(chunks) == made, "the test's CRC agrees with the encoder's")
        chunks.insert(("tEXt", Array("Comment\0ok".utf8)), at: 1)
        #expect(Self.problem(Self.assemble(chunks)) == nil)
    }

    @Test("Every way a stored blob can be other than thumbpipe's thumbnail is named")
    func refused() throws {
        let made = try Self.thumbnail()
        let chunks = Self.chunks(made)
        let ihdr = chunks[0].1
        func withIHDR(_ change: (inout [UInt8]) -> Void) -> Data {
            var header = ihdr
            change(&header)
            return Self.assemble([("IHDR", header)] + chunks.dropFirst())
        }
        var flipped = made
        flipped[made.count / 2] ^= 0x01
        let cases: [(String, Data, String)] = [
            ("empty", Data(), "not a PNG"),
            ("a JPEG", Data([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 40)), "not a PNG"),
            ("the signature alone", made.prefix(8), "cut short after 8 bytes"),
            ("one byte short", made.dropLast(), "cut short"),
            ("a bit flipped in its data", flipped, "CRC does not match"),
            ("bytes after IEND", made + Data([0]), "bytes after its end"),
            (
                "another size",
                withIHDR {
                    $0[3] = 40; $0[7] = 40
                }, "40×40 pixels, not 80×80"
            ),
            ("16-bit", withIHDR { $0[8] = 16 }, "not 8-bit RGBA"),
            ("RGB without alpha", withIHDR { $0[9] = 2 }, "not 8-bit RGBA"),
            ("interlaced", withIHDR { $0[12] = 1 }, "not a plain (non-interlaced) PNG"),
            ("no IHDR first", Self.assemble(Array(chunks.dropFirst())), "no IHDR first"),
            ("IHDR twice", Self.assemble([chunks[0]] + chunks), "IHDR out of place"),
            ("no image data", Self.assemble(chunks.filter { $0.0 != "IDAT" }), "no image data"),
            (
                "an unknown critical chunk", Self.assemble([chunks[0], ("EVIL", [1, 2, 3])] + chunks.dropFirst()),
                "an unknown critical chunk 'EVIL'"
            ),
            (
                "a chunk claiming more than there is",
                made.prefix(33) + Data(Self.be32(0x7FFF_FFFF) + Array("IDAT".utf8) + [0, 0, 0, 0]),
                "cut short in chunk 2"
            ),
        ]
        for (name, bytes, expected) in cases {
            let problem = Self.problem(bytes)
            #expect(problem?.contains(expected) == true, "\(name): \(problem ?? "passed")")
        }
    }
}
