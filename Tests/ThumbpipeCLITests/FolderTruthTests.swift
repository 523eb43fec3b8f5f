import Foundation
import Testing
import ThumbpipeTestSupport

/// Folder mode loses nothing and misses nothing, night after night: a photo that
/// cannot be read or is empty for a night keeps its item, a renamed sub-folder's
/// photos are moved (no ghosts), a replacement with the same size and time is
/// redone, and links, pipes and devices are followed or named. Run as an
/// unprivileged user where the tests run as root, since root reads any file.
@Suite("Folder mode: a night that cannot read a photo loses nothing", .serialized)
struct FolderTruthTests {
    /// `thumbpipe ARGS` as `nobody` when the tests run as root (as the current user otherwise).
    func runUnprivileged(_ arguments: [String], in folder: String) throws -> ProcessResult {
        guard getuid() == 0 else { return try runThumbpipe(arguments, in: folder) }
        return try runProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", TestPaths.executable] + arguments, in: folder)
    }

    /// A folder of photos in two sub-folders, owned by the user the runs run as.
    func collection() throws -> String {
        let folder = TestPaths.temporaryFolder("truth")
        let photos = folder + "/photos"
        for sub in ["2021/Trip", "2020"] {
            try FileManager.default.createDirectory(atPath: photos + "/" + sub, withIntermediateDirectories: true)
        }
        for name in ["Blackberry-Z10-small", "FujiFilm-FinePix-F40fd-small", "Kodak-PIXPRO-SP360-small"] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/\(name).jpg"), toPath: photos + "/2021/Trip/\(name).jpg")
        }
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Leica-T-Typ-701-small.jpg"), toPath: photos + "/2020/a.jpg")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Apple-iPhone-6-plus-small.jpg"), toPath: photos + "/2020/b.jpg")
        if getuid() == 0 {
            #expect(try runProcess("/bin/chown", ["-R", "65534:65534", folder]).status == 0)
        }
        return folder
    }

    func report(_ folder: String) throws -> [String: Any] { try readJSONObject(folder + "/out/.thumbpipe/report.json") }

    @Test(
        "An unreadable photo, then an empty one: kept (exit 1, says why), outputs and archive entry intact; back, unchanged"
    )
    func unreadableAndEmpty() throws {
        let folder = try collection()
        let run = ["run", "photos", "-r", "-o", "out"]
        #expect(try runUnprivileged(run + ["-q"], in: folder).status == 0)
        let stores = try FileManager.default.contentsOfDirectory(atPath: folder + "/out").filter { $0.count == 36 }
        let archive = try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))

        #expect(chmod(folder + "/photos/2020/a.jpg", 0) == 0)
        let locked = try runUnprivileged(run, in: folder)
        #expect(locked.status == 1, "\(locked.stderr)")
        #expect(locked.stderr.contains("2020/a.jpg: cannot be read (Permission denied)"), "\(locked.stderr)")
        #expect(!locked.stderr.contains("empty"), "\(locked.stderr)")
        #expect(locked.stderr.contains("1 kept (1 unreadable)"), "\(locked.stderr)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder + "/out").filter { $0.count == 36 }.count == 5)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive")) == archive)

        #expect(chmod(folder + "/photos/2020/a.jpg", 0o644) == 0)
        let back = try runUnprivileged(run, in: folder)
        #expect(back.status == 0 && back.stderr.contains("0 decoded"), "\(back.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive")) == archive)

        // Being rewritten: 0 bytes for a moment.
        let path = folder + "/photos/2020/b.jpg"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try Data().write(to: URL(fileURLWithPath: path))
        let empty = try runUnprivileged(run, in: folder)
        #expect(empty.status == 1 && empty.stderr.contains("2020/b.jpg: is empty (0 bytes)"), "\(empty.stderr)")
        #expect(try report(folder).counts("incremental")["removed"] == 0)
        #expect(
            Set(try FileManager.default.contentsOfDirectory(atPath: folder + "/out").filter { $0.count == 36 })
                == Set(stores))
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive")) == archive)
        // Written back as it was: read again, its image data the one recorded, nothing decoded.
        try bytes.write(to: URL(fileURLWithPath: path))
        let written = try runUnprivileged(run + ["-q"], in: folder)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(try report(folder).counts("incremental")["decoded"] == 0)
        #expect(try report(folder).counts("incremental")["metadata"] == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive")) == archive)
    }

    @Test("A renamed sub-folder's photos are moved: no ghost items, exit 0; --prune-missing removes a vanished one")
    func renamedFolder() throws {
        let folder = try collection()
        let run = ["run", "photos", "-r", "-o", "out", "-q"]
        #expect(try runUnprivileged(run, in: folder).status == 0)
        try FileManager.default.moveItem(atPath: folder + "/photos/2021/Trip", toPath: folder + "/photos/2021/Iceland")
        let renamed = try runUnprivileged(run, in: folder)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        let counts = try report(folder).counts("incremental")
        #expect(counts["moved"] == 3 && counts["kept"] == 0 && counts["decoded"] == 0, "\(counts)")
        let inspect = try runThumbpipe(["inspect", folder + "/out/items.archive", "--json"])
        #expect(inspect.stdout.components(separatedBy: "\"itemKey\"").count - 1 == 5, "\(inspect.stdout)")
        let again = try runUnprivileged(run, in: folder)
        #expect(again.status == 0, "every later night is clean: \(again.stderr)")

        // A folder moved away entirely, with --prune-missing: its items leave the archive.
        try FileManager.default.moveItem(atPath: folder + "/photos/2021", toPath: folder + "/elsewhere")
        let pruned = try runUnprivileged(run + ["--prune-missing", "--max-removed", "100%"], in: folder)
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(try report(folder).counts("incremental")["removed"] == 3)
        let left = try runThumbpipe(["inspect", folder + "/out/items.archive", "--json"])
        #expect(left.stdout.components(separatedBy: "\"itemKey\"").count - 1 == 2, "\(left.stdout)")
    }

    @Test("A photo replaced by another of the same size and time (another inode) is redone")
    func sameStampReplacement() throws {
        let folder = try collection()
        let run = ["run", "photos", "-r", "-o", "out", "-q"]
        #expect(try runUnprivileged(run, in: folder).status == 0)
        let path = folder + "/photos/2020/a.jpg"
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[bytes.count - 100] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        try FileManager.default.setAttributes(
            [.modificationDate: attributes[.modificationDate]!, .ownerAccountID: attributes[.ownerAccountID]!],
            ofItemAtPath: path)
        let replaced = try runUnprivileged(run, in: folder)
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(try report(folder).counts("incremental")["decoded"] == 1)
        let quiet = try runUnprivileged(run, in: folder)
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(try report(folder).counts("incremental")["decoded"] == 0)
    }

    @Test(
        "Links to folders are followed once (loops counted), pipes and devices named, an unreadable sub-folder costs only itself"
    )
    func linksPipesAndLockedFolders() throws {
        let folder = try collection()
        let photos = folder + "/photos"
        let outside = folder + "/outside/more"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Canon-EOS-1000D.jpg"), toPath: outside + "/c.jpg")
        try FileManager.default.createSymbolicLink(atPath: photos + "/linked", withDestinationPath: folder + "/outside")
        try FileManager.default.createSymbolicLink(atPath: photos + "/2020/up", withDestinationPath: "..")
        try FileManager.default.createSymbolicLink(atPath: photos + "/null.jpg", withDestinationPath: "/dev/null")
        #expect(mkfifo(photos + "/pipe.jpg", 0o644) == 0)
        // A JPEG whose first marker after SOI is damaged (two stray bytes before it): libvips
        // reads it with a warning, so folder mode lists it as manifest mode takes it.
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg")))
        try (jpeg.prefix(2) + Data([0x00, 0x00]) + jpeg.dropFirst(2)).write(
            to: URL(fileURLWithPath: photos + "/damaged-marker.jpg"))
        if getuid() == 0 { #expect(try runProcess("/bin/chown", ["-R", "65534:65534", folder]).status == 0) }

        let scan = try runUnprivileged(["scan", "photos", "-r", "-o", "m.jsonl"], in: folder)
        #expect(scan.status == 0, "\(scan.stderr)")
        let manifest = try String(contentsOfFile: folder + "/m.jsonl", encoding: .utf8)
        #expect(manifest.contains("linked/more/c.jpg") && manifest.contains("damaged-marker.jpg"), "\(manifest)")
        #expect(manifest.split(separator: "\n").count == 7, "\(manifest)")
        #expect(scan.stderr.contains("skipped null.jpg: device file"), "\(scan.stderr)")
        #expect(scan.stderr.contains("skipped pipe.jpg: named pipe (FIFO)"), "\(scan.stderr)")
        #expect(scan.stderr.contains("1 symlink to folders not followed"), "\(scan.stderr)")

        let run = ["run", "photos", "-r", "-o", "out"]
        let first = try runUnprivileged(run, in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try report(folder).counts("incremental")["new"] == 7)
        #expect(chmod(photos + "/2021/Trip", 0) == 0)
        let locked = try runUnprivileged(run, in: folder)
        #expect(locked.status == 1, "its items are kept, and that is news: \(locked.stderr)")
        #expect(locked.stderr.contains("cannot read sub-folder 2021/Trip: Permission denied"), "\(locked.stderr)")
        let counts = try report(folder).counts("incremental")
        #expect(counts["kept"] == 3 && counts["unchanged"] == 4 && counts["removed"] == 0, "\(counts)")
        #expect(chmod(photos + "/2021/Trip", 0o755) == 0)
    }

    @Test("Messages read as English and suggest the likely fix")
    func messages() throws {
        let folder = TestPaths.temporaryFolder("messages")
        let photos = folder + "/lightroom"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: photos + "/IMG_4501.jpg")
        for name in ["a.bin", "b.bin"] {
            try Data([0x01, 0x02, 0x03, 0x04]).write(to: URL(fileURLWithPath: photos + "/" + name))
        }
        let command = try runThumbpipe(["lightroom", "-r"], in: folder)
        #expect(
            command.status == 64 && command.stderr.contains("to run it: thumbpipe run lightroom -r"),
            "\(command.stderr)")
        let photo = try runThumbpipe(["run", "lightroom/IMG_4501.jpg"], in: folder)
        #expect(photo.status == 64, "\(photo.stderr)")
        #expect(
            photo.stderr.contains("is a photo, not a manifest")
                && photo.stderr.contains("did you mean: thumbpipe run lightroom"), "\(photo.stderr)")
        let manifest = writeFile(folder, "items.jsonl", #"{"name": "Bike", "image": "lightroom/IMG_4501.jpg"}"# + "\n")
        let named = try runThumbpipe(["run", manifest, "-o", folder + "/out"])
        #expect(named.stderr.contains("itemName is required; found 'name': rename it to itemName"), "\(named.stderr)")
        let scan = try runThumbpipe(["scan", "lightroom"], in: folder)
        #expect(scan.stderr.contains("2 files skipped: 2 files of unknown type"), "\(scan.stderr)")
    }
}

/// A library's structure kept through a migration, from names alone: an Apple
/// export's edit and its original are one item, a Live Photo's video and the
/// `.AAE` are named as paired, byte-identical copies are one item, the folder is
/// in the manifest, and names shared across folders are said once.
@Suite("Folder mode: an export's edits, Live Photos, copies and folders")
struct LibraryStructureTests {
    @Test("An Apple export: the edit is the original's photo, companions paired, a copy folded, folders kept")
    func appleExport() throws {
        let folder = TestPaths.temporaryFolder("apple")
        let export = folder + "/export"
        for sub in ["2021", "2022"] {
            try FileManager.default.createDirectory(atPath: export + "/" + sub, withIntermediateDirectories: true)
        }
        func copy(_ fixture: String, _ to: String) throws {
            try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/" + fixture), toPath: export + "/" + to)
        }
        try copy("Apple-iPhone-13-Pro-Max.HEIC", "2021/IMG_0001.HEIC")
        try copy("Apple-iPhone-6-plus-small.jpg", "2021/IMG_E0001.JPG")
        try Data([0, 0, 0, 20] + Array("ftypqt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8)).write(
            to: URL(fileURLWithPath: export + "/2021/IMG_0001.MOV"))
        _ = writeFile(export + "/2021", "IMG_0001.AAE", "<?xml version=\"1.0\"?><plist></plist>\n")
        try copy("Sigma-DP1-small.jpg", "2021/IMG_0002.JPG")
        try copy("Sigma-DP1-small.jpg", "2021/IMG_0002(1).JPG")
        try copy("Leica-T-Typ-701-small.jpg", "2021/IMG_0003.JPG")
        try copy("Kodak-PIXPRO-SP360-small.jpg", "2022/IMG_0003.JPG")

        let scan = try runThumbpipe(["scan", "export", "-r", "-o", "m.jsonl"], in: folder)
        #expect(scan.status == 0, "\(scan.stderr)")
        let lines = try String(contentsOfFile: folder + "/m.jsonl", encoding: .utf8).split(separator: "\n")
            .map(String.init)
        #expect(lines.count == 4, "\(lines)")
        let first = try #require(lines.first)
        #expect(first.contains(#""itemName": "IMG_0001""#) && first.contains("IMG_E0001.JPG"), "\(first)")
        #expect(first.contains(#""folder": "2021""#), "\(first)")
        #expect(lines.filter { $0.contains("IMG_0002") }.count == 1, "one item for the copies: \(lines)")
        #expect(
            scan.stderr.contains("skipped 2021/IMG_0001.MOV: Live Photo video paired with its still"), "\(scan.stderr)")
        #expect(
            scan.stderr.contains("skipped 2021/IMG_0001.AAE: Apple edit instructions (.AAE) paired"), "\(scan.stderr)")
        #expect(scan.stderr.contains("1 edited photo (Apple's IMG_E…) made one item"), "\(scan.stderr)")
        #expect(scan.stderr.contains("1 file byte-identical to another"), "\(scan.stderr)")
        #expect(scan.stderr.contains("1 name shared by items in different folders"), "\(scan.stderr)")
        #expect(scan.stderr.contains("IMG_0003 (2021, 2022)"), "\(scan.stderr)")

        // run DIR: the same items, the same keys; the report lists what was folded.
        let run = try runThumbpipe(["run", "export", "-r", "-o", "out", "-q"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        let manifestRun = try runThumbpipe(["run", "m.jsonl", "-o", "out2", "-q"], in: folder)
        #expect(manifestRun.status == 0, "\(manifestRun.stderr)")
        let archive = try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out2/items.archive")) == archive)
        let left = try readJSONObject(folder + "/out/.thumbpipe/report.json").object("leftOut")
        let folded = try #require(left["folded"] as? [[String: Any]])
        #expect(folded.count == 2, "\(folded)")
        #expect(
            folded.contains { $0["reason"] as? String == "edit of" && $0["kept"] as? String == "2021/IMG_0001.HEIC" })
    }

    @Test(
        "Takeout sidecars date their photos (old, new, truncated and duplicate names); XMP dates a photo without one; hostile sidecars cost a warning"
    )
    func takeoutAndXMP() throws {
        let folder = TestPaths.temporaryFolder("takeout")
        let album = folder + "/Takeout/Google Photos/Zdjęcia z 2020"
        try FileManager.default.createDirectory(atPath: album, withIntermediateDirectories: true)
        func photo(_ fixture: String, _ name: String) throws {
            try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/" + fixture), toPath: album + "/" + name)
        }
        func takeout(_ name: String, _ seconds: Int) {
            _ = writeFile(
                album, name,
                #"{"title": "IMG_upload.jpg", "photoTakenTime": {"timestamp": "\#(seconds)", "formatted": "…"}}"#)
        }
        let long = "PXL_20200101_120000123.NIGHT.PORTRAIT-01.COVER.jpg"
        try photo("Nikon-D3100.jpg", "IMG_A.jpg")  // EXIF dated: the sidecar wins
        takeout("IMG_A.jpg.json", 1_577_880_000)
        try photo("Canon-EOS-1000D.jpg", long)
        takeout(String((long + ".supplemental-metadata").prefix(46)) + ".json", 1_577_966_400)
        try photo("Sigma-DP1-small.jpg", "IMG_B(1).jpg")
        takeout("IMG_B.jpg.supplemental-metadata(1).json", 1_578_052_800)
        // No EXIF date of its own (a PNG): dated by its XMP sidecar.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("edge/png-palette-trns_paletted-transparent.png"), toPath: album + "/chart.png")
        _ = writeFile(
            album, "chart.xmp",
            #"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description exif:DateTimeOriginal="2019-07-04T10:00:00Z"/></rdf:RDF></x:xmpmeta>"#
        )
        // Hostile: a billion-laughs XMP and a 2 MB JSON: a warning each, the photos done.
        try photo("Leica-T-Typ-701-small.jpg", "laughs.jpg")
        let lol = (1...9).map { #"<!ENTITY lol\#($0) "&lol\#($0 - 1);&lol\#($0 - 1);&lol\#($0 - 1);">"# }.joined()
        _ = writeFile(
            album, "laughs.xmp", #"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY lol0 "lol">\#(lol)]><x>&lol9;</x>"#)
        try photo("Kodak-PIXPRO-SP360-small.jpg", "huge.jpg")
        try Data(repeating: 0x20, count: 2 << 20).write(to: URL(fileURLWithPath: album + "/huge.jpg.json"))
        let started = Date()
        let run = try runThumbpipe(["run", "Takeout", "-r", "-o", "out"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Date().timeIntervalSince(started) < 60)
        #expect(
            run.stderr.contains("sidecar laughs.xmp: XMP declares a DTD or entities, which XMP forbids: not read"),
            "\(run.stderr)")
        #expect(run.stderr.contains("sidecar huge.jpg.json: 2097152 bytes, over 1 MiB: not read"), "\(run.stderr)")
        #expect(run.stderr.contains("sidecar read for its photo's date"), "\(run.stderr)")
        let inspect = try runThumbpipe(["inspect", "out/items.archive", "--json"], in: folder)
        var dates: [String: String] = [:]
        for line in inspect.stdout.split(separator: "\n") {
            let item = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            dates[item["itemName"] as? String ?? ""] = item["dateCreated"] as? String
        }
        #expect(dates["IMG_A"] == "2020-01-01T12:00:00Z", "\(dates)")
        #expect(dates[String(long.dropLast(4))] == "2020-01-02T12:00:00Z", "\(dates)")
        #expect(dates["IMG_B(1)"] == "2020-01-03T12:00:00Z", "\(dates)")
        #expect(dates["chart"] == "2019-07-04T10:00:00Z", "\(dates)")
        // --prefer-exif-date: the camera's date wins where the photo has one.
        let exif = try runThumbpipe(["run", "Takeout", "-r", "-o", "exif", "-q", "--prefer-exif-date"], in: folder)
        #expect(exif.status == 0, "\(exif.stderr)")
        let exifDates = try runThumbpipe(["inspect", "exif/items.archive", "--json"], in: folder).stdout
        #expect(!exifDates.contains("2020-01-01T12:00:00Z"), "IMG_A keeps its EXIF date: \(exifDates)")
    }
}
