import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A folder of real photos (copied, so a test may change them) and a manifest over them.
struct Collection {
    let folder: String
    let manifest: String
    static let photos = [
        "photos/Nikon-D3100.jpg", "photos/Canon-EOS-1000D.jpg", "edge/webp-alpha_5_webp_a.webp",
        "edge/png-palette-trns_paletted-transparent.png", "photos/FujiFilm-FinePix-F40fd-small.jpg",
    ]

    init(extra: [String] = []) throws {
        folder = TestPaths.temporaryFolder("nightly")
        var lines: [String] = []
        for (i, relative) in Self.photos.enumerated() {
            let name = "p\(i)." + URL(fileURLWithPath: relative).pathExtension
            try FileManager.default.copyItem(atPath: TestPaths.fixture(relative), toPath: folder + "/" + name)
            lines.append(
                #"{"itemName": "Item \#(i)", "valueInDollars": \#(i), "image": "\#(name)", "itemKey": "k\#(i)"}"#)
        }
        lines.append(#"{"itemName": "Gift card", "itemKey": "card"}"#)
        manifest = writeFile(folder, "items.jsonl", (lines + extra).joined(separator: "\n") + "\n")
    }

    func run(_ out: String, _ flags: [String] = []) throws -> (status: Int32, report: [String: Any], stderr: String) {
        let result = try runThumbpipe(["run", manifest, "-o", folder + "/" + out, "-q"] + flags)
        return (result.status, try readJSONObject(folder + "/" + out + "/.thumbpipe/report.json"), result.stderr)
    }

    func incremental(_ report: [String: Any]) -> [String: Int] {
        (report["incremental"] as? [String: Any] ?? [:]).compactMapValues { $0 as? Int }
    }

    func archive(_ out: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: folder + "/" + out + "/items.archive"))
    }

    func file(_ out: String, _ key: String) -> Data? {
        try? Data(contentsOf: URL(fileURLWithPath: folder + "/" + out + "/" + key))
    }

    func modified(_ out: String, _ key: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: folder + "/" + out + "/" + key))?[.modificationDate] as? Date
    }

    /// Checks the incremental output equals a fresh full run with the same inputs and flags.
    func expectSameAsFresh(_ out: String, _ flags: [String] = [], sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let fresh = "fresh-\(UUID().uuidString)"
        let result = try run(fresh, flags)
        #expect(result.status == 0, sourceLocation: sourceLocation)
        #expect(try archive(out) == archive(fresh), "archive differs from a fresh run", sourceLocation: sourceLocation)
        for key in (0..<Self.photos.count).map({ "k\($0)" }) {
            #expect(file(out, key) == file(fresh, key), "store file \(key) differs", sourceLocation: sourceLocation)
        }
    }
}

@Suite("Nightly regeneration", .serialized)
struct IncrementalTests {
    @Test("An unchanged re-run decodes nothing and writes the same archive")
    func unchanged() throws {
        let c = try Collection()
        let first = try c.run("out")
        #expect(first.status == 0)
        #expect(c.incremental(first.report)["decoded"] == 5)
        let before = try c.archive("out")
        let stamp = c.modified("out", "k0")
        let second = try c.run("out")
        #expect(second.status == 0)
        let counts = c.incremental(second.report)
        #expect(counts["decoded"] == 0 && counts["unchanged"] == 6 && counts["new"] == 0)
        #expect(try #require(try second.report.object("incremental")["timeSavedSeconds"] as? Double) > 0)
        #expect(try c.archive("out") == before)
        #expect(c.modified("out", "k0") == stamp, "store file kept")
        try c.expectSameAsFresh("out")
    }

    @Test(
        "A switch that changes output bytes (THUMBPIPE_JPEG_PLANES=off, VIPS_NOVECTOR) is in the fingerprints: the next night redoes the outputs",
        arguments: [["THUMBPIPE_JPEG_PLANES": "off"], ["VIPS_NOVECTOR": "1"]])
    func switchesAreFingerprinted(environment: [String: String]) throws {
        let c = try Collection()
        #expect(try c.run("out").status == 0)
        let switched = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"], environment: environment)
        #expect(switched.status == 0, "\(switched.stderr)")
        let counts = c.incremental(try readJSONObject(c.folder + "/out/.thumbpipe/report.json"))
        #expect(counts["decoded"] == 5 && counts["unchanged"] == 1, "\(counts)")
        // And under the same switch again: nothing to do; without it: redone back.
        let same = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"], environment: environment)
        #expect(same.status == 0)
        #expect(c.incremental(try readJSONObject(c.folder + "/out/.thumbpipe/report.json"))["decoded"] == 0)
        #expect(c.incremental(try c.run("out").report)["decoded"] == 5)
    }

    @Test("A replaced source is redone, alone")
    func replacedSource() throws {
        let c = try Collection()
        _ = try c.run("out")
        let target = c.folder + "/p1.jpg"
        try FileManager.default.removeItem(atPath: target)
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: target)
        let second = try c.run("out")
        let counts = c.incremental(second.report)
        #expect(counts["changed"] == 1 && counts["decoded"] == 1)
        try c.expectSameAsFresh("out")
    }

    @Test("An edit that kept size and mtime is caught by its change time; --verify-content by its bytes")
    func verifyContent() throws {
        let c = try Collection()
        _ = try c.run("out")
        let target = c.folder + "/p0.jpg"
        var info = stat()
        stat(target, &info)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: target)))
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        // Put the modification time back to the nanosecond, as an edit that keeps it would.
        let times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, target, times, 0) == 0)
        let verified = try c.run("out", ["--verify-content"])
        #expect(c.incremental(verified.report)["changed"] == 1 && c.incremental(verified.report)["decoded"] == 1)
        // Again, without --verify-content: the inode's change time moved, so its content decides.
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        #expect(utimensat(AT_FDCWD, target, times, 0) == 0)
        let plain = c.incremental(try c.run("out").report)
        #expect(plain["changed"] == 1 && plain["decoded"] == 1, "\(plain)")
        #expect(c.incremental(try c.run("out").report)["decoded"] == 0, "recorded with its new change time")
    }

    @Test("--verify-content: a touched file with the same bytes, or a restored copy of the collection, is not redone")
    func contentNotTimestamps() throws {
        let c = try Collection()
        _ = try c.run("out")
        let archive = try c.archive("out")
        // touch: a new mtime, the same bytes.
        let later = [timespec(tv_sec: 2_000_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, c.folder + "/p0.jpg", later, 0) == 0)
        let plan = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "--dry-run", "--verify-content"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 6 unchanged, 0 removed"), "\(plan.stdout)")
        let verified = try c.run("out", ["--verify-content"])
        #expect(c.incremental(verified.report)["decoded"] == 0 && c.incremental(verified.report)["unchanged"] == 6)
        #expect(try c.archive("out") == archive)
        // The new stamp is recorded: a run without the flag trusts it.
        let plain = try c.run("out")
        #expect(c.incremental(plain.report)["decoded"] == 0 && c.incremental(plain.report)["changed"] == 0)
        // The collection restored elsewhere (cp -r: new paths, new times, the same bytes).
        let restored = c.folder + "-restored"
        try FileManager.default.copyItem(atPath: c.folder, toPath: restored)
        for name in try FileManager.default.contentsOfDirectory(atPath: restored) where name.hasPrefix("p") {
            #expect(
                utimensat(AT_FDCWD, restored + "/" + name, later.map { timespec(tv_sec: $0.tv_sec + 5, tv_nsec: 0) }, 0)
                    == 0)
        }
        let fromCopy = try runThumbpipe([
            "run", restored + "/items.jsonl", "-o", c.folder + "/out", "-q", "--verify-content",
        ])
        #expect(fromCopy.status == 0, "\(fromCopy.stderr)")
        let report = try readJSONObject(c.folder + "/out/.thumbpipe/report.json")
        #expect(c.incremental(report)["decoded"] == 0, "no rebuild: \(c.incremental(report))")
        // Without the flag, timestamps decide: a touched file is read again (a JPEG's
        // image data then found the same: nothing decoded), and a changed one redone.
        #expect(utimensat(AT_FDCWD, restored + "/p1.jpg", later, 0) == 0)
        let trusting = try runThumbpipe(["run", restored + "/items.jsonl", "-o", c.folder + "/out", "-q"])
        #expect(trusting.status == 0)
        let touched = c.incremental(try readJSONObject(c.folder + "/out/.thumbpipe/report.json"))
        #expect(touched["decoded"] == 0 && touched["metadata"] == 1, "\(touched)")
        let other = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg")))
        try other.write(to: URL(fileURLWithPath: restored + "/p1.jpg"))
        #expect(try runThumbpipe(["run", restored + "/items.jsonl", "-o", c.folder + "/out", "-q"]).status == 0)
        let changed = c.incremental(try readJSONObject(c.folder + "/out/.thumbpipe/report.json"))
        #expect(changed["decoded"] == 1, "\(changed)")
    }

    @Test("A changed radius redoes thumbnails and keeps store files")
    func changedRadius() throws {
        let c = try Collection()
        _ = try c.run("out")
        let stamp = c.modified("out", "k0")
        let store = c.file("out", "k0")
        let second = try c.run("out", ["--corner-radius", "8"])
        let counts = c.incremental(second.report)
        #expect(counts["changed"] == 5)
        // Thumbnails come from the sources' own pixels: every source is decoded again,
        // and no store file is touched.
        #expect(counts["decoded"] == 5)
        #expect(c.modified("out", "k0") == stamp && c.file("out", "k0") == store)
        try c.expectSameAsFresh("out", ["--corner-radius", "8"])
    }

    @Test("A changed JPEG quality redoes store files only; the archive equals a fresh run's")
    func changedQuality() throws {
        let c = try Collection()
        _ = try c.run("out")
        let second = try c.run("out", ["--quality", "0.4"])
        let counts = c.incremental(second.report)
        #expect(counts["changed"] == 5 && counts["decoded"] == 5)
        try c.expectSameAsFresh("out", ["--quality", "0.4"])
    }

    @Test("Thumbnails do not depend on the store's settings")
    func thumbnailsIndependentOfStore() throws {
        let c = try Collection()
        _ = try c.run("low", ["--quality", "0.4"])
        _ = try c.run("high", ["--quality", "0.9", "--set", "store.orientation=tag"])
        let low = try KeyedArchiveReader(path: c.folder + "/low/items.archive").items()
        let high = try KeyedArchiveReader(path: c.folder + "/high/items.archive").items()
        #expect(low.count == 6 && high.count == 6)
        for (a, b) in zip(low, high) {
            #expect(a.thumbnailData == b.thumbnailData, "\(a.itemKey)")
        }
        #expect(c.file("low", "k0") != c.file("high", "k0"), "the store files do differ")
    }

    @Test("A removed item loses its store file and leaves the archive")
    func removedItem() throws {
        let c = try Collection()
        _ = try c.run("out")
        #expect(c.file("out", "k4") != nil)
        var lines = try String(contentsOfFile: c.manifest, encoding: .utf8).split(separator: "\n")
        lines.remove(at: 4)
        try (lines.joined(separator: "\n") + "\n").write(toFile: c.manifest, atomically: true, encoding: .utf8)
        // One of six is over the default --max-removed 10 %.
        let refused = try c.run("out")
        #expect(refused.status == 65)
        let second = try c.run("out", ["--max-removed", "1"])
        let counts = c.incremental(second.report)
        #expect(counts["removed"] == 1 && counts["decoded"] == 0)
        #expect(c.file("out", "k4") == nil)
        let reader = try KeyedArchiveReader(path: c.folder + "/out/items.archive")
        #expect(reader.count == 5)
        try c.expectSameAsFresh("out")
    }

    @Test("A metadata-only edit rewrites the archive without decoding")
    func metadataEdit() throws {
        let c = try Collection()
        _ = try c.run("out")
        let text = try String(contentsOfFile: c.manifest, encoding: .utf8)
        try text.replacingOccurrences(of: #""valueInDollars": 2,"#, with: #""valueInDollars": 250,"#)
            .write(toFile: c.manifest, atomically: true, encoding: .utf8)
        let second = try c.run("out")
        #expect(c.incremental(second.report)["decoded"] == 0)
        // The other items' bytes come from the previous archive, not encoded again
        // (but for items without a photo: they are dated by the manifest's time, which changed).
        let counts = try #require(second.report["counts"] as? [String: Any])
        let items = try #require(counts["items"] as? Int)
        let withoutImage = try #require(counts["withoutImage"] as? Int)
        #expect(c.incremental(second.report)["archiveItemsCopied"] == items - 1 - withoutImage)
        let reader = try KeyedArchiveReader(path: c.folder + "/out/items.archive")
        #expect(try reader.item(at: 2).valueInDollars == 250)
        try c.expectSameAsFresh("out")
    }

    @Test("A deleted or damaged store file is rebuilt")
    func damagedStoreFile() throws {
        let c = try Collection()
        _ = try c.run("out")
        try FileManager.default.removeItem(atPath: c.folder + "/out/k0")
        writeFile(c.folder + "/out", "k4", "damaged")
        let second = try c.run("out")
        let counts = c.incremental(second.report)
        #expect(counts["changed"] == 2 && counts["decoded"] == 2)
        try c.expectSameAsFresh("out")
    }

    @Test("--force redoes everything; --dry-run writes nothing")
    func forceAndDryRun() throws {
        let c = try Collection()
        _ = try c.run("out")
        #expect(c.incremental(try c.run("out", ["--force"]).report)["decoded"] == 5)
        let archive = try c.archive("out")
        let plan = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "--dry-run", "--quality", "0.9"])
        #expect(plan.status == 0)
        #expect(plan.stdout.contains("plan: 0 new, 5 changed (5 settings), 1 unchanged, 0 removed"))
        #expect(plan.stdout.contains("store settings changed"))
        let json = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "--dry-run", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(try object.counts("counts")["unchanged"] == 6)
        #expect(try c.archive("out") == archive)
        let none = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/never", "--dry-run"])
        #expect(none.stdout.contains("plan: 6 new"))
        #expect(!FileManager.default.fileExists(atPath: c.folder + "/never"))
    }

    @Test("A killed run, re-run, does not redo the items it finished")
    func resume() throws {
        // 30 photos: long enough a run that the state commits (every 0.25 s) before its end.
        let extra = (0..<25).map {
            #"{"itemName": "Copy \#($0)", "image": "p\#($0 % 5).\#(["jpg", "jpg", "webp", "png", "jpg"][$0 % 5])", "itemKey": "x\#($0)"}"#
        }
        let c = try Collection(extra: extra)
        let out = c.folder + "/out"
        var finished = 0
        let keys = Set((0..<5).map { "k\($0)" } + (0..<25).map { "x\($0)" })
        // The photos the state has committed (it commits in batches), read as the run goes.
        func committedNow() -> Int {
            guard FileManager.default.fileExists(atPath: OutputFolder(out).layout.state),
                let state = try? RunState(output: OutputFolder(out), readOnly: true)
            else { return 0 }
            var count = 0
            try? state.forEachKey { if $0.hadSource { count += 1 } }
            return count
        }
        let process = try startThumbpipe(["run", c.manifest, "-o", out, "-q", "--jobs", "1"])
        // Kill it once the state has committed an item, and before the last is done:
        // a kill before any commit would let the check below pass without testing.
        while process.isRunning {
            finished = Set((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).intersection(keys).count
            if finished >= 2 && committedNow() > 0 { break }
            usleep(2_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        finished = Set((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).intersection(keys).count
        try #require(finished > 0 && finished < keys.count, "no kill landed mid-run")
        // What the state committed before the kill (it commits in batches).
        let python = try runProcess(
            "/usr/bin/python3",
            [
                "-c",
                "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT COUNT(*) FROM items WHERE source_path != ''\").fetchone()[0])",
                out + "/.thumbpipe/state.sqlite",
            ])
        let committed = try #require(
            Int(python.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(python.stderr)")
        try #require(committed > 0, "the kill landed before any commit")
        let resumed = try c.run("out")
        let counts = c.incremental(resumed.report)
        #expect(resumed.status == 0)
        // What was committed is done: only the rest (at most the last batch) is decoded again.
        let decoded = try #require(counts["decoded"])
        #expect(
            decoded <= keys.count - committed,
            "committed items are not decoded again (\(committed) committed, \(finished) finished)")
        try c.expectSameAsFresh("out")
    }

    @Test("A state file from a newer thumbpipe is refused with a clear error")
    func newerState() throws {
        let c = try Collection()
        _ = try c.run("out")
        let python = try runProcess(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version=99'); c.commit()",
                c.folder + "/out/.thumbpipe/state.sqlite",
            ])
        #expect(python.status == 0)
        let result = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("written by a newer thumbpipe (state schema 99"))
    }
}
