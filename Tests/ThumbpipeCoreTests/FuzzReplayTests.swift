import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// `make test` replays every fuzz target's corpus and regression files (Fuzz/),
/// without a sanitizer: each input must pass its target (no crash, no broken
/// property), so a change that breaks a parser on a known input is caught here.
@Suite("Fuzz replay: every corpus and regression file through its target", .vipsStarted)
struct FuzzReplayTests {
    static let fuzz = TestPaths.fixtures.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(_ target: FuzzTarget) -> [String] {
        ["Corpus", "Regressions"].flatMap { kind -> [String] in
            let folder = fuzz.appendingPathComponent(kind).appendingPathComponent(target.rawValue).path
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { folder + "/" + $0 }
        }
    }

    @Test("Each target's inputs pass it", arguments: FuzzTarget.allCases)
    func replay(target: FuzzTarget) throws {
        let inputs = Self.inputs(target)
        #expect(!inputs.isEmpty, "\(target.rawValue) has a corpus")
        for path in inputs {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let finding = data.withUnsafeBytes { target.run($0) }
            #expect(finding == nil, "\(path): \(finding ?? "")")
        }
    }

    @Test("The targets reach their checks: the JSONL line both paths read, the archive round trip, the JPEG's size")
    func targetsReachTheirChecks() throws {
        let line = Data(#"{"itemName":"A","valueInDollars":3}"#.utf8)
        #expect(line.withUnsafeBytes { FuzzTarget.jsonl.run($0) } == nil)
        let archive = try Data(
            contentsOf: Self.fuzz.appendingPathComponent("Corpus/archive/one-thumbnail.archive"))
        #expect(archive.withUnsafeBytes { FuzzTarget.archive.run($0) } == nil)
        // frameSize reads what the jpeg-planes target decides sizes by.
        let jpeg = try Data(contentsOf: Self.fuzz.appendingPathComponent("Corpus/jpeg-planes/odd-33x17.jpg"))
        let size = jpeg.withUnsafeBytes { FuzzTarget.frameSize($0) }
        #expect(size?.width == 26 && size?.height == 17, "\(String(describing: size))")
    }
}
