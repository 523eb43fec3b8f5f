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
