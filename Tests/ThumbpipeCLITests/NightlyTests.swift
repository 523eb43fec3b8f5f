import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A nightly run over a collection that changes: nothing a user made is lost without being told.
@Suite("Nightly: a source missing for a night keeps its outputs", .serialized)
struct NightlyTests {
    @Test(
        "A missing photo keeps its thumbnail, store file and date; reported kept since the first night; back, nothing redone; --prune-missing drops it"
    )
    func missingSourceKept() throws {
        let (folder, manifest) = try photoCollection(
            "nightly", [("a.jpg", "Nikon-D3100.jpg", "A", "ka"), ("b.jpg", "Canon-EOS-1000D.jpg", "B", "kb")])
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        let before = try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 1)
        let store = FileManager.default.contents(atPath: out + "/kb")
        #expect(store != nil)
        // The share holding b.jpg is gone for the night.
        try FileManager.default.moveItem(atPath: folder + "/b.jpg", toPath: folder + "/b-away.jpg")
        let plan = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(
            plan.stdout.contains("plan: 0 new, 0 changed, 1 unchanged, 0 removed, 1 kept (source missing)"),
            "\(plan.stdout)")
        #expect(plan.stdout.contains("  kept\tB\tb.jpg\tkb\tsource missing"), "\(plan.stdout)")
        let night = try runThumbpipe(["run", manifest, "-o", out, "-q", "--log", folder + "/log.jsonl"])
        #expect(night.status == 1, "a kept item is a failure of its own kind: \(night.stderr)")
        #expect(night.stderr.contains("b.jpg: source missing since "), "\(night.stderr)")
        #expect(night.stderr.contains("1 kept (source missing)"))
        let after = try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 1)
        #expect(after.thumbnailData == before.thumbnailData && after.dateCreated == before.dateCreated)
        #expect(FileManager.default.contents(atPath: out + "/kb") == store, "the store file is kept byte for byte")
        let log = try String(contentsOfFile: folder + "/log.jsonl", encoding: .utf8)
        #expect(log.contains(#""action":"kept""#), "\(log)")
        let failures = try readJSONObject(out + "/.thumbpipe/report.json").objects("failures")
        #expect(failures.count == 1 && failures.first?["kept"] as? Bool == true, "\(failures)")
        let since = try #require(night.stderr.components(separatedBy: "since ").last?.prefix(24))
        // The next night, still missing: the same date.
        let second = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(second.status == 1 && second.stderr.contains("since \(since)"), "\(second.stderr)")
        // Back: nothing decoded, the state forgets it was missing, then all unchanged.
        try FileManager.default.moveItem(atPath: folder + "/b-away.jpg", toPath: folder + "/b.jpg")
        let back = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(
            back.status == 0
                && back.stderr.contains("0 new, 1 changed (1 source back), 1 unchanged, 0 removed; 0 decoded"),
            "\(back.stderr)")
        let settled = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(settled.stdout.contains("plan: 0 new, 0 changed, 2 unchanged, 0 removed"), "\(settled.stdout)")
        // --prune-missing: the user asks for the old behaviour, outputs go.
        try FileManager.default.removeItem(atPath: folder + "/b.jpg")
        let pruned = try runThumbpipe(["run", manifest, "-o", out, "-q", "--prune-missing"])
        #expect(pruned.status == 1 && pruned.stderr.contains("file not found"), "\(pruned.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out + "/kb"))
    }

    @Test("A setting that differs from the last run's is said first, with what it redoes; never a silent revert")
    func settingsChange() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--scale", "3"]).status == 0)
        let plan = try runThumbpipe(["run", c.manifest, "-o", out, "--dry-run"])
        let expected = "settings changed since the last run: thumbnail.scale 3 → 2; 5 thumbnails will be redone"
        #expect(plan.stdout.hasPrefix(expected + "\n"), "\(plan.stdout)")
        let json = try runThumbpipe(["run", c.manifest, "-o", out, "--dry-run", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["settingsChanged"] as? [String] == ["thumbnail.scale 3 → 2"])
        let night = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(night.status == 0 && night.stderr.contains("warning: " + expected), "\(night.stderr)")
        let quiet = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(!quiet.stderr.contains("settings changed"), "the same settings again: \(quiet.stderr)")
        let store = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--quality", "80"])
        #expect(store.stderr.contains("store.quality 0.5 → 0.8; 5 store files will be redone"), "\(store.stderr)")
    }

    @Test("--exit-on-failure new: a failure known from an earlier run exits 0; a new one still exits 1")
    func knownFailures() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("bad/truncated-png_truncated.png"), toPath: c.folder + "/broken.png")
        let with = writeFile(
            c.folder, "with.jsonl",
            try String(contentsOfFile: c.manifest, encoding: .utf8)
                + #"{"itemName": "Broken", "image": "broken.png", "itemKey": "b1"}"# + "\n")
        let first = try runThumbpipe(["run", with, "-o", out, "-q", "--exit-on-failure", "new"])
        #expect(first.status == 1, "the first night, the failure is news: \(first.stderr)")
        let second = try runThumbpipe(["run", with, "-o", out, "-q", "--exit-on-failure", "new"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("1 failed (1 known from earlier runs)"), "\(second.stderr)")
        #expect(
            try readJSONObject(out + "/.thumbpipe/report.json").objects("failures").first?["known"] as? Bool == true)
        let strict = try runThumbpipe(["run", with, "-o", out, "-q"])
        #expect(strict.status == 1, "by default any failure exits 1")
        // Something new breaks: news again.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("bad/truncated-png_truncated.png"), toPath: c.folder + "/broken2.png")
        let more = writeFile(
            c.folder, "more.jsonl",
            try String(contentsOfFile: with, encoding: .utf8)
                + #"{"itemName": "Broken 2", "image": "broken2.png", "itemKey": "b2"}"# + "\n")
        let news = try runThumbpipe(["run", more, "-o", out, "-q", "--exit-on-failure", "new"])
        #expect(news.status == 1 && news.stderr.contains("2 failed (1 known from earlier runs)"), "\(news.stderr)")
        let bad = try runThumbpipe(["run", with, "-o", out, "--exit-on-failure", "sometimes"])
        #expect(bad.status == 64)
    }

    @Test("A state from the previous schema (1) is upgraded in place and keeps every item")
    func schemaUpgrade() throws {
        let folder = TestPaths.temporaryFolder("schema")
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/a.jpg")
        let manifest = writeFile(folder, "items.jsonl", #"{"itemName": "A", "image": "a.jpg"}"# + "\n")
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"]).status == 0)
        // Rewrite the state as schema 1 wrote it: no missing_since column.
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            new = ('missing_since', 'failure_stage', 'failure_fingerprint', 'item_name', 'fields_hash',
                   'source_inode', 'source_changed', 'title', 'sidecars', 'image_hash')
            cols = [r[1] for r in c.execute('PRAGMA table_info(items)') if r[1] not in new]
            c.execute('CREATE TABLE old AS SELECT ' + ','.join(cols) + ' FROM items')
            c.execute('DROP TABLE items'); c.execute('ALTER TABLE old RENAME TO items')
            c.execute('PRAGMA user_version=1'); c.commit()
            """
        #expect(
            try runProcess("/usr/bin/python3", ["-c", script, folder + "/out/.thumbpipe/state.sqlite"]).status == 0)
        let plan = try runThumbpipe(["run", manifest, "-o", folder + "/out", "--dry-run"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 1 unchanged, 0 removed"), "\(plan.stdout) \(plan.stderr)")
        let again = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(again.status == 0, "\(again.stderr)")
        let version = try runProcess(
            "/usr/bin/python3",
            [
                "-c",
                "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA user_version').fetchone()[0])",
                folder + "/out/.thumbpipe/state.sqlite",
            ])
        #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "6")
    }

    @Test("A schema 2 state's failures ('stage: message', fingerprint in the thumbnail's) are read as they were")
    func structuredFailureUpgrade() throws {
        let folder = TestPaths.temporaryFolder("schema2")
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/a.jpg")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("bad/truncated-jpeg_truncated.jpg"), toPath: folder + "/t.jpg")
        let manifest = writeFile(
            folder, "items.jsonl",
            #"{"itemName": "A", "image": "a.jpg"}"# + "\n" + #"{"itemName": "T", "image": "t.jpg"}"# + "\n")
        let out = folder + "/out"
        let first = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(first.status == 1 && first.stderr.contains("t.jpg: truncated JPEG"), "\(first.stderr)")
        // Rewrite the state as schema 2 wrote it: the failure as one 'stage: message'
        // text, its fingerprint where the thumbnail's is, no structured columns.
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.execute("UPDATE items SET failure = failure_stage || ': ' || failure, "
                      "thumbnail_fingerprint = failure_fingerprint WHERE failure IS NOT NULL")
            cols = [r[1] for r in c.execute('PRAGMA table_info(items)')
                    if r[1] not in ('failure_stage', 'failure_fingerprint', 'item_name', 'fields_hash',
                                    'source_inode', 'source_changed', 'title', 'sidecars', 'image_hash')]
            c.execute('CREATE TABLE old AS SELECT ' + ','.join(cols) + ' FROM items')
            c.execute('DROP TABLE items'); c.execute('ALTER TABLE old RENAME TO items')
            c.execute('PRAGMA user_version=2'); c.commit()
            """
        #expect(try runProcess("/usr/bin/python3", ["-c", script, out + "/.thumbpipe/state.sqlite"]).status == 0)
        // Read as it is by a dry run, then upgraded by a run: the failure is the known one, not retried.
        let plan = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 2 unchanged, 0 removed"), "\(plan.stdout) \(plan.stderr)")
        let again = try runThumbpipe(["run", manifest, "-o", out, "-q", "--exit-on-failure", "new"])
        #expect(again.status == 0, "a known failure, replayed: \(again.stderr)")
        let report =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: out + "/.thumbpipe/report.json"))) as? [String: Any]
        let failures = report?["failures"] as? [[String: Any]] ?? []
        #expect(failures.count == 1 && failures.first?["stage"] as? String == "store", "\(failures)")
        #expect((failures.first?["message"] as? String)?.hasPrefix("truncated JPEG") == true, "\(failures)")
        let rows = try runProcess(
            "/usr/bin/python3",
            [
                "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('PRAGMA user_version').fetchone()[0]); "
                    + "print(c.execute(\"SELECT failure_stage, thumbnail_fingerprint = '', failure_fingerprint != '' FROM items WHERE failure IS NOT NULL\").fetchall())",
                out + "/.thumbpipe/state.sqlite",
            ])
        #expect(rows.stdout == "6\n[('store', 1, 1)]\n", "\(rows.stdout) \(rows.stderr)")
    }
}
