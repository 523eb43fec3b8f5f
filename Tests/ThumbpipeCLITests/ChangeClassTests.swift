import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Every change class is counted and named, and a dry run says exactly what the run then does.
@Suite("Change classes: metadata, moved, removed by name, and a dry run that is the run", .serialized)
struct ChangeClassTests {
    /// A manifest's lines, written again (a night's edits).
    func write(_ folder: String, _ lines: [String]) -> String {
        writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
    }

    /// The `--log` lines of a run, by key: action and name.
    func log(_ path: String) throws -> [String: (action: String, name: String, source: String)] {
        var result: [String: (String, String, String)] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let key = try #require(object["itemKey"] as? String)
            result[key] = (
                object["action"] as? String ?? "", object["itemName"] as? String ?? "",
                object["source"] as? String ?? ""
            )
        }
        return result
    }

    @Test(
        "A photo moved to a new key names both keys (old → new) in the dry run, the log, the summary and the report; tabs in names are escaped in the dry run's columns"
    )
    func movedKeysNamed() throws {
        let (folder, _) = try photoCollection("moved-keys", [("a.jpg", "Sigma-DP1-small.jpg", "Bike", "k1")])
        let out = folder + "/out"
        let first = write(folder, [#"{"itemName": "Bike\tred", "image": "a.jpg", "itemKey": "k1"}"#])
        #expect(try runThumbpipe(["run", first, "-o", out, "-q"]).status == 0)
        let moved = write(folder, [#"{"itemName": "Bike\tred", "image": "a.jpg", "itemKey": "k2"}"#])
        let plan = try runThumbpipe(["run", moved, "-o", out, "--dry-run"])
        let line = try #require(plan.stdout.split(separator: "\n").first { $0.hasPrefix("  moved") }, "\(plan.stdout)")
        #expect(
            line.split(separator: "\t", omittingEmptySubsequences: false).count == 6,
            "six columns, the name's tab escaped: \(line)")
        #expect(line.contains("Bike\\tred") && line.contains("k1 → k2"), "\(line)")
        let night = try runThumbpipe(["run", moved, "-o", out, "--log", folder + "/log.jsonl"])
        #expect(night.status == 0, "\(night.stderr)")
        #expect(night.stderr.contains("  moved: ") && night.stderr.contains("k1 → k2"), "\(night.stderr)")
        let entry = try #require(
            try JSONSerialization.jsonObject(
                with: Data(try String(contentsOfFile: folder + "/log.jsonl", encoding: .utf8).utf8)) as? [String: Any])
        #expect(entry["movedFrom"] as? String == "k1" && entry["itemKey"] as? String == "k2", "\(entry)")
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let items = try #require((report["incremental"] as? [String: Any])?["movedItems"] as? [[String: Any]])
        #expect(items.first?["from"] as? String == "k1" && items.first?["to"] as? String == "k2", "\(items)")
    }

    @Test("A name edited in the manifest is 'metadata': nothing decoded, the archive has the new name, then unchanged")
    func metadataEdit() throws {
        let (folder, _) = try photoCollection(
            "metadata", [("a.jpg", "Nikon-D3100.jpg", "Bike", "ka"), ("b.jpg", "Canon-EOS-1000D.jpg", "Lamp", "kb")])
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", folder + "/items.jsonl", "-o", out, "-q"]).status == 0)
        let manifest = write(
            folder,
            [
                #"{"itemName": "Red Bike", "image": "a.jpg", "itemKey": "ka", "valueInDollars": 120}"#,
                #"{"itemName": "Lamp", "image": "b.jpg", "itemKey": "kb"}"#,
            ])
        let plan = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 1 metadata, 1 unchanged, 0 removed"), "\(plan.stdout)")
        #expect(plan.stdout.contains("  metadata\tRed Bike\ta.jpg\tka\tfields edited"), "\(plan.stdout)")
        let night = try runThumbpipe(["run", manifest, "-o", out, "-q", "--log", folder + "/log.jsonl"])
        #expect(night.status == 0, "\(night.stderr)")
        #expect(night.stderr.contains("1 metadata, 1 unchanged, 0 removed; 0 decoded"), "\(night.stderr)")
        #expect(try log(folder + "/log.jsonl")["ka"]?.action == "metadata")
        let item = try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 0)
        #expect(item.itemName == "Red Bike" && item.valueInDollars == 120)
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        #expect((report["incremental"] as? [String: Any])?["metadata"] as? Int == 1, "\(report["incremental"] ?? "")")
        let again = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(again.stdout.contains("plan: 0 new, 0 changed, 2 unchanged, 0 removed"), "\(again.stdout)")
    }

    @Test(
        "A renamed photo (a new key, the same bytes) is 'moved': its outputs reused, nothing decoded, the old name gone"
    )
    func renameIsAMove() throws {
        let folder = TestPaths.temporaryFolder("moved")
        for (name, fixture) in [("bike.jpg", "Nikon-D3100.jpg"), ("lamp.jpg", "Canon-EOS-1000D.jpg")] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/" + fixture), toPath: folder + "/" + name)
        }
        // Keys from the image path and name, as a scanned folder has them.
        var manifest = write(
            folder, [#"{"itemName": "Bike", "image": "bike.jpg"}"#, #"{"itemName": "Lamp", "image": "lamp.jpg"}"#])
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        let oldKey = ManifestItem.defaultKey(image: "bike.jpg", itemName: "Bike")
        let store = try #require(FileManager.default.contents(atPath: out + "/" + oldKey))
        let thumbnail = try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 0).thumbnailData
        try FileManager.default.moveItem(atPath: folder + "/bike.jpg", toPath: folder + "/Red Bike.jpg")
        manifest = write(
            folder,
            [#"{"itemName": "Red Bike", "image": "Red Bike.jpg"}"#, #"{"itemName": "Lamp", "image": "lamp.jpg"}"#])
        let newKey = ManifestItem.defaultKey(image: "Red Bike.jpg", itemName: "Red Bike")
        let plan = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 1 moved, 1 unchanged, 0 removed"), "\(plan.stdout)")
        let night = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(
            night.status == 0 && night.stderr.contains("1 moved, 1 unchanged, 0 removed; 0 decoded"), "\(night.stderr)")
        #expect(FileManager.default.contents(atPath: out + "/" + newKey) == store, "the store file, under its new key")
        #expect(!FileManager.default.fileExists(atPath: out + "/" + oldKey), "the old name is gone")
        let moved = try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 0)
        #expect(moved.itemKey == newKey && moved.itemName == "Red Bike" && moved.thumbnailData == thumbnail)
        let again = try runThumbpipe(["run", manifest, "-o", out, "--dry-run"])
        #expect(again.stdout.contains("plan: 0 new, 0 changed, 2 unchanged, 0 removed"), "\(again.stdout)")
        // The same photo at a new path under the same key: moved too, not decoded.
        try FileManager.default.createDirectory(atPath: folder + "/lamps", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: folder + "/lamp.jpg", toPath: folder + "/lamps/lamp.jpg")
        let keyed = write(
            folder,
            [
                #"{"itemName": "Red Bike", "image": "Red Bike.jpg"}"#,
                #"{"itemName": "Lamp", "image": "lamps/lamp.jpg", "itemKey": "\#(ManifestItem.defaultKey(image: "lamp.jpg", itemName: "Lamp"))"}"#,
            ])
        let path = try runThumbpipe(["run", keyed, "-o", out, "-q"])
        #expect(
            path.status == 0 && path.stderr.contains("1 moved, 1 unchanged, 0 removed; 0 decoded"), "\(path.stderr)")
    }

    @Test(
        "Removed items are named with their last source in the dry run, the log and the report, relative to the manifest as every other item is; --max-removed lists them"
    )
    func removedByName() throws {
        let (folder, manifest) = try photoCollection(
            "removed",
            [
                ("a.jpg", "Nikon-D3100.jpg", "Bike", "ka"), ("b.jpg", "Canon-EOS-1000D.jpg", "Lamp", "kb"),
                ("c.webp", "Nikon-Coolpix-P7000.webp", "Clock", "kc"),
            ])
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        let one = write(folder, [#"{"itemName": "Bike", "image": "a.jpg", "itemKey": "ka"}"#])
        let refused = try runThumbpipe(["run", one, "-o", out, "-q", "--max-removed", "1"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("  Lamp (b.jpg) kb"), "\(refused.stderr)")
        #expect(refused.stderr.contains("  Clock (c.webp) kc"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("\\u{A}"), "one item a line, never a literal \\u{A}: \(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").contains { $0.hasPrefix("  Lamp (") }, "\(refused.stderr)")
        let plan = try runThumbpipe(["run", one, "-o", out, "--dry-run", "--max-removed", "2"])
        #expect(plan.stdout.contains("  removed\tLamp\tb.jpg\tkb"), "\(plan.stdout)")
        #expect(
            !plan.stdout.contains(folder), "no absolute path where the manifest names relative ones: \(plan.stdout)")
        let night = try runThumbpipe([
            "run", one, "-o", out, "-q", "--max-removed", "2", "--log", folder + "/log.jsonl",
        ])
        #expect(night.status == 0 && night.stderr.contains("  removed: Clock (c.webp) kc"), "\(night.stderr)")
        let entries = try log(folder + "/log.jsonl")
        #expect(entries["kb"]?.action == "removed" && entries["kb"]?.name == "Lamp", "\(entries)")
        #expect(entries["kc"]?.source == "c.webp", "\(entries)")
        let removed = try #require(
            (readJSONObject(out + "/.thumbpipe/report.json")["incremental"] as? [String: Any])?["removedItems"]
                as? [[String: Any]])
        #expect(Set(removed.compactMap { $0["itemName"] as? String }) == ["Lamp", "Clock"], "\(removed)")
        #expect(Set(removed.compactMap { $0["source"] as? String }) == ["b.jpg", "c.webp"], "\(removed)")
    }

    @Test(
        "A mixed night (edited name, touched file, renamed file, missing source, new, removed, settings change): the dry run's plan is what the run's log says, item by item"
    )
    func dryRunIsTheRun() throws {
        let folder = TestPaths.temporaryFolder("mixed")
        let photos = [
            ("a.jpg", "Nikon-D3100.jpg"), ("b.jpg", "Canon-EOS-1000D.jpg"),
            ("c.jpg", "FujiFilm-FinePix-F40fd-small.jpg"),
            ("d.webp", "Nikon-Coolpix-P7000.webp"), ("e.jpg", "Kodak-PIXPRO-SP360-small.jpg"),
            ("f.jpg", "Canon-EOS-5D.jpg"), ("g.jpg", "Blackberry-Z10-small.jpg"),
        ]
        for (name, fixture) in photos {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/" + fixture), toPath: folder + "/" + name)
        }
        let out = folder + "/out"
        var manifest = write(
            folder,
            [
                #"{"itemName": "Bike", "image": "a.jpg", "itemKey": "ka"}"#,
                #"{"itemName": "Lamp", "image": "b.jpg", "itemKey": "kb"}"#,
                #"{"itemName": "Clock", "image": "c.jpg"}"#,
                #"{"itemName": "Desk", "image": "d.webp", "itemKey": "kd"}"#,
                #"{"itemName": "Fan", "image": "f.jpg", "itemKey": "kf"}"#,
                #"{"itemName": "Gift", "image": "g.jpg", "itemKey": "kg"}"#,
            ])
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        // The night's changes.
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, folder + "/b.jpg", &times, 0) == 0, "touched")
        try FileManager.default.moveItem(atPath: folder + "/c.jpg", toPath: folder + "/clock.jpg")
        try FileManager.default.moveItem(atPath: folder + "/d.webp", toPath: folder + "/d-away.webp")
        manifest = write(
            folder,
            [
                #"{"itemName": "Red Bike", "image": "a.jpg", "itemKey": "ka"}"#,
                #"{"itemName": "Lamp", "image": "b.jpg", "itemKey": "kb"}"#,
                #"{"itemName": "Clock", "image": "clock.jpg"}"#,
                #"{"itemName": "Desk", "image": "d.webp", "itemKey": "kd"}"#,
                #"{"itemName": "Easel", "image": "e.jpg", "itemKey": "ke"}"#,
                #"{"itemName": "Gift", "image": "g.jpg", "itemKey": "kg"}"#,
            ])
        let flags = ["--timeout", "30", "--max-removed", "1"]
        let dry = try runThumbpipe(["run", manifest, "-o", out, "--dry-run", "--json"] + flags)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any])
        #expect((plan["settingsChanged"] as? [String]) == ["limits.timeoutSeconds 60 → 30"], "\(plan)")
        var planned: [String: String] = [:]
        var compared: Set<String> = []
        for item in try #require(plan["items"] as? [[String: Any]]) {
            let key = try #require(item["itemKey"] as? String)
            planned[key] = item["class"] as? String
            if (item["reason"] as? String)?.hasSuffix("(its image data compared first)") == true {
                compared.insert(key)
            }
        }
        let night = try runThumbpipe(["run", manifest, "-o", out, "-q", "--log", folder + "/log.jsonl"] + flags)
        #expect(night.status == 1, "the missing source is a failure of its own kind: \(night.stderr)")
        let done = try log(folder + "/log.jsonl")
        #expect(
            Set(planned.keys) == Set(done.keys), "the same items: \(planned.keys.sorted()) vs \(done.keys.sorted())")
        // The one thing a dry run cannot know: whether a rewritten JPEG's image data is
        // the same (the touched b.jpg's is), which only its job reads; the plan says so.
        for (key, action) in planned {
            let did = done[key]?.action
            #expect(
                did == action || (compared.contains(key) && action == "changed" && did == "metadata"),
                "\(key): planned \(action), did \(did ?? "-")")
        }
        #expect(compared == ["kb"] && done["kb"]?.action == "metadata", "\(compared)")
        let clock = ManifestItem.defaultKey(image: "clock.jpg", itemName: "Clock")
        #expect(
            planned == [
                "ka": "metadata", "kb": "changed", clock: "moved", "kd": "kept", "ke": "new", "kf": "removed",
                "kg": "unchanged",
            ], "\(planned)")
        #expect(
            night.stderr.contains(
                "1 new, 0 changed, 2 metadata, 1 moved, 1 unchanged, 1 removed, 1 kept (source missing); 1 decoded"
            ),
            "\(night.stderr)")
    }
}

/// EXIF dates in the zone the photo says.
@Suite("EXIF dates with their offset")
struct ExifOffsetTests {
    /// An Exif APP1 segment (big-endian TIFF) holding DateTimeOriginal and OffsetTimeOriginal.
    static func exifSegment(date: String, offset: String) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 255), UInt8(v & 255)] }
        func u32(_ v: Int) -> [UInt8] {
            [UInt8(v >> 24 & 255), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255)]
        }
        let dateBytes = Array(date.utf8) + [0]  // 20 bytes
        let offsetBytes = Array(offset.utf8) + [0]  // 7 bytes
        // TIFF header (8), IFD0 at 8: 1 entry (ExifIFDPointer) = 2 + 12 + 4 = 18 → Exif IFD at 26:
        // 2 entries = 2 + 24 + 4 = 30 → values at 56.
        var tiff = Array("MM".utf8) + u16(42) + u32(8)
        tiff += u16(1) + u16(0x8769) + u16(4) + u32(1) + u32(26) + u32(0)
        let dateAt = 56
        let offsetAt = dateAt + dateBytes.count
        tiff += u16(2)
        tiff += u16(0x9003) + u16(2) + u32(dateBytes.count) + u32(dateAt)
        tiff += u16(0x9011) + u16(2) + u32(offsetBytes.count) + u32(offsetAt)
        tiff += u32(0)
        tiff += dateBytes + offsetBytes
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        return [0xFF, 0xE1] + u16(payload.count + 2) + payload
    }

    @Test("DateTimeOriginal 2019:10:20 18:34:30 with OffsetTimeOriginal +02:00 is archived as 16:34:30Z")
    func offsetApplied() throws {
        let folder = TestPaths.temporaryFolder("exif-offset")
        // A photo without EXIF of its own, given just these two tags.
        let plain = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Kodak-PIXPRO-SP360-small.jpg")))
        var bytes = [UInt8](plain)
        // Drop any APP1 the photo has, then put ours right after SOI.
        var at = 2
        var kept: [UInt8] = [0xFF, 0xD8]
        while at + 4 <= bytes.count, bytes[at] == 0xFF, bytes[at + 1] != 0xDA {
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            if bytes[at + 1] != 0xE1 { kept += bytes[at..<(at + 2 + length)] }
            at += 2 + length
        }
        bytes =
            [0xFF, 0xD8] + Self.exifSegment(date: "2019:10:20 18:34:30", offset: "+02:00") + kept.dropFirst(2)
            + bytes[at...]
        try Data(bytes).write(to: URL(fileURLWithPath: folder + "/a.jpg"))
        let manifest = writeFile(folder, "items.jsonl", #"{"itemName": "A", "image": "a.jpg", "itemKey": "ka"}"# + "\n")
        let run = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(run.status == 0, "\(run.stderr)")
        let item = try KeyedArchiveReader(path: folder + "/out/items.archive").validItem(at: 0)
        #expect(item.dateCreated.timeIntervalSince1970 == 1_571_589_270, "\(item.dateCreated)")
    }
}
