import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Decoders run in worker processes: a hostile source costs its own item, never the run.
@Suite("Worker isolation: crashes, hangs, signals, formats, warnings", .serialized)
struct IsolationTests {
    static let good = ["photos/Canon-EOS-1000D.jpg", "edge/webp-alpha_5_webp_a.webp", "edge/tiny-1x1-rgb_1x1.png"]

    /// A manifest of the good photos plus `extra` sources, keyed `good-N` and `extra-N`.
    func manifest(_ folder: String, extra: [String]) -> String {
        var lines = Self.good.enumerated().map { i, p in
            #"{"itemName": "Good \#(i)", "image": "\#(TestPaths.fixture(p))", "itemKey": "good-\#(i)"}"#
        }
        lines += extra.enumerated().map { i, p in
            #"{"itemName": "Extra \#(i)", "image": "\#(p)", "itemKey": "extra-\#(i)"}"#
        }
        return writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
    }

    /// Checks the run finished with a whole archive in which exactly `failed`
    /// failed (with `message`) and every other item has its thumbnail and store file.
    func expectOnlyFailed(_ out: String, _ failed: Set<String>, message: String) throws {
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let failures = try report.objects("failures")
        #expect(Set(failures.compactMap { $0["itemKey"] as? String }) == failed)
        for failure in failures {
            #expect((failure["message"] as? String)?.contains(message) == true, "\(failure)")
        }
        let reader = try KeyedArchiveReader(path: out + "/items.archive")
        #expect(reader.count == Self.good.count + failed.count)
        for index in 0..<reader.count {
            let item = try reader.item(at: index)
            let ok = !failed.contains(item.itemKey)
            #expect((item.thumbnailData != nil) == ok, "\(item.itemKey)")
            #expect(FileManager.default.fileExists(atPath: out + "/" + item.itemKey) == ok, "\(item.itemKey)")
        }
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) }, "no temporaries left")
    }

    /// A fresh folder with a copy of the fixture `fixture` named `name` (the
    /// name is what a fault hook matches), and the output folder to run into.
    func victim(_ label: String, _ fixture: String, as name: String) throws
        -> (folder: String, victim: String, out: String)
    {
        let folder = TestPaths.temporaryFolder(label)
        let victim = folder + "/" + name
        try FileManager.default.copyItem(atPath: TestPaths.fixture(fixture), toPath: victim)
        return (folder, victim, folder + "/out")
    }

    @Test("A source that crashes its decoder fails alone; the run completes with exit 1")
    func crash() throws {
        let (folder, victim, out) = try victim(
            "crash", "edge/orientation-1_Landscape_1.jpg", as: "crashes-the-decoder.jpg")
        let result = try runThumbpipe(
            ["run", manifest(folder, extra: [victim]), "-o", out, "-q", "--jobs", "2"],
            environment: ["THUMBPIPE_FAULT": "crash:crashes-the-decoder"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("decoder crashed (SIGSEGV)"), "\(result.stderr)")
        try expectOnlyFailed(out, ["extra-0"], message: "decoder crashed (SIGSEGV)")
    }

    @Test("A source that hangs its decoder fails alone after limits.timeoutSeconds")
    func hang() throws {
        let (folder, victim, out) = try victim("hang", "edge/tiny-1x1-rgb_1x1.png", as: "hangs-the-decoder.png")
        let result = try runThumbpipe(
            ["run", manifest(folder, extra: [victim]), "-o", out, "-q", "--set", "limits.timeoutSeconds=3"],
            environment: ["THUMBPIPE_FAULT": "hang:hangs-the-decoder"])
        #expect(result.status == 1, "\(result.stderr)")
        try expectOnlyFailed(out, ["extra-0"], message: "timed out after 3 s")
        // The deadline, measured inside the run: at least 3 s, and not much more.
        let seconds = try #require(
            try readJSONObject(out + "/.thumbpipe/report.json").object("throughput")["seconds"] as? Double)
        #expect(seconds >= 3 && seconds < 30, "the run took \(seconds) s")
    }

    @Test("Jobs queued behind a crash or a hang on one worker go to its replacement")
    func queuedBehindFaults() throws {
        let (folder, crasher, out) = try victim(
            "queued", "edge/orientation-1_Landscape_1.jpg", as: "crashes-the-decoder.jpg")
        let hanger = folder + "/hangs-the-decoder.png"
        try FileManager.default.copyItem(atPath: TestPaths.fixture("edge/tiny-1x1-rgb_1x1.png"), toPath: hanger)
        // One worker: each fault has the next item already queued behind it.
        let order = [crasher, TestPaths.fixture(Self.good[0]), hanger, TestPaths.fixture(Self.good[1])]
        let lines = order.enumerated().map { i, p in #"{"itemName": "\#(i)", "image": "\#(p)", "itemKey": "k\#(i)"}"# }
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let result = try runThumbpipe(
            ["run", manifest, "-o", out, "-q", "--jobs", "1", "--set", "limits.timeoutSeconds=2"],
            environment: ["THUMBPIPE_FAULT": "crash:crashes-the-decoder,hang:hangs-the-decoder"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("decoder crashed (SIGSEGV)"), "\(result.stderr)")
        #expect(result.stderr.contains("timed out after 2 s"), "\(result.stderr)")
        let reader = try KeyedArchiveReader(path: out + "/items.archive")
        let done = try (0..<reader.count).map { try reader.item(at: $0) }.filter { $0.thumbnailData != nil }
        #expect(done.map(\.itemKey) == ["k1", "k3"], "the items behind the faults are done")
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) }, "no temporaries left")
    }

    @Test("SIGTERM while a worker hangs: exit 143 within 2 s, no temporaries, no archive")
    func signalWhileHung() throws {
        let (folder, victim, out) = try victim("hang-signal", "photos/Canon-EOS-1000D.jpg", as: "hangs-the-decoder.jpg")
        // The worker writes the marker as it starts to hang (the run's order is
        // its own: the hanging source need not come last).
        let marker = folder + "/hung"
        writableByWorkers(folder)
        let process = try startThumbpipe(
            ["run", manifest(folder, extra: [victim]), "-o", out, "-q", "--jobs", "1"],
            environment: ["THUMBPIPE_FAULT": "hang:hangs-the-decoder", "THUMBPIPE_FAULT_MARKER": marker])
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline && !FileManager.default.fileExists(atPath: marker) {
            usleep(5_000)
        }
        // The marker is the event: the worker writes it as it starts to hang.
        try #require(FileManager.default.fileExists(atPath: marker), "the worker never hung")
        try #require(process.isRunning, "the run ended before the hang")
        let sent = Date()
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        let seconds = Date().timeIntervalSince(sent)
        #expect(process.terminationStatus == 143)
        #expect(seconds < 2, "exited \(seconds) s after SIGTERM")
        #expect(!listing(out).contains("items.archive"))
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
        // No worker of this run is left behind: found by the marker path in their
        // environment, which is this test's own (a name pattern would match the
        // workers of another test process running beside this one).
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let orphans = processes.filter { $0.allSatisfy(\.isNumber) }.filter { pid in
            guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
            return environ.split(separator: 0).contains { Array($0) == Array("THUMBPIPE_FAULT_MARKER=\(marker)".utf8) }
        }
        #expect(orphans.isEmpty, "workers left: \(orphans)")
    }

    @Test("A FIFO disguised as a photo fails alone at once")
    func fifo() throws {
        let folder = TestPaths.temporaryFolder("fifo")
        try #require(mkfifo(folder + "/blocks-forever.jpg", 0o644) == 0)
        let out = folder + "/out"
        let result = try runThumbpipe([
            "run", manifest(folder, extra: [folder + "/blocks-forever.jpg"]), "-o", out, "-q",
        ])
        #expect(result.status == 1, "\(result.stderr)")
        try expectOnlyFailed(out, ["extra-0"], message: "not a regular file")
    }

    @Test("Formats outside limits.formats are refused: SVG, and an ImageMagick script named .png")
    func disallowedFormats() throws {
        let folder = TestPaths.temporaryFolder("formats")
        let mvg = writeFile(
            folder, "innocent.png",
            "push graphic-context\nviewbox 0 0 640 480\nfill 'url(https://example.invalid/x.jpg)'\npop graphic-context\n"
        )
        let out = folder + "/out"
        let result = try runThumbpipe([
            "run", manifest(folder, extra: [TestPaths.fixture("edge/svg_check.svg"), mvg]), "-o", out, "-q",
        ])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("svg_check.svg: format SVG is not allowed (limits.formats)"), "\(result.stderr)")
        #expect(
            result.stderr.contains("innocent.png: format ImageMagick is not allowed (limits.formats)"),
            "\(result.stderr)")
        #expect(!result.stderr.contains("magick2vips"), "ImageMagick never saw the file")
        try expectOnlyFailed(out, ["extra-0", "extra-1"], message: "is not allowed (limits.formats)")
        // Named, the format is loaded.
        let allowed = try runThumbpipe([
            "run", manifest(folder, extra: [TestPaths.fixture("edge/svg_check.svg")]), "-o", folder + "/allowed", "-q",
            "--formats", "jpeg,png,webp,svg",
        ])
        #expect(allowed.status == 0, "\(allowed.stderr)")
    }

    @Test("Workers load libvips's ImageMagick module only when limits.formats names it")
    func modulesFollowFormats() throws {
        let folder = TestPaths.temporaryFolder("modules")
        // libvips 8.14 reads BMP through ImageMagick alone.
        let bmp = TestPaths.fixture("edge/bmp-rgba_small.bmp")
        let refused = try runThumbpipe(["run", manifest(folder, extra: [bmp]), "-o", folder + "/refused", "-q"])
        #expect(refused.status == 1, "\(refused.stderr)")
        try expectOnlyFailed(folder + "/refused", ["extra-0"], message: "is not allowed (limits.formats)")
        let allowed = try runThumbpipe([
            "run", manifest(folder, extra: [bmp]), "-o", folder + "/allowed", "-q", "--formats", "jpeg,png,webp,magick",
        ])
        #expect(allowed.status == 0, "the worker loaded the module it needs: \(allowed.stderr)")
    }

    @Test("A JPEG with corrupt entropy data is listed under warnings, or fails with --fail-on warning")
    func warnings() throws {
        let folder = TestPaths.temporaryFolder("warnings")
        var bytes = [UInt8](
            try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("edge/orientation-1_Landscape_1.jpg"))))
        // Stray restart markers in the middle of the entropy-coded data.
        for k in 0..<5 {
            let i = bytes.count / 2 + k * 997
            bytes[i] = 0xFF
            bytes[i + 1] = 0xD3
        }
        let corrupt = folder + "/corrupt-huffman.jpg"
        try Data(bytes).write(to: URL(fileURLWithPath: corrupt))
        let out = folder + "/out"
        let result = try runThumbpipe(["run", manifest(folder, extra: [corrupt]), "-o", out, "-q"])
        #expect(result.status == 0, "warnings alone do not fail the run: \(result.stderr)")
        #expect(result.stderr.contains("corrupt-huffman.jpg: warning: "), "\(result.stderr)")
        #expect(result.stderr.contains("4 done (1 with warnings)"), "\(result.stderr)")
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let warnings = try report.objects("warnings")
        #expect(warnings.count == 1)
        #expect(warnings.first?["itemKey"] as? String == "extra-0")
        #expect(warnings.first?["line"] as? Int == 4)
        let messages = try #require(warnings.first?["messages"] as? [String])
        #expect(messages.contains { $0.contains("Corrupt JPEG data") }, "\(messages)")
        #expect(try report.counts("counts")["withWarnings"] == 1)

        let strict = try runThumbpipe([
            "run", manifest(folder, extra: [corrupt]), "-o", folder + "/strict", "-q", "--fail-on", "warning",
        ])
        #expect(strict.status == 1, "\(strict.stderr)")
        try expectOnlyFailed(folder + "/strict", ["extra-0"], message: "JPEG")
    }

    /// A JPEG with an EXIF orientation tag inserted right after its SOI marker.
    func withOrientation(_ jpeg: [UInt8], _ orientation: UInt8) -> [UInt8] {
        let tiff: [UInt8] = [
            0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00,  // little-endian TIFF, IFD at 8
            0x01, 0x00,  // one entry
            0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, orientation, 0x00, 0x00, 0x00,  // Orientation, SHORT
            0x00, 0x00, 0x00, 0x00,  // no next IFD
        ]
        let body = Array("Exif".utf8) + [0, 0] + tiff
        let length = body.count + 2
        return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + body + jpeg.dropFirst(2)
    }

    @Test("limits.workerMemoryBytes fails a monstrous source alone")
    func memoryCap() throws {
        let folder = TestPaths.temporaryFolder("memory")
        // 280 Mpx turned by EXIF: the store must hold all of it (about 840 MB) to turn it upright.
        let huge = [UInt8](
            try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("edge/huge-20000x14000_giant-image.jpg"))))
        let turned = folder + "/huge-turned.jpg"
        try Data(withOrientation(huge, 6)).write(to: URL(fileURLWithPath: turned))
        let out = folder + "/out"
        let result = try runThumbpipe([
            "run", manifest(folder, extra: [turned]), "-o", out, "-q",
            "--set", "limits.maxPixels=300000000", "--set", "limits.workerMemoryBytes=536870912",
        ])
        #expect(result.status == 1, "\(result.stderr)")
        try expectOnlyFailed(out, ["extra-0"], message: "out of memory")
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let memory = try report.object("memory")
        let largest = try #require(memory["largestWorkerPeakRSSBytes"] as? Int)
        #expect(largest > 0 && largest <= 536_870_912, "largest worker \(largest) B")
        let peak = try #require(report["peakRSSBytes"] as? Int)
        #expect(peak > (memory["parentPeakRSSBytes"] as? Int ?? 0))
        // Shared pages counted once: never more than the summed RSS, never nothing.
        let proportional = try #require(memory["peakPSSBytes"] as? Int)
        #expect(proportional > 0 && proportional <= peak, "PSS \(proportional) B, RSS \(peak) B")
    }
}
