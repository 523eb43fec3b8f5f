import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// The small things a new user met (issue 35, point 6 and 16): each says what it
/// should, and nothing is taken that should not be.
@Suite("Leftovers: numbers, BOMs, devices, a closed stdin, the dry run's refusals, the wall time")
struct LeftoversTests {
    func manifest(_ lines: [String]) -> (folder: String, path: String) {
        let folder = TestPaths.temporaryFolder("leftovers")
        return (folder, writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n"))
    }

    @Test(
        "Numbers are decimal: --timeout 0x10 and 1e-320 are refused as --jobs 0x10 is; a pipeline's \"60\" (a string) too",
        arguments: [["--timeout", "0x10"], ["--timeout", "1e-320"], ["--timeout", "inf"], ["--jobs", "0x10"]])
    func decimalNumbers(flag: [String]) throws {
        let (folder, path) = manifest([#"{"itemName": "A"}"#])
        let result = try runThumbpipe(["run", path, "-o", folder + "/out", "-q"] + flag)
        #expect(result.status == 64, "\(flag): \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/out/items.archive"))
    }

    @Test("A pipeline file's number written as a string is refused; decimals and a BOM are fine")
    func pipelineNumbers() throws {
        let folder = TestPaths.temporaryFolder("leftovers-pipeline")
        let quoted = writeFile(folder, "quoted.json", #"{"thumbnail": {"width": "60"}}"#)
        let refused = try runThumbpipe(["pipeline", "show", quoted])
        #expect(refused.status == 65 && refused.stderr.contains("thumbnail.width must be a number, found a string"))
        let bom = folder + "/bom.json"
        try (Data([0xEF, 0xBB, 0xBF]) + Data(#"{"thumbnail": {"width": 50}}"#.utf8)).write(
            to: URL(fileURLWithPath: bom))
        let shown = try runThumbpipe(["pipeline", "show", bom])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("50"), "\(shown.stdout)")
    }

    @Test("A UTF-8 BOM opens a .json manifest as it does .jsonl and .csv")
    func bomJSON() throws {
        let folder = TestPaths.temporaryFolder("leftovers-bom")
        let path = folder + "/items.json"
        try (Data([0xEF, 0xBB, 0xBF]) + Data(#"[{"itemName": "A"}]"#.utf8)).write(to: URL(fileURLWithPath: path))
        let result = try runThumbpipe(["run", path, "-o", folder + "/out", "-q"])
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test("/dev/null as a manifest, and run - with stdin closed, say what they are")
    func devicesAndClosedInput() throws {
        let folder = TestPaths.temporaryFolder("leftovers-device")
        let null = try runThumbpipe(["run", "/dev/null", "-o", folder + "/out", "-q"])
        #expect(null.status == 66 && null.stderr.contains("not a manifest file (a device or socket)"), "\(null.stderr)")
        #expect(!null.stderr.contains("permission denied"))
        let closed = try runProcess(
            "/bin/sh", ["-c", "exec \"$0\" run - -o \"$1\" -q <&-", TestPaths.executable, folder + "/out2"])
        #expect(closed.status == 66 && closed.stderr.contains("standard input is closed"), "\(closed.stderr)")
    }

    @Test("--dry-run refuses what the run refuses: a reserved key (65)")
    func dryRunRefusesAlike() throws {
        let (folder, path) = manifest([#"{"itemName": "A", "itemKey": "items.archive"}"#])
        let dry = try runThumbpipe(["run", path, "-o", folder + "/out", "--dry-run"])
        let run = try runThumbpipe(["run", path, "-o", folder + "/out", "-q"])
        #expect(run.status == 65 && dry.status == 65, "\(dry.stderr)")
        #expect(dry.stderr.contains("is reserved"), "\(dry.stderr)")
    }

    @Test("The summary gives the wall time of the whole command, not only the items'")
    func wallTime() throws {
        let (folder, path) = manifest([#"{"itemName": "A"}"#, #"{"itemName": "B"}"#])
        #expect(try runThumbpipe(["run", path, "-o", folder + "/out", "-q"]).status == 0)
        let started = Date()
        let again = try runThumbpipe(["run", path, "-o", folder + "/out"])
        let elapsed = Date().timeIntervalSince(started)
        let line = try #require(again.stderr.split(separator: "\n").first { $0.contains(" items in ") })
        let seconds = try #require(
            line.split(separator: " ").firstIndex(of: "in").map { Double(line.split(separator: " ")[$0 + 1]) ?? -1 })
        // A process takes tens of milliseconds to start, plan and write; the summary says so.
        #expect(seconds >= 0.02 && seconds <= elapsed + 0.05, "\(line) for a \(elapsed) s process")
    }
}
