import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The book's BNRItem, as an app unarchiving items.archive would declare it.
final class BNRItem: NSObject, NSCoding {
    var itemName: String?
    var serialNumber: String?
    var valueInDollars: Int32 = 0
    var dateCreated: Date?
    var itemKey: String?
    var thumbnailData: Data?

    init?(coder: NSCoder) {
        itemName = coder.decodeObject(forKey: "itemName") as? String
        serialNumber = coder.decodeObject(forKey: "serialNumber") as? String
        dateCreated = coder.decodeObject(forKey: "dateCreated") as? Date
        itemKey = coder.decodeObject(forKey: "itemKey") as? String
        // The key is absent for items without a thumbnail; swift-corelibs-foundation
        // traps on decoding an absent key where Apple's returns nil, so ask first.
        if coder.containsValue(forKey: "thumbnailData") {
            thumbnailData = coder.decodeObject(forKey: "thumbnailData") as? Data
        }
        valueInDollars = coder.decodeInt32(forKey: "valueInDollars")
    }

    func encode(with coder: NSCoder) {}
}

func unarchiveWithFoundation(_ data: Data) throws -> [BNRItem] {
    let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
    unarchiver.requiresSecureCoding = false
    unarchiver.setClass(BNRItem.self, forClassName: "BNRItem")
    let root = unarchiver.decodeObject(forKey: NSKeyedArchiveRootObjectKey)
    let array = try #require(root as? NSArray)
    return array.compactMap { $0 as? BNRItem }
}

func sampleItems(_ count: Int) -> [ArchivedItem] {
    var items: [ArchivedItem] = []
    for i in 0..<count {
        let name: String = i % 3 == 0 ? "Café ☕︎ \(i)" : "Item \(i)"
        let serial: String = i % 4 == 0 ? "" : "SN-\(i)"
        let value: Int32 = i % 5 == 0 ? -Int32(i) : Int32(i * 1000)
        let date = Date(timeIntervalSinceReferenceDate: Double(i) * 86400.5)
        let bytes: [UInt8] = (0..<(i % 50 + 1)).map { UInt8($0 & 0xFF) }
        let thumbnail: Data? = i % 7 == 3 ? nil : Data(bytes)
        items.append(
            ArchivedItem(
                itemName: name, serialNumber: serial, valueInDollars: value, dateCreated: date, itemKey: "key-\(i)",
                thumbnailData: thumbnail))
    }
    return items
}

func writeArchive(_ items: [ArchivedItem], className: String = "BNRItem") throws -> String {
    let path = TestPaths.temporaryFolder("archive") + "/items.archive"
    let writer = try KeyedArchiveWriter(path: path, className: className, itemCount: items.count)
    for item in items { try writer.append(item) }
    try writer.finish()
    return path
}

@Suite("items.archive")
struct ArchiveTests {
    @Test(arguments: [0, 1, 20, 70_000])
    func roundTripsThroughOurReader(count: Int) throws {
        let items = sampleItems(count)
        let reader = try KeyedArchiveReader(path: try writeArchive(items))
        #expect(reader.className == "BNRItem")
        #expect(try reader.items() == items)
    }

    @Test func unarchivesWithFoundation() throws {
        let items = sampleItems(30)
        let data = try Data(contentsOf: URL(fileURLWithPath: try writeArchive(items)))
        let decoded = try unarchiveWithFoundation(data)
        #expect(decoded.count == items.count)
        for (item, object) in zip(items, decoded) {
            #expect(object.itemName == item.itemName)
            #expect(object.serialNumber == item.serialNumber)
            #expect(object.valueInDollars == item.valueInDollars)
            #expect(object.dateCreated == item.dateCreated)
            #expect(object.itemKey == item.itemKey)
            #expect(object.thumbnailData == item.thumbnailData)
        }
    }

    @Test func parsesWithPythonPlistlib() throws {
        let items = sampleItems(12)
        let path = try writeArchive(items)
        let script = """
            import plistlib, sys, json
            d = plistlib.load(open(sys.argv[1], 'rb'))
            assert d['$archiver'] == 'NSKeyedArchiver' and d['$version'] == 100000
            objs = d['$objects']
            root = objs[d['$top']['root'].data]
            assert objs[root['$class'].data]['$classname'] == 'NSMutableArray'
            out = []
            for uid in root['NS.objects']:
                it = objs[uid.data]
                cls = objs[it['$class'].data]
                assert cls['$classes'] == ['BNRItem', 'NSObject'], cls
                g = lambda k: objs[it[k].data]
                thumb = g('thumbnailData') if 'thumbnailData' in it else None
                out.append([g('itemName'), g('serialNumber'), it['valueInDollars'], g('dateCreated')['NS.time'],
                            g('itemKey'), None if thumb is None else list(thumb)])
            print(json.dumps(out))
            """
        let scriptPath = writeFile(TestPaths.temporaryFolder("py"), "read.py", script)
        let python = try runProcess("/usr/bin/env", ["python3", scriptPath, path])
        #expect(python.status == 0, "\(python.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(python.stdout.utf8)) as? [[Any]])
        #expect(rows.count == items.count)
        for (item, row) in zip(items, rows) {
            #expect(row[0] as? String == item.itemName)
            #expect(row[1] as? String == item.serialNumber)
            #expect((row[2] as? NSNumber)?.int32Value == item.valueInDollars)
            #expect((row[3] as? NSNumber)?.doubleValue == item.dateCreated.timeIntervalSinceReferenceDate)
            #expect(row[4] as? String == item.itemKey)
            let thumb = (row[5] as? [NSNumber])?.map { UInt8($0.intValue) }
            #expect(thumb.map { Data($0) } == item.thumbnailData)
        }
    }

    @Test func sameItemsSameBytes() throws {
        let items = sampleItems(50)
        let a = try Data(contentsOf: URL(fileURLWithPath: try writeArchive(items)))
        let b = try Data(contentsOf: URL(fileURLWithPath: try writeArchive(items)))
        #expect(a == b)
    }

    @Test("10,000 truncated and bit-flipped archives: an error or a valid result, never a crash or a hang")
    func fuzzedArchives() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: try writeArchive(sampleItems(12))))
        var generator = SystemRandomNumberGenerator()
        var rejected = 0
        let started = Date()
        for round in 0..<10_000 {
            var bytes = [UInt8](data)
            switch round % 3 {
            case 0:
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator)))
            case 1:
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    let i = Int.random(in: 0..<bytes.count, using: &generator)
                    bytes[i] ^= UInt8(1 << Int.random(in: 0..<8, using: &generator))
                }
            default:
                // Aim at the trailer and offset table, where widths and counts live.
                let i = bytes.count - Int.random(in: 1...min(bytes.count, 160), using: &generator)
                bytes[i] = UInt8.random(in: 0...255, using: &generator)
            }
            do {
                let reader = try KeyedArchiveReader(data: Data(bytes))
                _ = try reader.items()
            } catch is ArchiveFormatError {
                rejected += 1
            }
        }
        #expect(rejected > 5000)
        #expect(Date().timeIntervalSince(started) < 60, "no input may take long")
    }

    @Test func aFileThatIsNotAnArchiveIsADataError() throws {
        let path = writeFile(TestPaths.temporaryFolder("bad"), "items.archive", "hello")
        do {
            _ = try KeyedArchiveReader(path: path)
            Issue.record("expected an error")
        } catch let error as ThumbpipeError {
            #expect(error.kind == .dataError)
            #expect(error.message.contains("not a valid items archive"))
        }
    }
}

@Suite("Runs", .vipsStarted)
struct RunTests {
    static let sources = [
        "photos/Canon-EOS-1000D.jpg", "edge/png-palette-trns_paletted-transparent.png", "edge/webp-alpha_5_webp_a.webp",
        "edge/tiny-1x1-rgb_1x1.png", "edge/gif-animated_animated-loop-3.gif", "bad/truncated-png_truncated.png",
        "edge/orientation-3_Landscape_3.jpg", "edge/grey-jpeg_cd1.1.jpg",
    ]

    func items() -> [ManifestItem] {
        var items = Self.sources.enumerated().map { fixtureItem($1, index: $0) }
        items.insert(ManifestItem(line: 99, itemName: "No photo", itemKey: "no-photo"), at: 3)
        items.append(
            ManifestItem(
                line: 100, itemName: "Missing", itemKey: "missing", image: "nope.jpg",
                imagePath: "/nonexistent/nope.jpg"))
        return items
    }

    @Test("The archive is byte-identical whatever --jobs is")
    func deterministicAcrossJobs() throws {
        let archives = try [1, 2, 8].map { jobs in
            let (output, _) = try runManifest(items(), jobs: jobs)
            return try Data(contentsOf: URL(fileURLWithPath: output + "/items.archive"))
        }
        #expect(archives[0] == archives[1])
        #expect(archives[0] == archives[2])
    }

    @Test("Every item is archived; failed ones without thumbnail or store file")
    func archiveMatchesManifest() throws {
        let items = items()
        let (output, result) = try runManifest(items)
        #expect(result.counts.items == items.count)
        #expect(result.failures.map(\.itemKey).sorted() == ["item-5", "missing"])
        #expect(result.counts.withoutImage == 1)
        let decoded = try unarchiveWithFoundation(try Data(contentsOf: URL(fileURLWithPath: output + "/items.archive")))
        #expect(decoded.map(\.itemKey) == items.map(\.itemKey))
        for (item, object) in zip(items, decoded) {
            #expect(object.itemName == item.itemName)
            #expect(object.serialNumber == item.serialNumber)
            #expect(object.valueInDollars == item.valueInDollars)
            #expect(object.dateCreated != nil)
            let failed = item.imagePath == nil || result.failures.contains { $0.itemKey == item.itemKey }
            #expect((object.thumbnailData == nil) == failed, "\(item.itemKey)")
            #expect(FileManager.default.fileExists(atPath: output + "/" + item.itemKey) == !failed)
            if let png = object.thumbnailData {
                let image = try DecodedTestImage.load(png: png)
                #expect(image.width == 80 && image.height == 80 && image.bands == 4)
            }
        }
        // The 1000D photo's EXIF DateTimeOriginal, with its SubSecTimeOriginal (02), becomes its date.
        #expect(decoded[0].dateCreated == ISO8601.parse("2008-07-01T17:27:03.02Z"))
        // No photo: the manifest's date.
        #expect(decoded[3].dateCreated == Date(timeIntervalSince1970: 1_000_000_000))
    }
}
