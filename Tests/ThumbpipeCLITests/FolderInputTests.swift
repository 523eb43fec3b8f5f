import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Folder inputs: only what a loader in limits.formats takes, every skip said
/// and counted, and the folders a run cannot mean refused with what to type.
@Suite("Folder inputs: what is skipped is said; wrong folders are refused", .serialized)
struct FolderInputTests {
    /// A folder with one photo and the non-photos a real collection holds.
    func mixedFolder() throws -> String {
        let folder = TestPaths.temporaryFolder("mixed-folder")
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/a.jpg")
        // An MP4 (ISO-BMFF, brand isom), a PDF, an SVG, a JPEG XL (codestream).
        let mp4 =
            [0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isomiso2".utf8)
            + [UInt8](repeating: 0, count: 64)
        try Data(mp4).write(to: URL(fileURLWithPath: folder + "/clip.mp4"))
        try Data("%PDF-1.4\n%âãÏÓ\n1 0 obj\n<<>>\nendobj\n".utf8).write(
            to: URL(fileURLWithPath: folder + "/receipt.pdf"))
        try Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#.utf8).write(
            to: URL(fileURLWithPath: folder + "/logo.svg"))
        try Data([0xFF, 0x0A, 0xFA, 0x7F, 0x01, 0x90, 0x08] + [UInt8](repeating: 0, count: 32)).write(
            to: URL(fileURLWithPath: folder + "/photo.jxl"))
        return folder
    }

    @Test(
        "Folder mode: a sub-folder that vanished (unmounted, moved) is kept (source missing), never removed; back, it is unchanged; a file deleted from a folder still there is removed"
    )
    func vanishedSubfolderIsKept() throws {
        let folder = TestPaths.temporaryFolder("vanished")
        let photos = folder + "/photos"
        for (sub, names) in [
            ("batch-01", ["Nikon-D3100.jpg", "Sigma-DP1-small.jpg"]),
            ("batch-09", ["Canon-EOS-5D.jpg", "Oppo-R7-Plus-small.jpg"]),
        ] {
            try FileManager.default.createDirectory(atPath: photos + "/" + sub, withIntermediateDirectories: true)
            for name in names {
                try FileManager.default.copyItem(
                    atPath: TestPaths.fixture("photos/" + name), toPath: photos + "/\(sub)/\(name)")
            }
        }
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", photos, "-r", "-o", out, "-q"]).status == 0)
        let archive = try Data(contentsOf: URL(fileURLWithPath: out + "/items.archive"))
        let stores = try FileManager.default.contentsOfDirectory(atPath: out).filter { !$0.hasPrefix(".") }
        // The share is unmounted: its items are kept, with their store files, and the run says so (exit 1).
        try FileManager.default.moveItem(atPath: photos + "/batch-09", toPath: folder + "/elsewhere")
        let away = try runThumbpipe(["run", photos, "-r", "-o", out, "-q", "--max-removed", "100%"])
        #expect(away.status == 1, "\(away.stderr)")
        #expect(away.stderr.contains("source missing"), "\(away.stderr)")
        let incremental = try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")
        #expect(incremental["kept"] == 2 && incremental["removed"] == 0, "\(incremental)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: out).filter { !$0.hasPrefix(".") }.sorted()
                == stores.sorted())
        #expect(try Data(contentsOf: URL(fileURLWithPath: out + "/items.archive")) == archive, "the same archive")
        // Back: nothing decoded, the archive as it was.
        try FileManager.default.moveItem(atPath: folder + "/elsewhere", toPath: photos + "/batch-09")
        let back = try runThumbpipe(["run", photos, "-r", "-o", out, "-q"])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out + "/items.archive")) == archive)
        // A file deleted from a folder that is still there: removed.
        try FileManager.default.removeItem(atPath: photos + "/batch-01/Sigma-DP1-small.jpg")
        let deleted = try runThumbpipe(["run", photos, "-r", "-o", out, "-q", "--max-removed", "100%"])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")["removed"] == 1)
    }

    @Test("What a migration left out is in report.json and report.html, and scan names the files it skipped")
    func leftOutReported() throws {
        let folder = TestPaths.temporaryFolder("left-out")
        let photos = folder + "/photos"
        for sub in ["", "/sub", "/.hidden"] {
            try FileManager.default.createDirectory(atPath: photos + sub, withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: photos + "/a.jpg")
        _ = writeFile(photos, "notes.txt", "not a photo")
        try FileManager.default.createSymbolicLink(atPath: photos + "/linked", withDestinationPath: folder)
        let scan = try runThumbpipe(["scan", photos, "-o", folder + "/m.jsonl"])
        #expect(scan.stderr.contains("skipped notes.txt: text file"), "\(scan.stderr)")
        let run = try runThumbpipe(["run", photos, "-o", folder + "/out", "-q"])
        #expect(run.status == 0, "\(run.stderr)")
        let left = try readJSONObject(folder + "/out/.thumbpipe/report.json").object("leftOut")
        #expect(
            left["hidden"] as? Int == 1 && left["symlinkedFolders"] as? Int == 1 && left["subfolders"] as? Int == 1,
            "\(left)")
        let files = try #require(left["skippedFiles"] as? [[String: Any]])
        #expect(files.first?["path"] as? String == "notes.txt", "\(files)")
        let html = try String(contentsOfFile: folder + "/out/.thumbpipe/report.html", encoding: .utf8)
        #expect(html.contains("id=\"left-out\"") && html.contains("notes.txt") && html.contains("add -r"))
    }

    @Test("scan and run DIR keep what limits.formats takes and say what they skipped, by kind")
    func skippedByKind() throws {
        let folder = try mixedFolder()
        let scan = try runThumbpipe(["scan", folder])
        #expect(scan.status == 0)
        #expect(
            scan.stdout.split(separator: "\n").count == 2, "the JPEG and the JPEG XL (a default format): \(scan.stdout)"
        )
        #expect(
            scan.stderr.contains("3 files skipped: 1 MP4 video, 1 PDF not in --formats, 1 SVG not in --formats"),
            "\(scan.stderr)")
        let run = try runThumbpipe(["run", folder, "-o", folder + "-out", "-q", "--formats", "jpeg,png"])
        #expect(run.status == 0, "the non-photos are not items that fail every night: \(run.stderr)")
        #expect(
            run.stderr.contains(
                "4 files skipped: 1 JPEG XL not in --formats, 1 MP4 video, 1 PDF not in --formats, 1 SVG not in --formats"
            ),
            "\(run.stderr)")
        #expect(try KeyedArchiveReader(path: folder + "-out/items.archive").count == 1)
    }

    @Test("A file name that is not UTF-8 (Latin-1 from an old zip) is counted and listed escaped, never dropped unsaid")
    func latin1Name() throws {
        let folder = TestPaths.temporaryFolder("latin1")
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/a.jpg")
        let photo = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Canon-EOS-1000D.jpg")))
        // "café.jpg" in Latin-1: 0xE9 alone is no UTF-8.
        let name = Array((folder + "/caf").utf8) + [0xE9] + Array(".jpg".utf8) + [0]
        let fd = name.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
        }
        #expect(fd >= 0)
        _ = photo.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let scan = try runThumbpipe(["scan", folder])
        #expect(scan.status == 0 && scan.stdout.split(separator: "\n").count == 1)
        #expect(
            scan.stderr.contains(#"1 file skipped: 1 with a name that is not UTF-8 (caf\xe9.jpg)"#), "\(scan.stderr)")
        let run = try runThumbpipe(["run", folder, "-o", folder + "-out", "-q"])
        #expect(run.status == 0 && run.stderr.contains(#"caf\xe9.jpg"#), "\(run.stderr)")
    }

    @Test(
        "run DIR refuses an output folder (did you mean DIR/items.archive), -o inside DIR, no images, images only below"
    )
    func wrongFolders() throws {
        let (folder, manifest) = try photoCollection("wrong", [("a.jpg", "Nikon-D3100.jpg", "A", "ka")])
        let out = folder + "/out"
        #expect(try runThumbpipe(["run", manifest, "-o", out, "-q"]).status == 0)
        // The app's Documents folder given instead of its archive.
        let documents = try runThumbpipe(["run", out, "-o", folder + "/new", "-q"])
        #expect(documents.status == 64, "\(documents.stderr)")
        #expect(documents.stderr.contains("did you mean: thumbpipe run \(out)/items.archive"), "\(documents.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/new/items.archive"))
        // The output inside the scanned tree: its store files would be photos next night.
        let collection = TestPaths.temporaryFolder("c3")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: collection + "/a.jpg")
        let inside = try runThumbpipe(["run", collection, "-r", "-o", collection + "/thumbs", "-q"])
        #expect(inside.status == 64 && inside.stderr.contains("is inside the scanned folder"), "\(inside.stderr)")
        let same = try runThumbpipe(["run", collection, "-o", collection, "-q"])
        #expect(same.status == 64, "\(same.stderr)")
        // Photos only in sub-folders, without -r.
        let nested = TestPaths.temporaryFolder("nested")
        for (sub, photo) in [("2019", "Nikon-D3100.jpg"), ("2020", "Canon-EOS-1000D.jpg")] {
            try FileManager.default.createDirectory(atPath: nested + "/" + sub, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/" + photo), toPath: nested + "/" + sub + "/a.jpg")
        }
        let flat = try runThumbpipe(["run", nested, "-o", nested + "-out", "-q"])
        #expect(flat.status == 66, "\(flat.stderr)")
        #expect(flat.stderr.contains("no images directly in \(nested); 2 in sub-folders: add -r"), "\(flat.stderr)")
        #expect(try runThumbpipe(["run", nested, "-r", "-o", nested + "-out", "-q"]).status == 0)
        // An empty folder over last night's output: refused, nothing removed.
        let empty = TestPaths.temporaryFolder("empty")
        let refused = try runThumbpipe(["run", empty, "-o", nested + "-out", "-q"])
        #expect(refused.status == 66 && refused.stderr.contains("has no images"), "\(refused.stderr)")
        #expect(try KeyedArchiveReader(path: nested + "-out/items.archive").count == 2)
    }
}

@Suite("scan --update and duplicates", .serialized)
struct ScanUpdateTests {
    @Test("scan --update adds new photos at the end, keeps every edited line in its place, lists the photos gone")
    func updateKeepsEdits() throws {
        let folder = TestPaths.temporaryFolder("update")
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        for (name, fixture) in [("a.jpg", "Nikon-D3100.jpg"), ("b.jpg", "Canon-EOS-1000D.jpg")] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("photos/" + fixture), toPath: photos + "/" + name)
        }
        let manifest = folder + "/items.jsonl"
        #expect(try runThumbpipe(["scan", photos, "-o", manifest]).status == 0)
        // The user edits names and values, and reorders nothing.
        var lines = try String(contentsOfFile: manifest, encoding: .utf8).split(separator: "\n").map(String.init)
        lines[0] = lines[0].replacingOccurrences(
            of: #""itemName": "a""#, with: #""itemName": "Red Bike", "valueInDollars": 120"#)
        let edited = lines.joined(separator: "\n") + "\n"
        try Data(edited.utf8).write(to: URL(fileURLWithPath: manifest))
        // A new photo arrives, one goes.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Nikon-Coolpix-P7000.webp"), toPath: photos + "/c.webp")
        try FileManager.default.removeItem(atPath: photos + "/b.jpg")
        let update = try runThumbpipe(["scan", photos, "--update", manifest])
        #expect(update.status == 0, "\(update.stderr)")
        #expect(update.stderr.contains("items.jsonl:2: photos/b.jpg (b) is gone; its line is kept"), "\(update.stderr)")
        #expect(
            update.stderr.contains("1 new photos added, 2 lines kept as they were, 1 photos gone"), "\(update.stderr)")
        let after = try String(contentsOfFile: manifest, encoding: .utf8)
        #expect(after.hasPrefix(edited), "every line as it was, in its place")
        #expect(after.dropFirst(edited.count).contains(#""image": "photos/c.webp""#), "\(after)")
        #expect(after.split(separator: "\n").count == 3)
        // Nothing new: the file is not rewritten.
        let again = try runThumbpipe(["scan", photos, "--update", manifest])
        let unchanged = try String(contentsOfFile: manifest, encoding: .utf8)
        #expect(again.status == 0 && unchanged == after)
        #expect(try runThumbpipe(["scan", photos, "--update", manifest, "-o", folder + "/x.jsonl"]).status == 64)
        // A line the user deletes stays deleted: the photo is still there, but not added back.
        let kept = after.split(separator: "\n").filter { !$0.contains("photos/a.jpg") }.joined(separator: "\n") + "\n"
        try Data(kept.utf8).write(to: URL(fileURLWithPath: manifest))
        let excluded = try runThumbpipe(["scan", photos, "--update", manifest])
        #expect(
            excluded.status == 0 && excluded.stderr.contains("1 photos left out: their lines were deleted"),
            "\(excluded.stderr)")
        #expect(try String(contentsOfFile: manifest, encoding: .utf8) == kept, "photos/a.jpg is not back")
        #expect(try String(contentsOfFile: manifest + ".seen", encoding: .utf8).contains(#""photos/a.jpg""#))
    }

    @Test("Byte-identical photos are flagged by scan and by the run's summary and report")
    func duplicatesFlagged() throws {
        let (folder, manifest) = try photoCollection(
            "duplicates",
            [
                ("a.jpg", "Nikon-D3100.jpg", "Bike", "ka"), ("copy.jpg", "Nikon-D3100.jpg", "Bike copy", "kc"),
                ("b.jpg", "Canon-EOS-1000D.jpg", "Lamp", "kb"),
            ])
        let scan = try runThumbpipe(["scan", folder])
        #expect(scan.stderr.contains("1 file byte-identical to another made no item of its own"), "\(scan.stderr)")
        #expect(scan.stderr.contains("a.jpg = copy.jpg"), "\(scan.stderr)")
        let out = folder + "/out"
        let run = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(run.status == 0)
        #expect(
            run.stderr.contains("2 items share their photo with another (the same content): Bike = Bike copy"),
            "\(run.stderr)")
        let groups = try #require(readJSONObject(out + "/.thumbpipe/report.json")["duplicates"] as? [[[String: Any]]])
        #expect(
            groups.count == 1 && Set(groups[0].compactMap { $0["itemKey"] as? String }) == ["ka", "kc"], "\(groups)")
        // A night with nothing to do says so too.
        let unchanged = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(unchanged.stderr.contains("2 items share their photo with another"), "\(unchanged.stderr)")
    }

    @Test("Thirty copies of one photo: one short line, four names and a count")
    func manyCopiesOneLine() throws {
        let (folder, manifest) = try photoCollection(
            "copies", (0..<30).map { ("c\($0).jpg", "Sigma-DP1-small.jpg", "Copy \($0)", "k\($0)") })
        let run = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(run.status == 0, "\(run.stderr)")
        let line = try #require(run.stderr.split(separator: "\n").first { $0.contains("share their photo") })
        #expect(line.contains("30 items share their photo") && line.contains("(+26 more)"), "\(line)")
        #expect(line.count < 200, "\(line)")
        #expect(DuplicateItem.line([["a", "b"], ["c", "d", "e"]], groups: 1, names: 2) == "a = b; …")
    }
}

@Suite("sRGB by the numbers, end to end")
struct SRGBEndToEndTests {
    @Test(
        "A photo tagged with a profile named sRGB but P3's primaries is converted; one tagged with sRGB itself is not")
    func taggedPhotos() throws {
        let folder = TestPaths.temporaryFolder("srgb-tags")
        let source = TestPaths.fixture("photos/Nikon-D3100.jpg")
        try CraftedProfiles.tag(source, with: CraftedProfiles.srgb(), to: folder + "/srgb.jpg")
        try CraftedProfiles.tag(source, with: CraftedProfiles.srgbNamedP3(), to: folder + "/named.jpg")
        try CraftedProfiles.tag(
            source, with: CraftedProfiles.linear(CraftedProfiles.srgb()), to: folder + "/linear.jpg")
        let manifest = writeFile(
            folder, "items.jsonl",
            [
                #"{"itemName": "sRGB", "image": "srgb.jpg", "itemKey": "srgb"}"#,
                #"{"itemName": "named", "image": "named.jpg", "itemKey": "named"}"#,
                #"{"itemName": "linear", "image": "linear.jpg", "itemKey": "linear"}"#,
            ].joined(separator: "\n") + "\n")
        let out = folder + "/out"
        let run = try runThumbpipe(["run", manifest, "-o", out, "-q", "--jobs", "1"])
        #expect(run.status == 0, "\(run.stderr)")
        // The three sources hold the same pixels: only their profiles differ.
        let archive = try KeyedArchiveReader(path: out + "/items.archive")
        let srgb = try #require(try archive.validItem(at: 0).thumbnailData)
        let named = try #require(try archive.validItem(at: 1).thumbnailData)
        let linear = try #require(try archive.validItem(at: 2).thumbnailData)
        #expect(named != srgb, "P3's primaries under the name sRGB: converted, so the colours differ")
        #expect(linear != srgb, "a linear curve under the name sRGB: converted")
        // And the store files: a real sRGB passes as the pixels it has.
        let plain = try DecodedTestImage.load(png: srgb)
        let p3 = try DecodedTestImage.load(png: named)
        #expect(psnr(plain.pixels, p3.pixels) < 45, "visibly converted (PSNR \(psnr(plain.pixels, p3.pixels)) dB)")
    }
}
