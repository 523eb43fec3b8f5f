import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A decoder exploited by a crafted file is confined: it cannot write outside
/// the run's work folder, reach the network or start a program.
@Suite("Sandbox: a worker confined before it reads a source", .serialized)
struct SandboxTests {
    static let support = Sandbox.probe()

    func collection() throws -> (folder: String, manifest: String) {
        try photoCollection(
            "sandbox", [("a.jpg", "Nikon-D3100.jpg", "A", nil), ("evil.jpg", "Canon-EOS-1000D.jpg", "Evil", nil)])
    }

    func escapes(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("thumbpipe-escape-") }
    }

    @Test("An escaping decoder is refused a file outside its folder, a TCP socket and exec; its item fails alone")
    func escapeRefused() throws {
        guard Self.support.complete else {
            print("sandbox test skipped: this kernel offers \(Self.support)")
            return
        }
        let (folder, manifest) = try collection()
        let result = try runThumbpipe(
            ["run", manifest, "-o", folder + "/out", "-q"], environment: ["THUMBPIPE_FAULT": "escape:evil.jpg"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("evil.jpg: the sandbox refused every escape: write "), "\(result.stderr)")
        #expect(result.stderr.contains("TCP socket: Operation not permitted"))
        #expect(result.stderr.contains("exec /bin/true: Operation not permitted"))
        #expect(try escapes(in: folder).isEmpty, "no file appeared beside the source")
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        #expect(try report.counts("counts")["succeeded"] == 1, "the other item is done")
        #expect((report["sandbox"] as? String)?.contains("Landlock ABI") == true)
        #expect((report["sandbox"] as? String)?.contains("seccomp") == true)
        // required: the same protections, and the run goes on.
        let required = try runThumbpipe(["run", manifest, "-o", folder + "/out2", "-q", "--sandbox", "required"])
        #expect(required.status == 0, "\(required.stderr)")
    }

    @Test("Without the sandbox, the same decoder escapes: the test above can fail")
    func escapeWithoutSandbox() throws {
        let (folder, manifest) = try collection()
        let result = try runThumbpipe(
            ["run", manifest, "-o", folder + "/out", "-q", "--sandbox", "off"],
            environment: ["THUMBPIPE_FAULT": "escape:evil.jpg"])
        #expect(result.status == 1)
        #expect(try escapes(in: folder).count == 1, "with --sandbox off the write outside goes through")
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        #expect(report["sandbox"] as? String == "off (--sandbox off)")
    }

    @Test("--version says which protections the kernel offers; --sandbox takes only its three modes")
    func versionAndModes() throws {
        let version = try runThumbpipe(["--version"])
        #expect(version.stdout.contains("sandbox \(Self.support)"), "\(version.stdout)")
        let bad = try runThumbpipe(["run", "x.jsonl", "--sandbox", "strict"])
        #expect(bad.status == 64 && bad.stderr.contains("--sandbox takes required, auto or off"))
    }
}
