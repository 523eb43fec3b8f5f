import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// From a folder, stdin, or an app's Documents folder to an archive, without a manifest written by hand.
@Suite("Folders, stdin and Documents folders as input", .serialized)
struct MigrationTests {
    /// A folder with sub-folders, spaces and commas in names, and a non-image named .jpg.
    func photoFolder() throws -> String {
        let root = TestPaths.temporaryFolder("folder")
        let photos = root + "/photos"
        try FileManager.default.createDirectory(atPath: photos + "/Beach, day 1", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: photos + "/sub", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: photos + "/Beach, day 1/Beach, day 1.jpg")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("edge/webp-alpha_5_webp_a.webp"), toPath: photos + "/sub/glass.webp")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("edge/tiny-1x1-rgb_1x1.png"), toPath: photos + "/dot.png")
        writeFile(photos, "notes.jpg", "not a photo, whatever its name says")
        writeFile(photos, ".hidden.jpg", "hidden")
        return root
    }

    @Test("scan writes a sorted JSONL manifest with stable keys; run DIR and run - give the same archive")
    func scanAndRunFolder() throws {
        let root = try photoFolder()
        let scanned = try runThumbpipe(["scan", "photos", "-r", "-o", "lists/items.jsonl"], in: root)
        #expect(scanned.status == 0, "\(scanned.stderr)")
        #expect(scanned.stderr.contains("3 images; 1 file skipped: 1 "), "\(scanned.stderr)")
        let lines = try String(contentsOfFile: root + "/lists/items.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3)
        #expect(
            lines[0].contains(#""itemName": "Beach, day 1""#)
                && lines[0].contains(#""image": "../photos/Beach, day 1/Beach, day 1.jpg""#))
        #expect(
            lines[1].contains(#""image": "../photos/dot.png""#) && lines[2].contains("sub/glass.webp"), "sorted by path"
        )
        // Keys depend on the path inside the scanned folder only: a scan to stdout from elsewhere agrees.
        let again = try runThumbpipe(["scan", root + "/photos", "--recursive"])
        #expect(again.status == 0)
        func keys(_ text: String) -> [String] {
            text.split(separator: "\n").compactMap { line in
                line.range(of: #""itemKey": "[^"]+""#, options: .regularExpression).map { String(line[$0]) }
            }
        }
        #expect(keys(again.stdout) == keys(lines.joined(separator: "\n")))
        // scan then run, run DIR, and run - all make the same archive.
        let viaManifest = try runThumbpipe(["run", "lists/items.jsonl", "-o", "a", "-q"], in: root)
        #expect(viaManifest.status == 0, "\(viaManifest.stderr)")
        let viaFolder = try runThumbpipe(["run", "photos", "-r", "-o", "b", "-q"], in: root)
        #expect(viaFolder.status == 0, "\(viaFolder.stderr)")
        let viaStdin = try runProcess(
            "/bin/sh", ["-c", "\"$0\" scan photos -r | \"$0\" run - -o c -q", TestPaths.executable], in: root)
        #expect(viaStdin.status == 0, "\(viaStdin.stderr)")
        let a = try Data(contentsOf: URL(fileURLWithPath: root + "/a/items.archive"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/b/items.archive")) == a)
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/c/items.archive")) == a)
        // Only the top folder without -r.
        let flat = try runThumbpipe(["scan", "photos"], in: root)
        #expect(flat.stdout.split(separator: "\n").count == 1)
    }

    @Test("A Documents folder made by a run, regenerated at scale 3: store files byte-identical, fields kept")
    func regenerateDocuments() throws {
        let folder = TestPaths.temporaryFolder("documents")
        let lines = [
            #"{"itemName": "Camera", "serialNumber": "C1", "valueInDollars": 12, "image": "\#(TestPaths.fixture("photos/Canon-EOS-1000D.jpg"))", "itemKey": "camera"}"#,
            #"{"itemName": "Dice", "image": "\#(TestPaths.fixture("edge/png-palette-trns_paletted-transparent.png"))", "itemKey": "dice"}"#,
            #"{"itemName": "Card", "itemKey": "card"}"#,
        ]
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/old", "-q"]).status == 0)
        // The app lost one store file; that item keeps its archived thumbnail.
        let oldDice = try KeyedArchiveReader(path: folder + "/old/items.archive").item(at: 1).thumbnailData
        try FileManager.default.removeItem(atPath: folder + "/old/dice")
        let result = try runThumbpipe([
            "run", folder + "/old/items.archive", "-o", folder + "/new", "--scale", "3", "-q",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("1 items have no store file"), "\(result.stderr)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/new/camera"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/old/camera")), "carried over byte for byte")
        let old = try KeyedArchiveReader(path: folder + "/old/items.archive").items()
        let new = try KeyedArchiveReader(path: folder + "/new/items.archive").items()
        #expect(new.map(\.itemKey) == old.map(\.itemKey))
        #expect(new.map(\.itemName) == old.map(\.itemName) && new.map(\.dateCreated) == old.map(\.dateCreated))
        #expect(new[0].valueInDollars == 12 && new[0].serialNumber == "C1")
        let png = try #require(new[0].thumbnailData)
        #expect(try #require(PNGInfo.size(png)) == (120, 120))
        #expect(new[1].thumbnailData == oldDice, "kept untouched")
        #expect(new[2].thumbnailData == nil)
    }

    @Test("An archive written by Apple's NSKeyedArchiver, first edition items included, is read and regenerated")
    func appleArchive() throws {
        let folder = TestPaths.temporaryFolder("apple")
        let old = folder + "/Documents"
        try FileManager.default.createDirectory(atPath: old, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: old + "/K1")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Oppo-R7-Plus-small.jpg"), toPath: old + "/K2")
        let thumb = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("edge/tiny-1x1-rgb_1x1.png")))
        try thumb.write(to: URL(fileURLWithPath: folder + "/thumb.png"))
        // As Apple's writer lays it out: NSMutableArray root, keys in its own order, a
        // string shared by two items, NSMutableString and NSMutableData objects, an extra
        // key, and a first-edition item with a UIImage under "thumbnail".
        let script = #"""
            import plistlib, sys
            U = plistlib.UID
            thumb = open(sys.argv[2], 'rb').read()
            objects = [
              '$null',
              {'$class': U(2), 'NS.objects': [U(3), U(10), U(14)]},
              {'$classname': 'NSMutableArray', '$classes': ['NSMutableArray', 'NSArray', 'NSObject']},
              {'thumbnailData': U(6), 'extraKey': U(9), 'valueInDollars': 5, 'dateCreated': U(7),
               'itemKey': U(4), 'serialNumber': U(5), 'itemName': U(8), '$class': U(17)},
              'K1',
              {'NS.string': 'SER-1', '$class': U(16)},
              {'NS.data': thumb, '$class': U(18)},
              {'NS.time': 400000000.0, '$class': U(19)},
              'Shared name',
              'ignored',
              {'itemName': U(8), 'serialNumber': U(12), 'itemKey': U(11), 'dateCreated': U(7),
               'valueInDollars': 7, 'thumbnail': U(13), '$class': U(17)},
              'K2',
              '',
              {'$class': U(20), 'UIImageData': thumb},
              {'itemName': U(15), 'serialNumber': U(0), 'itemKey': U(21), 'dateCreated': U(7),
               'valueInDollars': 9, 'thumbnailData': U(6), '$class': U(17)},
              'No photo',
              {'$classname': 'NSMutableString', '$classes': ['NSMutableString', 'NSString', 'NSObject']},
              {'$classname': 'BNRItem', '$classes': ['BNRItem', 'NSObject']},
              {'$classname': 'NSMutableData', '$classes': ['NSMutableData', 'NSData', 'NSObject']},
              {'$classname': 'NSDate', '$classes': ['NSDate', 'NSObject']},
              {'$classname': 'UIImage', '$classes': ['UIImage', 'NSObject']},
              'K3',
            ]
            archive = {'$archiver': 'NSKeyedArchiver', '$version': 100000, '$top': {'root': U(1)}, '$objects': objects}
            plistlib.dump(archive, open(sys.argv[1], 'wb'), fmt=plistlib.FMT_BINARY)
            """#
        let python = try runProcess("/usr/bin/python3", ["-c", script, old + "/items.archive", folder + "/thumb.png"])
        try #require(python.status == 0, "\(python.stderr)")
        let inspect = try runThumbpipe(["inspect", old + "/items.archive"])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        #expect(inspect.stdout.contains("Shared name") && inspect.stdout.contains("SER-1"))
        let result = try runThumbpipe(["run", old + "/items.archive", "-o", folder + "/new", "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("1 items archived a UIImage thumbnail"), "\(result.stderr)")
        let items = try KeyedArchiveReader(path: folder + "/new/items.archive").items()
        #expect(items.map(\.itemKey) == ["K1", "K2", "K3"])
        #expect(items.map(\.itemName) == ["Shared name", "Shared name", "No photo"])
        #expect(items[0].serialNumber == "SER-1" && items[0].valueInDollars == 5)
        #expect(items.allSatisfy { $0.dateCreated == Date(timeIntervalSinceReferenceDate: 400_000_000) })
        let regenerated = try #require(items[1].thumbnailData, "first edition: regenerated")
        #expect(try #require(PNGInfo.size(regenerated)) == (80, 80))
        #expect(items[2].thumbnailData == thumb, "no store file: the archived thumbnail is kept")
        for key in ["K1", "K2"] {
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: folder + "/new/" + key))
                    == Data(contentsOf: URL(fileURLWithPath: old + "/" + key)))
        }
        // In place, and incrementally.
        let inPlace = try runThumbpipe(["run", old + "/items.archive", "-o", old, "-q"])
        #expect(inPlace.status == 0, "\(inPlace.stderr)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: old + "/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/new/items.archive")))
        let again = try runThumbpipe(["run", old + "/items.archive", "-o", old, "-q"])
        #expect(again.status == 0)
        #expect(try readJSONObject(old + "/.thumbpipe/report.json").counts("incremental")["decoded"] == 0)
    }
}

/// What a run says about each item, and the knobs users reach for first.
@Suite("Saying what happened", .serialized)
struct SayingTests {
    @Test("--quality 50 is --quality 0.5, byte for byte")
    func qualityScales() throws {
        let folder = TestPaths.temporaryFolder("quality")
        let manifest = writeFile(
            folder, "m.jsonl",
            #"{"itemName": "P", "image": "\#(TestPaths.fixture("photos/Sigma-DP1-small.jpg"))", "itemKey": "p"}"# + "\n"
        )
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/a", "-q", "--quality", "50"]).status == 0)
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/b", "-q", "--quality", "0.5"]).status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/a/p"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/b/p")))
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/a/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/b/items.archive")))
    }

    @Test("--log names every item with its action; dates from file times are listed; reports are kept")
    func logDatesAndHistory() throws {
        let folder = TestPaths.temporaryFolder("log")
        // flickr's photo has no EXIF date: its date is the file's time, a guess to be listed.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("edge/orientation-1_Landscape_1.jpg"), toPath: folder + "/a.jpg")
        let lines = [
            #"{"itemName": "Landscape", "image": "a.jpg", "itemKey": "a"}"#,
            #"{"itemName": "Missing", "image": "gone.jpg", "itemKey": "b"}"#,
            #"{"itemName": "Card", "itemKey": "c"}"#,
        ]
        let manifest = writeFile(folder, "m.jsonl", lines.joined(separator: "\n") + "\n")
        let first = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--log", folder + "/log.jsonl"])
        #expect(first.status == 1)
        let entries = try String(contentsOfFile: folder + "/log.jsonl", encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(entries.map { $0["itemKey"] as? String } == ["a", "b", "c"])
        #expect(entries.map { $0["action"] as? String } == ["new", "failed", "new"])
        #expect(entries[1]["itemName"] as? String == "Missing" && entries[1]["source"] as? String == "gone.jpg")
        #expect((entries[1]["reason"] as? String)?.contains("file not found") == true)
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        #expect(report["datesFromFileTimeCount"] as? Int == 1, "\(first.stderr)")
        #expect(try report.objects("datesFromFileTime").first?["itemKey"] as? String == "a")
        #expect(first.stderr.contains("1 item is dated by the file's time"))
        let source = try #require(try report.objects("datesFromFileTime").first?["source"] as? String)
        #expect(first.stderr.contains("thumbpipe: dated by the file's time: \(source)"), "named: \(first.stderr)")
        #expect(report["startTime"] as? String != nil && report["thumbpipeVersion"] as? String != nil)
        // A second run: its log says unchanged, and both reports are kept.
        let second = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--log", folder + "/log2.jsonl"])
        #expect(second.status == 1)
        let again = try String(contentsOfFile: folder + "/log2.jsonl", encoding: .utf8)
        #expect(again.contains(#""action":"unchanged""#))
        #expect(listing(folder + "/out/.thumbpipe/reports").count == 2)
        // The dry run names items by name and source.
        writeFile(
            folder, "m.jsonl",
            (lines + [#"{"itemName": "New one", "image": "a.jpg", "itemKey": "d"}"#]).joined(separator: "\n") + "\n")
        let plan = try runThumbpipe(["run", manifest, "-o", folder + "/out", "--dry-run"])
        #expect(plan.stdout.contains("new\tNew one\ta.jpg\td"), "\(plan.stdout)")
    }

    @Test("The contact sheet tells a failed item (red outline, reason) from one without a photo")
    func contactSheetFailures() throws {
        let folder = TestPaths.temporaryFolder("sheet")
        let manifest = writeFile(
            folder, "m.jsonl",
            [
                #"{"itemName": "Missing", "image": "gone.jpg", "itemKey": "b"}"#,
                #"{"itemName": "Card", "itemKey": "c"}"#,
            ]
            .joined(separator: "\n") + "\n")
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"]).status == 1)
        let result = try runThumbpipe([
            "contact-sheet", folder + "/out/items.archive", "-o", folder + "/sheet.png", "--columns", "2",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let sheet = try DecodedTestImage.load(folder + "/sheet.png")
        // The failed item's box has a red frame; the item without a photo has none.
        let layout = ContactSheet(columns: 2).layout
        let failed = layout.thumbnailOrigin(of: 0)
        let plain = layout.thumbnailOrigin(of: 1)
        let failedCorner = sheet[failed.x + 1, failed.y + 1]
        let plainCorner = sheet[plain.x + 1, plain.y + 1]
        #expect(failedCorner[0] > 200 && failedCorner[1] < 60, "\(failedCorner)")
        #expect(plainCorner[0] < 120, "\(plainCorner)")
    }

    @Test(
        "Contact-sheet names are drawn with a font that has their characters (CJK, emoji); a character no font has is named in a warning with the font to install"
    )
    func contactSheetFonts() throws {
        let folder = TestPaths.temporaryFolder("sheet-fonts")
        let manifest = writeFile(
            folder, "m.jsonl",
            [
                #"{"itemName": "写真の時計", "itemKey": "a"}"#, #"{"itemName": "Clock 😀", "itemKey": "b"}"#,
                #"{"itemName": "Odd \#u{10FFFD}", "itemKey": "c"}"#,
            ]
            .joined(separator: "\n") + "\n")
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"]).status == 0)
        let result = try runThumbpipe(["contact-sheet", folder + "/out/items.archive", "-o", folder + "/sheet.png"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stderr.contains("1 item name has characters no installed font has (U+10FFFD"), "\(result.stderr)")
        #expect(result.stderr.contains("fonts-noto-cjk"), "\(result.stderr)")
        for covered in ["U+5199", "U+306E", "U+1F600"] {
            #expect(!result.stderr.contains(covered), "a font has \(covered): \(result.stderr)")
        }
    }
}
