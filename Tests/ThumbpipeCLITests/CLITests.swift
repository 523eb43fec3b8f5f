import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

@Suite("thumbpipe command line")
struct CLITests {
    func manifest(_ lines: [String]) -> (folder: String, path: String) {
        let folder = TestPaths.temporaryFolder("cli")
        return (folder, writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n"))
    }

    @Test func runsAManifestEndToEnd() throws {
        let corpus = TestPaths.fixtures.path
        let (folder, path) = manifest([
            #"{"itemName": "Portrait", "serialNumber": "P1", "valueInDollars": 10, "image": "\#(corpus)/photos/Blackberry-Z10-small.jpg", "itemKey": "portrait"}"#,
            #"{"itemName": "Dice", "valueInDollars": 3, "image": "\#(corpus)/edge/png-palette-trns_paletted-transparent.png", "itemKey": "dice"}"#,
            #"{"itemName": "Gift card", "itemKey": "card"}"#,
            #"{"itemName": "Lost watch", "image": "lost.jpg", "itemKey": "lost"}"#,
        ])
        let out = folder + "/out"
        let result = try runThumbpipe(["run", path, "-o", out, "--jobs", "2", "-q"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("items.jsonl:4: lost.jpg: file not found"))
        #expect(result.stderr.contains("4 items"))
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: out))
        #expect(names == ["items.archive", "portrait", "dice", ".thumbpipe"])
        let upright = try DecodedTestImage.load(out + "/portrait", autorotate: true)
        #expect(upright.width == 459 && upright.height == 816)

        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let counts = try report.counts("counts")
        #expect(counts == ["items": 4, "succeeded": 2, "failed": 1, "withoutImage": 1, "withWarnings": 0])
        let failures = try report.objects("failures")
        #expect(failures.count == 1)
        #expect(failures[0]["line"] as? Int == 4 && failures[0]["stage"] as? String == "decode")
        #expect((report["stages"] as? [String: Any])?["decode"] != nil)
        #expect((report["peakRSSBytes"] as? Int ?? 0) > 0)

        let inspect = try runThumbpipe(["inspect", out + "/items.archive"])
        #expect(inspect.status == 0)
        #expect(
            inspect.stdout.contains("portrait") && inspect.stdout.contains("80×80")
                && inspect.stdout.contains("Lost watch"))
        let json = try runThumbpipe(["inspect", out + "/items.archive", "--json"])
        let lines = json.stdout.split(separator: "\n")
        try #require(lines.count == 4)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(first["itemKey"] as? String == "portrait" && first["valueInDollars"] as? Int == 10)
        #expect(first["thumbnailWidth"] as? Int == 80)

        let extracted = folder + "/thumbs"
        let extract = try runThumbpipe(["extract", out + "/items.archive", extracted])
        #expect(extract.status == 0)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: extracted)) == ["portrait.png", "dice.png"])
    }

    @Test("--trace-sample N traces one item in N; a trace past its cap counts the items it leaves out")
    func traceIsBounded() throws {
        let corpus = TestPaths.fixtures.path
        let (folder, path) = manifest(
            (0..<6).map {
                #"{"itemName": "I\#($0)", "image": "\#(corpus)/edge/tiny-1x1-rgb_1x1.png", "itemKey": "k\#($0)"}"#
            })
        let trace = folder + "/trace.json"
        let result = try runThumbpipe(
            ["run", path, "-o", folder + "/out", "--jobs", "1", "--trace", trace, "--trace-sample", "3", "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: trace))) as? [String: Any])
        let spans = try #require(json["traceEvents"] as? [[String: Any]]).filter { $0["ph"] as? String == "X" }
        let keys = Set(spans.compactMap { ($0["args"] as? [String: Any])?["itemKey"] as? String })
        #expect(keys.count == 2, "one in three of six items: \(keys.sorted())")
        #expect(try runThumbpipe(["run", path, "-o", folder + "/out", "--trace-sample", "0"]).status == 64)
        // The cap, small: the first item fills it, the rest are counted; the file is still a whole trace.
        let capped = folder + "/capped.json"
        let writer = try TraceWriter(target: .own(capped), workers: 1, byteLimit: 10)
        var spansOfItem = Spans()
        spansOfItem.measure(.decode) {}
        for i in 0..<5 { writer.record(spansOfItem, worker: 0, itemKey: "k\(i)", line: i + 1) }
        try writer.finish()
        #expect(writer.droppedItems == 4)
        #expect(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: capped))) is [String: Any])
    }

    @Test func traceOpensAsChromeTraceEvents() throws {
        let corpus = TestPaths.fixtures.path
        let (folder, path) = manifest([
            #"{"itemName": "A", "image": "\#(corpus)/photos/Nikon-D3100.jpg", "itemKey": "a"}"#,
            #"{"itemName": "B", "image": "\#(corpus)/edge/webp-alpha_5_webp_a.webp", "itemKey": "b"}"#,
            #"{"itemName": "C", "image": "\#(corpus)/edge/tiny-1x1-rgb_1x1.png", "itemKey": "c"}"#,
        ])
        let trace = folder + "/trace.json"
        let result = try runThumbpipe(["run", path, "-o", folder + "/out", "--jobs", "2", "--trace", trace, "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: trace))) as? [String: Any])
        let events = try #require(json["traceEvents"] as? [[String: Any]])
        let spans = events.filter { $0["ph"] as? String == "X" }
        #expect(
            Set(spans.compactMap { $0["name"] as? String }).isSuperset(of: [
                "decode", "scale", "clip", "encode", "store",
            ]))
        #expect(Set(spans.compactMap { ($0["args"] as? [String: Any])?["itemKey"] as? String }) == ["a", "b", "c"])
        // Spans carry the source's facts, and a full decode is never counted as "store".
        let a = try #require(spans.first { ($0["args"] as? [String: Any])?["itemKey"] as? String == "a" })
        let args = try #require(a["args"] as? [String: Any])
        #expect(args["file"] as? String == "Nikon-D3100.jpg" && args["format"] as? String == "JPEG")
        #expect((args["megapixels"] as? Double ?? 0) > 14 && (args["bytes"] as? Int ?? 0) > 3_000_000)
        #expect(Set(spans.compactMap { $0["name"] as? String }).isSuperset(of: ["header", "decode", "store", "write"]))
        #expect(Set(spans.compactMap { $0["tid"] as? Int }).isSubset(of: [1, 2]))
        #expect(spans.allSatisfy { ($0["dur"] as? Double ?? -1) >= 0 && ($0["ts"] as? Double ?? -1) >= 0 })
        let names = events.filter { $0["name"] as? String == "thread_name" }.count
        #expect(names == 2, "one named track per worker")
    }

    @Test func allGoodItemsExitZero() throws {
        let corpus = TestPaths.fixtures.path
        let (folder, path) = manifest([#"{"itemName": "One", "image": "\#(corpus)/edge/tiny-1x1-rgb_1x1.png"}"#])
        let result = try runThumbpipe(["run", path, "-o", folder + "/out", "--scale", "3"])
        #expect(result.status == 0, "\(result.stderr)")
        let reader = try KeyedArchiveReader(path: folder + "/out/items.archive")
        let png = try #require(try reader.item(at: 0).thumbnailData, "the item has a thumbnail")
        #expect(try #require(PNGInfo.size(png)) == (120, 120))
    }

    @Test(arguments: [
        (["--version"], Int32(0), "thumbpipe 0.1.0"),
        (["--help"], 0, "USAGE"),
        (["run", "--help"], 0, "--pipeline"),
        (["inspect", "--help"], 0, "--json"),
        (["extract", "--help"], 0, "DIR"),
        (["frobnicate"], 64, "unknown command"),
        (["rnu"], 64, "unknown command 'rnu'; did you mean 'run'?"),
        (["run", "x.jsonl", "--jbos", "2"], 64, "did you mean '--jobs'?"),
        (["run", "x.jsonl", "--output", "--force"], 64, "--output needs a value, but '--force' follows it"),
        (["run", "x.jsonl", "--json"], 64, "--json goes with --dry-run"),
        (["run", "x.jsonl", "--quality", "150"], 64, "--quality must be from 0 to 1"),
        (["contact-sheet", "a.archive", "-o", "sheet.jpg"], 64, "contact-sheet writes PNG files"),
        (["scan"], 64, "scan needs at least one DIR"),
        ([], 64, "USAGE"),
        (["run"], 64, "needs a MANIFEST"),
        (["run", "x.jsonl", "--jobs", "zero"], 64, "--jobs"),
        (["run", "x.jsonl", "--bogus"], 64, "unknown option '--bogus'"),
        (["run", "/nonexistent/items.jsonl"], 66, "cannot open manifest"),
        (["run", "x.jsonl", "--pipeline", "nope"], 66, "pipeline 'nope' not found"),
        (["inspect", "/nonexistent/items.archive"], 66, "cannot open"),
    ])
    func commandLine(arguments: [String], status: Int32, text: String) throws {
        let result = try runThumbpipe(arguments)
        #expect(result.status == status, "\(result.stderr)")
        #expect((result.stdout + result.stderr).contains(text), "\(result.stdout)\(result.stderr)")
    }

    @Test func badManifestExits65AndWritesNothing() throws {
        let (folder, path) = manifest([#"{"itemName": "A"}"#, #"{"itemName": "B", "itemKey": "../x"}"#])
        let result = try runThumbpipe(["run", path, "-o", folder + "/out"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("items.jsonl:2: itemKey '../x' is not a safe file name"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/out"))
    }

    @Test func corruptArchiveExits65WithOneLine() throws {
        let folder = TestPaths.temporaryFolder("cli")
        let path = writeFile(folder, "items.archive", "bplist00 but not really, and long enough to have a trailer ....")
        let result = try runThumbpipe(["inspect", path])
        #expect(result.status == 65)
        #expect(result.stderr.split(separator: "\n").count == 1)
    }

    @Test func unwritableOutputExits73() throws {
        let (folder, path) = manifest([#"{"itemName": "A"}"#])
        writeFile(folder, "file", "x")
        let result = try runThumbpipe(["run", path, "-o", folder + "/file/out"])
        #expect(result.status == 73, "\(result.stderr)")
    }

    @Test("One clock per stage: --trace's spans add up to report.json's stage totals, write included")
    func traceAgreesWithReport() throws {
        let folder = TestPaths.temporaryFolder("trace-agrees")
        let lines = ["photos/Nikon-D3100.jpg", "photos/Canon-EOS-1000D.jpg", "photos/Nikon-Coolpix-P7000.webp"]
            .enumerated()
            .map { #"{"itemName": "P\#($0.offset)", "image": "\#(TestPaths.fixture($0.element))"}"# }
        let path = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let result = try runThumbpipe(["run", path, "-o", folder + "/out", "-q", "--trace", folder + "/trace.json"])
        #expect(result.status == 0, "\(result.stderr)")
        let trace = try readJSONObject(folder + "/trace.json")
        let events = try #require(trace["traceEvents"] as? [[String: Any]])
        var sums: [String: Double] = [:]
        for event in events where event["ph"] as? String == "X" {
            sums[event["name"] as? String ?? "?", default: 0] += (event["dur"] as? Double ?? 0) / 1e6
        }
        let stages = try readJSONObject(folder + "/out/.thumbpipe/report.json").object("stages")
        #expect((sums["write"] ?? 0) > 0, "the parent's writes are in the trace: \(sums)")
        for (stage, traced) in sums {
            let reported = try #require((stages[stage] as? [String: Any])?["totalSeconds"] as? Double, "\(stage)")
            #expect(
                abs(reported - traced) <= max(0.002, reported * 0.02),
                "\(stage): report \(reported) s, trace \(traced) s")
        }
    }

    @Test("A reader that went away (inspect --json | head -1, --dry-run | head) ends it quietly, status 0")
    func brokenPipeIsQuiet() throws {
        let (folder, path) = manifest([#"{"itemName": "A"}"#, #"{"itemName": "B"}"#])
        let built = try runThumbpipe(["run", path, "-o", folder + "/out", "-q"])
        #expect(built.status == 0, "\(built.stderr)")
        for arguments in [
            ["inspect", folder + "/out/items.archive", "--json"], ["inspect", folder + "/out/items.archive"],
            ["run", path, "-o", folder + "/out", "--dry-run"], ["pipeline", "show"],
        ] {
            // A pipe whose reader is gone before the first byte: EPIPE on every write, every time.
            let output = Pipe()
            try output.fileHandleForReading.close()
            let errors = Pipe()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestPaths.executable)
            process.arguments = arguments
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            try output.fileHandleForWriting.close()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(arguments): \(stderr)")
            #expect(!stderr.contains("Broken pipe") && !stderr.contains("cannot write"), "\(arguments): \(stderr)")
        }
    }
}

@Suite("Contact sheet")
struct ContactSheetTests {
    @Test("The samples' contact sheet holds every thumbnail at its place")
    func samplesSheet() throws {
        let folder = TestPaths.temporaryFolder("sheet")
        let manifest = TestPaths.repository.appendingPathComponent("samples/items.jsonl").path
        let run = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(run.status == 1, "one sample photo is missing on purpose: \(run.stderr)")
        let archive = folder + "/out/items.archive"
        let sheetPath = folder + "/sheet.png"
        let result = try runThumbpipe(["contact-sheet", archive, "-o", sheetPath, "--columns", "5"])
        #expect(result.status == 0, "\(result.stderr)")

        let reader = try KeyedArchiveReader(path: archive)
        let layout = ContactSheet(columns: 5, perSheet: 100).layout
        let sheet = try DecodedTestImage.load(sheetPath)
        let expected = layout.size(items: reader.count)
        #expect(sheet.width == expected.width && sheet.height == expected.height)
        #expect(expected == (5 * layout.cellWidth, 3 * layout.cellHeight))
        var checked = 0
        for index in 0..<reader.count {
            let origin = layout.thumbnailOrigin(of: index)
            guard let png = try reader.item(at: index).thumbnailData else {
                // No thumbnail: a dark box.
                #expect(sheet[origin.x + 40, origin.y + 40][0] < ContactSheet.background)
                continue
            }
            let thumbnail = try DecodedTestImage.load(png: png)
            for y in 0..<thumbnail.height {
                for x in 0..<thumbnail.width {
                    let source = thumbnail[x, y]
                    let target = sheet[origin.x + x, origin.y + y]
                    let a = Int(source[3])
                    for c in 0..<3 {
                        let blended = (Int(source[c]) * a + Int(ContactSheet.background) * (255 - a) + 127) / 255
                        #expect(abs(Int(target[c]) - blended) <= 1, "item \(index) pixel (\(x),\(y))")
                    }
                }
            }
            checked += 1
        }
        #expect(checked == 12)
    }

    @Test("Past --per-sheet items, sheets continue")
    func paging() throws {
        let items = sampleArchiveItems(7)
        let path = TestPaths.temporaryFolder("sheet") + "/items.archive"
        let writer = try KeyedArchiveWriter(path: path, className: "BNRItem", itemCount: items.count)
        for item in items { try writer.append(item) }
        try writer.finish()
        let base = TestPaths.temporaryFolder("sheet") + "/s.png"
        let result = try runThumbpipe(["contact-sheet", path, "-o", base, "--per-sheet", "3", "--columns", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        let folder = URL(fileURLWithPath: base).deletingLastPathComponent().path
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: folder)) == ["s.png", "s-2.png", "s-3.png"])
        let last = try DecodedTestImage.load(folder + "/s-3.png")
        let layout = ContactSheet(columns: 2, perSheet: 3).layout
        #expect(last.width == layout.size(items: 1).width && last.height == layout.size(items: 1).height)
    }
}

/// Items with no thumbnail, for layout tests.
func sampleArchiveItems(_ count: Int) -> [ArchivedItem] {
    (0..<count).map {
        ArchivedItem(
            itemName: "Item \($0)", serialNumber: "", valueInDollars: 0, dateCreated: Date(timeIntervalSince1970: 0),
            itemKey: "k\($0)", thumbnailData: nil)
    }
}
