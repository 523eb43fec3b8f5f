import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// The output folder is the user's data: nothing may overwrite, race or silently delete it.
@Suite("Output folder safety", .serialized)
struct OutputSafetyTests {
    /// A folder with copies of a few photos (named as the photos) and a manifest over them.
    func collection(keys: [String]? = nil) throws -> (folder: String, manifest: String, sources: [String]) {
        let folder = TestPaths.temporaryFolder("safety")
        let photos = ["edge/orientation-1_Landscape_1.jpg", "photos/Sigma-DP1-small.jpg", "edge/tiny-1x1-rgb_1x1.png"]
        var lines: [String] = []
        var sources: [String] = []
        for (i, relative) in photos.enumerated() {
            let name = URL(fileURLWithPath: relative).lastPathComponent
            try FileManager.default.copyItem(atPath: TestPaths.fixture(relative), toPath: folder + "/" + name)
            sources.append(folder + "/" + name)
            let key = keys?[i] ?? "k\(i)"
            lines.append(#"{"itemName": "Item \#(i)", "image": "\#(name)", "itemKey": "\#(key)"}"#)
        }
        return (folder, writeFile(folder, "m.jsonl", lines.joined(separator: "\n") + "\n"), sources)
    }

    /// Starts a run of `c` into `c.folder/out` that pauses at the source whose
    /// name contains `text`, and waits until it has.
    func startPaused(_ c: (folder: String, manifest: String, sources: [String]), at text: String) throws
        -> (run: Process, out: String)
    {
        let out = c.folder + "/out"
        writableByWorkers(c.folder)
        let marker = c.folder + "/paused"
        let run = try startThumbpipe(
            ["run", c.manifest, "-o", out, "-q", "--jobs", "1"],
            environment: ["THUMBPIPE_FAULT": "pause:\(text)", "THUMBPIPE_FAULT_MARKER": marker])
        waitFor(marker, while: run)
        return (run, out)
    }

    func waitFor(_ path: String, while process: Process) {
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && !FileManager.default.fileExists(atPath: path) && Date() < deadline {
            usleep(2_000)
        }
    }

    // MARK: - Overwrites

    @Test("An itemKey equal to the archive's file name is refused with exit 65 and its line")
    func reservedKey() throws {
        let c = try collection(keys: ["k0", "items.archive", "k2"])
        let result = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("m.jsonl:2: itemKey 'items.archive' is reserved"), "\(result.stderr)")
        #expect(!listing(c.folder + "/out").contains("items.archive"))
    }

    @Test("-o at the sources' own folder never re-encodes the originals, nor writes over the manifest")
    func sourcesFolder() throws {
        let c = try collection(keys: ["orientation-1_Landscape_1.jpg", "Sigma-DP1-small.jpg", "tiny-1x1-rgb_1x1.png"])
        let before = try c.sources.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        let result = try runThumbpipe(["run", c.manifest, "-o", c.folder, "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("m.jsonl:1: itemKey 'orientation-1_Landscape_1.jpg' would overwrite"))
        #expect(try c.sources.map { try Data(contentsOf: URL(fileURLWithPath: $0)) } == before, "originals intact")
        // A key naming the manifest itself.
        let d = try collection(keys: ["k0", "m.jsonl", "k2"])
        let manifest = try Data(contentsOf: URL(fileURLWithPath: d.manifest))
        let second = try runThumbpipe(["run", d.manifest, "-o", d.folder, "-q"])
        #expect(second.status == 65)
        #expect(second.stderr.contains("m.jsonl:2: itemKey 'm.jsonl' would overwrite"), "\(second.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: d.manifest)) == manifest)
    }

    @Test("A file thumbpipe did not write, or a symlink, at a store file's name is refused, never replaced")
    func foreignFiles() throws {
        let c = try collection()
        let out = c.folder + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        writeFile(out, "k1", "the user's file")
        let victim = writeFile(c.folder, "victim.txt", "do not touch")
        try FileManager.default.createSymbolicLink(atPath: out + "/k2", withDestinationPath: victim)
        let result = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("m.jsonl:2: itemKey 'k1': \(out)/k1 exists and thumbpipe did not write it"))
        #expect(try String(contentsOfFile: out + "/k1", encoding: .utf8) == "the user's file")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "do not touch")
        #expect(!listing(out).contains("k0") && !listing(out).contains("items.archive"), "nothing written")
        // An archive thumbpipe has no record of writing.
        let other = c.folder + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        writeFile(other, "items.archive", "someone's archive")
        let archive = try runThumbpipe(["run", c.manifest, "-o", other, "-q"])
        #expect(archive.status == 73)
        #expect(archive.stderr.contains("items.archive exists and thumbpipe has no record of writing it"))
        #expect(try String(contentsOfFile: other + "/items.archive", encoding: .utf8) == "someone's archive")
    }

    @Test("A run killed after renaming a store file but before recording it resumes (its claim counts)")
    func claimsSurviveKill() throws {
        let c = try collection()
        let out = c.folder + "/out"
        let first = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(first.status == 0, "\(first.stderr)")
        // As if killed between the rename and the state: the file is there, the state does not know it.
        let python = try runProcess(
            "/usr/bin/python3",
            [
                "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('DELETE FROM items'); c.commit()",
                out + "/.thumbpipe/state.sqlite",
            ])
        try #require(python.status == 0, "\(python.stderr)")
        writeFile(out + "/.thumbpipe", "claims", "k0\nk1\nk2\n")
        let again = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out + "/.thumbpipe/claims"), "claims cleared once recorded")
    }

    // MARK: - Races

    @Test("A second run into a folder in use exits 73 at once; the first finishes whole")
    func secondRun() throws {
        let c = try collection()
        let (first, out) = try startPaused(c, at: "Sigma")
        try #require(first.isRunning, "the first run ended before the second started")
        let second = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(second.status == 73)
        #expect(second.stderr.contains("\(out) is in use by another thumbpipe (pid \(first.processIdentifier))"))
        let dry = try runThumbpipe(["run", c.manifest, "-o", out, "--dry-run"])
        #expect(dry.status == 73, "a dry run takes the lock too")
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        #expect(listing(out).isSuperset(of: ["items.archive", "k0", "k1", "k2"]))
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
        let third = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(third.status == 0, "\(third.stderr)")
    }

    @Test("A new store file never replaces a file that appeared at its name during the run")
    func appearedDuringRun() throws {
        let c = try collection()
        let (run, out) = try startPaused(c, at: "Sigma")
        try #require(run.isRunning)
        let theirs = Data("someone else's file".utf8)
        try theirs.write(to: URL(fileURLWithPath: out + "/k1"))
        run.waitUntilExit()
        #expect(run.terminationStatus == 1, "the item fails, the run finishes")
        #expect(FileManager.default.contents(atPath: out + "/k1") == theirs, "left as it was")
        #expect(
            FileManager.default.fileExists(atPath: out + "/k0") && FileManager.default.fileExists(atPath: out + "/k2"))
        let failures = try readJSONObject(out + "/.thumbpipe/report.json").objects("failures")
        #expect((failures.first?["message"] as? String)?.contains("appeared during the run") == true, "\(failures)")
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
        #expect(!listing(out + "/.thumbpipe/work").contains { $0.hasPrefix(TemporaryFile.prefix) })
    }

    @Test("A source replaced while it is read counts as changed next run")
    func replacedSource() throws {
        let c = try collection()
        let (run, out) = try startPaused(c, at: "Sigma")
        try #require(run.isRunning)
        // An atomic mv of a different photo over the source, while the worker holds its stamp.
        let replacement = c.folder + "/replacement.jpg"
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Oppo-R7-Plus-small.jpg"), toPath: replacement)
        try #require(rename(replacement, c.sources[1]) == 0)
        run.waitUntilExit()
        #expect(run.terminationStatus == 0)
        let next = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(next.status == 0, "\(next.stderr)")
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        #expect(try report.counts("incremental")["changed"] == 1, "the replaced source is redone")
        let fresh = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/fresh", "-q"])
        #expect(fresh.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: out + "/k1"))
                == Data(contentsOf: URL(fileURLWithPath: c.folder + "/fresh/k1")))
    }

    @Test("Content hashes read in chunks equal the one-shot hash, whatever the chunking")
    func chunkedHash() throws {
        let folder = TestPaths.temporaryFolder("hash")
        for size in [0, 1, 31, 32, 33, 63, 64, 1000, (1 << 20) - 1, 1 << 20, (1 << 20) + 33, 3_000_017] {
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15 &+ UInt64(size)
            let bytes = (0..<size).map { _ -> UInt8 in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
            let path = folder + "/f\(size)"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let oneShot = bytes.withUnsafeBytes { ContentHash.xxh64($0) }
            let hex = String(oneShot, radix: 16)
            #expect(ContentHash.file(path) == String(repeating: "0", count: 16 - hex.count) + hex, "size \(size)")
        }
        // The XXH64 of "" and "abc", from the reference implementation.
        #expect(Array("".utf8).withUnsafeBytes { ContentHash.xxh64($0) } == 0xEF46_DB37_51D8_E999)
        #expect(Array("abc".utf8).withUnsafeBytes { ContentHash.xxh64($0) } == 0x44BC_2CF5_AD77_0999)
    }

    // MARK: - Nightly removals

    @Test(
        "An empty or wrong manifest over last night's folder is refused, and --dry-run says so",
        arguments: ["m.jsonl", "m.csv"])
    func removals(name: String) throws {
        let c = try collection()
        let out = c.folder + "/out"
        #expect(try runThumbpipe(["run", c.manifest, "-o", out, "-q"]).status == 0)
        let empty = writeFile(c.folder, "empty-" + name, name.hasSuffix(".csv") ? "itemName,image\n" : "")
        for arguments in [["-q"], ["--dry-run"]] {
            let result = try runThumbpipe(["run", empty, "-o", out] + arguments)
            #expect(result.status == 65)
            #expect(result.stderr.contains("has no items: it would remove all 3 items"), "\(result.stderr)")
        }
        #expect(listing(out).isSuperset(of: ["k0", "k1", "k2", "items.archive"]), "nothing deleted")
        // A manifest that drops one of three items: 33 % > 10 %.
        let lines = try String(contentsOfFile: c.manifest, encoding: .utf8).split(separator: "\n")
        let fewer = writeFile(c.folder, "fewer.jsonl", lines.dropLast().joined(separator: "\n") + "\n")
        let refused = try runThumbpipe(["run", fewer, "-o", out, "-q"])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("would remove 1 of the 3 items"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--max-removed 10%"), "\(refused.stderr)")
        #expect(listing(out).contains("k2"))
        let allowed = try runThumbpipe(["run", fewer, "-o", out, "-q", "--max-removed", "1"])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(!listing(out).contains("k2"))
    }

    @Test("Timeouts and crashes are tried again next run; failures of the source are kept until a limit changes")
    func transientFailures() throws {
        let c = try collection()
        let out = c.folder + "/out"
        let hung = try runThumbpipe(
            ["run", c.manifest, "-o", out, "-q", "--timeout", "1"], environment: ["THUMBPIPE_FAULT": "hang:Sigma"])
        #expect(hung.status == 1)
        #expect(hung.stderr.contains("timed out after 1 s"))
        let crashed = try runThumbpipe(
            ["run", c.manifest, "-o", out, "-q"], environment: ["THUMBPIPE_FAULT": "crash:Sigma"])
        #expect(crashed.status == 1)
        #expect(crashed.stderr.contains("decoder crashed (SIGSEGV)"), "\(crashed.stderr)")
        let healthy = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(healthy.status == 0, "retried and done: \(healthy.stderr)")
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 1)
        // A truncated source fails for good, and is not decoded again...
        let truncated = c.folder + "/truncated.png"
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("bad/truncated-png_truncated.png"), toPath: truncated)
        let with = writeFile(
            c.folder, "with.jsonl",
            try String(contentsOfFile: c.manifest, encoding: .utf8)
                + #"{"itemName": "Broken", "image": "truncated.png", "itemKey": "k3"}"# + "\n")
        #expect(try runThumbpipe(["run", with, "-o", out, "-q"]).status == 1)
        #expect(try runThumbpipe(["run", with, "-o", out, "-q"]).status == 1)
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 0)
        // ...until a limit that decides failures changes.
        let relaxed = try runThumbpipe(["run", with, "-o", out, "-q", "--timeout", "30"])
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 1)
        #expect(relaxed.status == 1)
    }

    @Test("A second item with a source that crashed a worker is not retried in that run, nor remembered as failed")
    func crashSiblings() throws {
        let c = try collection()
        let twice = writeFile(
            c.folder, "twice.jsonl",
            (1...3).map { #"{"itemName": "N\#($0)", "image": "Sigma-DP1-small.jpg", "itemKey": "s\#($0)"}"# }
                .joined(separator: "\n") + "\n")
        let out = c.folder + "/out"
        let crashed = try runThumbpipe(
            ["run", twice, "-o", out, "-q", "--jobs", "1"], environment: ["THUMBPIPE_FAULT": "crash:Sigma"])
        #expect(crashed.status == 1)
        #expect(crashed.stderr.contains("decoder crashed (SIGSEGV)"), "\(crashed.stderr)")
        // The third is handed out after the crash is known: not tried in this run.
        #expect(crashed.stderr.contains("earlier in the run"), "\(crashed.stderr)")
        let healthy = try runThumbpipe(["run", twice, "-o", out, "-q"])
        #expect(healthy.status == 0, "all tried again and done: \(healthy.stderr)")
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 3)
    }

    // MARK: - Merge and extract

    /// Runs `manifest` (``shardable()``'s) as two shards into `folder/part-K`: the
    /// shard with the truncated PNG exits 1 for it and nothing else, the other 0.
    func shards(_ manifest: String, _ folder: String) throws {
        var statuses: [Int32] = []
        for k in 0..<2 {
            let result = try runThumbpipe(["run", manifest, "--shard", "\(k)/2", "-o", folder + "/part-\(k)", "-q"])
            statuses.append(result.status)
            if result.status == 1 { #expect(result.stderr.contains("truncated-png"), "\(result.stderr)") }
        }
        #expect(statuses.sorted() == [0, 1], "one shard has the truncated PNG: \(statuses)")
    }

    /// A manifest of 8 fixtures, one of them truncated, and its folder.
    func shardable() throws -> (folder: String, manifest: String) {
        let folder = TestPaths.temporaryFolder("merge")
        let sources = [
            "edge/orientation-1_Landscape_1.jpg", "edge/webp-alpha_5_webp_a.webp", "photos/Sigma-DP1-small.jpg",
            "edge/tiny-1x1-rgb_1x1.png", "edge/orientation-3_Landscape_3.jpg", "photos/Oppo-R7-Plus-small.jpg",
            "bad/truncated-png_truncated.png", "edge/gif-animated_animated-loop-3.gif",
        ]
        let lines = sources.enumerated().map { i, s in
            #"{"itemName": "Item \#(i)", "image": "\#(TestPaths.fixture(s))", "itemKey": "item-\#(i)"}"#
        }
        return (folder, writeFile(folder, "m.jsonl", lines.joined(separator: "\n") + "\n"))
    }

    @Test("merge: repeated merges leave no temporaries, gone items lose their files, failures exit 1")
    func mergeHygiene() throws {
        let (folder, manifest) = try shardable()
        try shards(manifest, folder)
        let parts = [folder + "/part-0", folder + "/part-1"]
        let first = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out"])
        #expect(first.status == 1, "a part had a failure: \(first.stderr)")
        let again = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out"])
        #expect(again.status == 1)
        #expect(
            !listing(folder + "/out").contains { $0.hasPrefix(TemporaryFile.prefix) }, "\(listing(folder + "/out"))")
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        #expect(try report.object("stages")["decode"] != nil, "stages are summed")
        #expect(try #require(report["peakRSSBytes"] as? Int) > 0, "peak memory is kept")
        // The manifest loses item-0: re-shard, re-merge; item-0's store file goes.
        let lines = try String(contentsOfFile: manifest, encoding: .utf8).split(separator: "\n")
        try (lines.dropFirst().joined(separator: "\n") + "\n").write(
            toFile: manifest, atomically: true, encoding: .utf8)
        for k in 0..<2 {
            _ = try runThumbpipe(["run", manifest, "--shard", "\(k)/2", "-o", parts[k], "-q", "--max-removed", "100%"])
        }
        #expect(listing(folder + "/out").contains("item-0"))
        let third = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out"])
        #expect(third.status == 1, "\(third.stderr)")
        #expect(!listing(folder + "/out").contains("item-0"), "the gone item's store file is removed")
        #expect(listing(folder + "/out").contains("item-1"))
    }

    @Test("merge: a part missing a store file, or -o a symlink to a part, is refused")
    func mergeRefusals() throws {
        let (folder, manifest) = try shardable()
        try shards(manifest, folder)
        let parts = [folder + "/part-0", folder + "/part-1"]
        try FileManager.default.createSymbolicLink(atPath: folder + "/link", withDestinationPath: parts[0])
        let before = listing(parts[0])
        let symlinked = try runThumbpipe(["merge"] + parts + ["-o", folder + "/link"])
        #expect(symlinked.status == 64, "\(symlinked.stderr)")
        #expect(listing(parts[0]) == before)
        let victim = try #require(listing(parts[1]).first { $0.hasPrefix("item-") })
        try FileManager.default.removeItem(atPath: parts[1] + "/" + victim)
        let missing = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out"])
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(missing.stderr.contains("\(victim): store file missing"), "\(missing.stderr)")
    }

    /// An archive with one item whose key or date is crafted.
    func craftedArchive(_ path: String, key: String = "item", date: Double = 0, png: Data? = nil) throws {
        let writer = try KeyedArchiveWriter(path: path, className: "BNRItem", itemCount: 1)
        try writer.append(
            ArchivedItem(
                itemName: "x", serialNumber: "", valueInDollars: 0,
                dateCreated: Date(timeIntervalSinceReferenceDate: date), itemKey: key, thumbnailData: png))
        try writer.finish()
    }

    @Test("run OLD/items.archive: a symlinked store file arrives as a regular file with the bytes it named")
    func carriedSymlink() throws {
        let c = try collection()
        let old = c.folder + "/old"
        #expect(try runThumbpipe(["run", c.manifest, "-o", old, "-q"]).status == 0)
        // The app's folder keeps k0 as a relative link to a file beside the folder.
        let bytes = try #require(FileManager.default.contents(atPath: old + "/k0"))
        try bytes.write(to: URL(fileURLWithPath: c.folder + "/elsewhere.jpg"))
        try FileManager.default.removeItem(atPath: old + "/k0")
        #expect(symlink("../elsewhere.jpg", old + "/k0") == 0)
        let out = c.folder + "/new"
        let migrated = try runThumbpipe(["run", old + "/items.archive", "-o", out, "-q"])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        var info = stat()
        #expect(lstat(out + "/k0", &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG, "a regular file, not a link")
        #expect(FileManager.default.contents(atPath: out + "/k0") == bytes)
    }

    @Test(
        "run OLD/items.archive: a carried thumbnail that is not a PNG thumbpipe could make fails its item alone",
        arguments: [
            ("random bytes", Data([0x01, 0x02, 0x03, 0x04, 0x05]), "is not a PNG"),
            (
                "a PNG claiming 2147483647 × 2147483647", declaredPNG(width: 2_147_483_647, height: 2_147_483_647),
                "claims 2147483647×2147483647 pixels"
            ),
        ])
    func carriedThumbnails(name: String, png: Data, reason: String) throws {
        let folder = TestPaths.temporaryFolder("carried")
        try FileManager.default.createDirectory(atPath: folder + "/old", withIntermediateDirectories: true)
        let writer = try KeyedArchiveWriter(path: folder + "/old/items.archive", className: "BNRItem", itemCount: 2)
        for (key, data) in [("bad", png), ("good", declaredPNG(width: 80, height: 80))] {
            try writer.append(
                ArchivedItem(
                    itemName: key, serialNumber: "", valueInDollars: 0,
                    dateCreated: Date(timeIntervalSinceReferenceDate: 0),
                    itemKey: key, thumbnailData: data))
        }
        try writer.finish()
        let result = try runThumbpipe(["run", folder + "/old/items.archive", "-o", folder + "/out", "-q"])
        #expect(result.status == 1, "\(name): \(result.stderr)")
        #expect(result.stderr.contains(reason), "\(result.stderr)")
        let reader = try KeyedArchiveReader(path: folder + "/out/items.archive")
        #expect(reader.count == 2)
        #expect(try reader.validItem(at: 0).thumbnailData == nil, "not carried over")
        #expect(try reader.validItem(at: 1).thumbnailData == declaredPNG(width: 80, height: 80))
    }

    @Test("extract and contact-sheet refuse an archive that uses a key twice (65), before writing anything")
    func duplicateKeys() throws {
        let folder = TestPaths.temporaryFolder("dupkeys")
        let writer = try KeyedArchiveWriter(path: folder + "/dup.archive", className: "BNRItem", itemCount: 3)
        for (name, key) in [("a", "one"), ("b", "two"), ("c", "one")] {
            try writer.append(
                ArchivedItem(
                    itemName: name, serialNumber: "", valueInDollars: 0,
                    dateCreated: Date(timeIntervalSinceReferenceDate: 0),
                    itemKey: key, thumbnailData: declaredPNG(width: 4, height: 4)))
        }
        try writer.finish()
        let extract = try runThumbpipe(["extract", folder + "/dup.archive", folder + "/thumbs"])
        #expect(extract.status == 65, "\(extract.stderr)")
        #expect(extract.stderr.contains("itemKey 'one' is used by items 1 and 3"), "\(extract.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/thumbs/one.png"))
        let sheet = try runThumbpipe(["contact-sheet", folder + "/dup.archive", "-o", folder + "/sheet.png"])
        #expect(sheet.status == 65 && !FileManager.default.fileExists(atPath: folder + "/sheet.png"), "\(sheet.stderr)")
    }

    @Test("Keys read from an archive follow the manifest's rule: extract and merge refuse '../' keys")
    func craftedKeys() throws {
        let folder = TestPaths.temporaryFolder("crafted")
        try craftedArchive(folder + "/evil.archive", key: "../../escaped", png: declaredPNG(width: 4, height: 4))
        let extract = try runThumbpipe(["extract", folder + "/evil.archive", folder + "/thumbs"])
        #expect(extract.status == 65)
        #expect(extract.stderr.contains("itemKey '../../escaped' is not a safe file name"), "\(extract.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/escaped.png"))
        // The same archive in place of a part's.
        let (mergeFolder, manifest) = try shardable()
        try shards(manifest, mergeFolder)
        let part = mergeFolder + "/part-0"
        let count = try KeyedArchiveReader(path: part + "/items.archive").count
        let writer = try KeyedArchiveWriter(path: part + "/items.archive", className: "BNRItem", itemCount: count)
        for i in 0..<count {
            try writer.append(
                ArchivedItem(
                    itemName: "x", serialNumber: "", valueInDollars: 0, dateCreated: Date(), itemKey: "../../x\(i)",
                    thumbnailData: Data([1])))
        }
        try writer.finish()
        let merge = try runThumbpipe(["merge", part, mergeFolder + "/part-1", "-o", mergeFolder + "/out"])
        #expect(merge.status == 65, "\(merge.stderr)")
        #expect(!FileManager.default.fileExists(atPath: mergeFolder + "/x0"))
    }

    // MARK: - Crashes instead of errors

    @Test(
        "inspect and contact-sheet refuse impossible dates and giant thumbnails with exit 65",
        arguments: [Double.nan, .infinity, -.infinity, 1e300])
    func impossibleDates(date: Double) throws {
        let folder = TestPaths.temporaryFolder("dates")
        try craftedArchive(folder + "/a.archive", date: date)
        for command in [
            ["inspect", folder + "/a.archive"], ["contact-sheet", folder + "/a.archive", "-o", folder + "/s.png"],
        ] {
            let result = try runThumbpipe(command)
            #expect(result.status == 65, "\(command[0]): \(result.stderr)")
            #expect(result.stderr.contains("is not a date"), "\(result.stderr)")
        }
    }

    @Test("contact-sheet refuses a thumbnail whose header claims 100000×100000 pixels")
    func giantThumbnail() throws {
        let folder = TestPaths.temporaryFolder("giant")
        try craftedArchive(folder + "/a.archive", png: declaredPNG(width: 100_000, height: 100_000))
        let result = try runThumbpipe(["contact-sheet", folder + "/a.archive", "-o", folder + "/s.png"])
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("claims 100000×100000 pixels"), "\(result.stderr)")
    }

    @Test(
        "Absurd numbers are refused, not trapped on",
        arguments: [
            ["--scale", "1e300"], ["--width", "1e300"], ["--set", "limits.timeoutSeconds=2e10"],
            ["--quality", "1e300"],
        ])
    func absurdNumbers(flags: [String]) throws {
        let c = try collection()
        let result = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"] + flags)
        #expect(result.status == 64, "\(flags): \(result.stderr)")
    }

    @Test("A closed stderr, or a reader that goes away, costs the diagnostics, never the run")
    func closedStreams() throws {
        let c = try collection()
        let lines = (0..<200).map { #"{"itemName": "Missing \#($0)", "image": "missing-\#($0).jpg"}"# }
        let many = writeFile(c.folder, "many.jsonl", lines.joined(separator: "\n") + "\n")
        let closed = try runProcess(
            "/bin/sh",
            ["-c", "exec \"$0\" run \"$1\" -o \"$2\" -q 2>&-", TestPaths.executable, c.manifest, c.folder + "/a"])
        #expect(closed.status == 0)
        #expect(listing(c.folder + "/a").contains("items.archive"))
        let piped = try runProcess(
            "/bin/bash",
            [
                "-c", "set -o pipefail; \"$0\" run \"$1\" -o \"$2\" 2>&1 | head -2 >/dev/null; echo ${PIPESTATUS[0]}",
                TestPaths.executable, many, c.folder + "/b",
            ])
        #expect(
            piped.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1",
            "not killed by SIGPIPE: \(piped.stdout)")
        #expect(listing(c.folder + "/b").contains("items.archive"))
    }

    @Test("A 255-byte key works: temporary names are of fixed length")
    func longKey() throws {
        let key = String(repeating: "k", count: 255)
        let c = try collection(keys: [key, "k1", "k2"])
        let result = try runThumbpipe(["run", c.manifest, "-o", c.folder + "/out", "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(listing(c.folder + "/out").contains(key))
    }
}
