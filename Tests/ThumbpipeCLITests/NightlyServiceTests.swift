import Foundation
import Testing
import ThumbpipeTestSupport

/// What a plain server's nightly run gives its operator: Prometheus textfile
/// metrics that Debian's promtool accepts and node-exporter serves, a last
/// success that a failed night leaves where it was, and journald priorities.
@Suite("Nightly on a server: metrics and the journal", .serialized)
struct NightlyServiceTests {
    static let promtool = "/usr/bin/promtool"
    static let nodeExporter = "/usr/bin/prometheus-node-exporter"

    /// A collection of two photos and its folder.
    func collection(_ label: String) throws -> (folder: String, photos: String) {
        let folder = TestPaths.temporaryFolder(label)
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        for name in ["Sigma-DP1-small", "Leica-T-Typ-701-small"] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/\(name).jpg"), toPath: photos + "/\(name).jpg")
        }
        return (folder, photos)
    }

    /// `promtool check metrics < file`.
    func promtool(_ file: String) throws -> ProcessResult {
        try runProcess("/bin/sh", ["-c", #""$1" check metrics < "$2""#, "sh", Self.promtool, file])
    }

    /// The value of the sample `name{labels}` in a textfile.
    func sample(_ text: String, _ series: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap {
            Double($0.dropFirst(series.count + 1))
        }
    }

    @Test("run --metrics: promtool accepts the file; a failed night moves the last run, not the last success")
    func metrics() throws {
        let (folder, photos) = try collection("metrics")
        let file = folder + "/textfiles/thumbpipe-family.prom"
        try FileManager.default.createDirectory(atPath: folder + "/textfiles", withIntermediateDirectories: true)
        let run = ["run", photos, "-o", folder + "/out", "-q", "--metrics", file, "--collection", "family"]
        let first = try runThumbpipe(run)
        #expect(first.status == 0, "\(first.stderr)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let success = try #require(sample(text, #"thumbpipe_last_success_timestamp_seconds{collection="family"}"#))
        #expect(sample(text, #"thumbpipe_items{collection="family",outcome="done"}"#) == 2, "\(text)")
        #expect((sample(text, #"thumbpipe_bytes_written{collection="family"}"#) ?? 0) > 1000, "\(text)")
        let checked = try promtool(file)
        #expect(checked.status == 0, "promtool: \(checked.stdout) \(checked.stderr)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder + "/textfiles") == ["thumbpipe-family.prom"],
            "nothing left beside it")

        // A night that fails (the manifest's folder is gone): the last run moves, the last success stays.
        try FileManager.default.moveItem(atPath: photos, toPath: folder + "/elsewhere")
        Thread.sleep(forTimeInterval: 0.01)
        let failed = try runThumbpipe(run)
        #expect(failed.status == 66, "\(failed.stderr)")
        let after = try String(contentsOfFile: file, encoding: .utf8)
        #expect(sample(after, #"thumbpipe_last_success_timestamp_seconds{collection="family"}"#) == success)
        #expect(
            (sample(after, #"thumbpipe_last_run_timestamp_seconds{collection="family"}"#) ?? 0) > success, "\(after)")
        #expect(sample(after, #"thumbpipe_last_exit_status{collection="family"}"#) == 66)
        #expect(try promtool(file).status == 0)
        // Back: an unchanged night is a success, and counts its items as unchanged.
        try FileManager.default.moveItem(atPath: folder + "/elsewhere", toPath: photos)
        #expect(try runThumbpipe(run).status == 0)
        let back = try String(contentsOfFile: file, encoding: .utf8)
        #expect((sample(back, #"thumbpipe_last_success_timestamp_seconds{collection="family"}"#) ?? 0) > success)
        #expect(sample(back, #"thumbpipe_items{collection="family",outcome="unchanged"}"#) == 2, "\(back)")
    }

    @Test("node-exporter's textfile collector serves the metrics")
    func servedByNodeExporter() throws {
        let (folder, photos) = try collection("exporter")
        let textfiles = folder + "/textfiles"
        try FileManager.default.createDirectory(atPath: textfiles, withIntermediateDirectories: true)
        let result = try runThumbpipe([
            "run", photos, "-o", folder + "/out", "-q", "--metrics", textfiles + "/thumbpipe-family.prom",
            "--collection", "family",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let port = 20_000 + Int(getpid() % 20_000)
        let exporter = Process()
        exporter.executableURL = URL(fileURLWithPath: Self.nodeExporter)
        exporter.arguments = [
            "--web.listen-address=127.0.0.1:\(port)", "--collector.disable-defaults", "--collector.textfile",
            "--collector.textfile.directory=\(textfiles)",
        ]
        exporter.standardOutput = FileHandle.nullDevice
        exporter.standardError = FileHandle.nullDevice
        try exporter.run()
        defer { exporter.terminate() }
        var served = ""
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline && !served.contains("thumbpipe_items") {
            served =
                (try? runProcess(
                    "/usr/bin/python3",
                    [
                        "-c",
                        "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())",
                        "http://127.0.0.1:\(port)/metrics",
                    ]
                ).stdout) ?? ""
            if !served.contains("thumbpipe_items") { usleep(100_000) }
        }
        #expect(served.contains(#"thumbpipe_items{collection="family",outcome="done"} 2"#), "\(served.prefix(2000))")
        #expect(served.contains(#"node_textfile_scrape_error 0"#), "the collector read it without an error")
    }

    @Test("To the journal (JOURNAL_STREAM is stderr), lines carry priorities; elsewhere they do not")
    func journalPriorities() throws {
        let (folder, photos) = try collection("journal")
        try Data("not a photo".utf8).write(to: URL(fileURLWithPath: photos + "/broken.jpg"))
        _ = writeFile(
            folder, "items.jsonl",
            [
                #"{"itemName": "A", "image": "photos/Sigma-DP1-small.jpg"}"#,
                #"{"itemName": "B", "image": "photos/gone.jpg"}"#,
            ].joined(separator: "\n") + "\n")
        let log = folder + "/stderr.log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let info = try FileManager.default.attributesOfItem(atPath: log)
        let device = (info[.systemNumber] as? NSNumber)?.uint64Value ?? 0
        let inode = (info[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        let script = #""$1" run items.jsonl -o out >/dev/null 2>>"$2""#
        let journal = try runProcess(
            "/bin/sh", ["-c", script, "sh", TestPaths.executable, log],
            environment: ["JOURNAL_STREAM": "\(device):\(inode)"], in: folder)
        #expect(journal.status == 1)
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("<3>items.jsonl:2: photos/gone.jpg: file not found") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("<6>thumbpipe: 2 items") }, "\(lines)")
        #expect(lines.allSatisfy { $0.hasPrefix("<") }, "every line has its priority: \(lines)")
        // The variable inherited by a program whose stderr goes elsewhere: no prefixes.
        let plain = try runThumbpipe(
            ["run", "items.jsonl", "-o", "out"], environment: ["JOURNAL_STREAM": "\(device):\(inode)"], in: folder)
        #expect(plain.stderr.contains("items.jsonl:2: photos/gone.jpg: file not found"))
        #expect(!plain.stderr.contains("<3>") && !plain.stderr.contains("<6>"), "\(plain.stderr)")
    }
}
