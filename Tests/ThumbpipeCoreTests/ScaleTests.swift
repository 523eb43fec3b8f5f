import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The parts that keep a million-item run small and fast: the packed item
/// list, the manifest's fast path, the key index, and the archive that copies
/// unchanged items from the previous one.
@Suite("Collection scale")
struct ScaleTests {
    /// Lines the fast path reads itself, and lines it must leave to the full parser.
    static let lines: [String] = [
        #"{"itemName":"a"}"#,
        #"  { "itemName" : "Café ☕︎" , "serialNumber": "SN 1", "valueInDollars": 12 }  "#,
        #"{"itemName":"n","valueInDollars":-0,"dateCreated":"2024-02-29","itemKey":"k.1-_2","image":"p/q r.jpg"}"#,
        #"{"itemName":"n","valueInDollars":1.5e3}"#,
        #"{"itemName":"n","valueInDollars":0.0,"extra":true,"other":false,"gone":null}"#,
        "{\"itemName\":\"cr\"}\r",
        #"{}"#,
        #"{"itemName":"escaped \"quote\""}"#,
        #"{"itemName":"\u00e9"}"#,
        #"{"itemName":"n","nested":{"a":1}}"#,
        // A name twice: the full parser refuses it.
        #"{"itemName":"first","itemName":"second","image":"a.jpg","image":null}"#,
        #"{"itemName":"n","x":1,"x":2}"#,
        #"{"itemName":"n","list":[1,2]}"#,
        #"{"itemName":"n",}"#,
        #"{"itemName":"n"} x"#,
        #"{"itemName":01}"#,
        #"{"itemName":1.}"#,
        #"{"itemName":tru}"#,
        #"["itemName"]"#,
        "{\"itemName\":\"tab\there\"}",
    ]

    @Test("The fast path reads a line exactly as the full parser does, or leaves it to it")
    func fastPathAgreesWithTheParser() throws {
        var fast = 0
        for line in Self.lines {
            let bytes = Array(line.utf8)
            guard let scanned = bytes.withUnsafeBytes({ FlatJSONLine.scan($0) }) else { continue }
            fast += 1
            guard case .object(let members, _) = try JSONParser.parse(bytes) else {
                Issue.record("fast path took a non-object: \(line)")
                continue
            }
            var parsed = ManifestFields()
            for member in members { parsed.set(member.key, member.value) }
            for name in ManifestFields.Name.allCases {
                #expect(scanned[name] == parsed[name], "\(line): \(name.text)")
            }
            #expect(Set(scanned.unknown) == Set(parsed.unknown), "\(line)")
        }
        #expect(fast == 7, "the flat lines take the fast path")
    }

    @Test("Lines split across reads at any byte give the same lines")
    func lineReaderSplits() throws {
        let text = Array("one\n\ntwo\r\nthree-without-newline".utf8)
        func lines(splitAt cut: Int) throws -> [String] {
            var reader = LineReader(fileName: "m.jsonl")
            var out: [String] = []
            let collect = { (line: UnsafeRawBufferPointer, number: Int) in
                out.append("\(number):\(String(decoding: line, as: UTF8.self))")
            }
            try text.withUnsafeBytes { raw in
                try reader.feed(UnsafeRawBufferPointer(rebasing: raw[0..<cut]), collect)
                try reader.feed(UnsafeRawBufferPointer(rebasing: raw[cut...]), collect)
            }
            try reader.finish(collect)
            return out
        }
        let whole = try lines(splitAt: 0)
        #expect(whole == ["1:one", "2:", "3:two\r", "4:three-without-newline"])
        for cut in 0...text.count { #expect(try lines(splitAt: cut) == whole, "cut at \(cut)") }
    }

    @Test("A line longer than 1 MiB ends reading with its line number, whole or arriving in pieces")
    func lineReaderCap() throws {
        let long = [UInt8](repeating: 0x61, count: LineReader.maxLineBytes + 1)
        for pieces in [1, 3, 1000] {
            var reader = LineReader(fileName: "m.jsonl")
            var seen = 0
            let step = (long.count + pieces - 1) / pieces
            let error = #expect(throws: ThumbpipeError.self) {
                try Array("ok\n".utf8).withUnsafeBytes { try reader.feed($0) { _, _ in seen += 1 } }
                try long.withUnsafeBytes { raw in
                    for start in stride(from: 0, to: raw.count, by: step) {
                        try reader.feed(UnsafeRawBufferPointer(rebasing: raw[start..<min(raw.count, start + step)])) {
                            _, _ in seen += 1
                        }
                    }
                }
                try reader.finish { _, _ in seen += 1 }
            }
            #expect(error?.exitStatus == 65)
            #expect(error?.message.hasPrefix("m.jsonl:2: line longer than 1 MiB") == true, "\(error?.message ?? "")")
            #expect(seen == 1)
        }
    }

    @Test("A key used twice is reported at its first repeat, before any later error")
    func duplicateKeysInOrder() throws {
        func error(_ lines: [String]) -> String? {
            do {
                _ = try Manifest.parse(
                    Array(lines.joined(separator: "\n").utf8), fileName: "m.jsonl", folder: "/", type: "jsonl")
                return nil
            } catch {
                return "\(error)"
            }
        }
        let item = { (key: String) in #"{"itemName":"x","itemKey":"\#(key)"}"# }
        #expect(error([item("a"), item("b"), item("c")]) == nil)
        let repeated = try #require(error([item("a"), item("b"), item("c"), item("b"), item("a")]))
        #expect(
            repeated.contains("m.jsonl:4:") && repeated.contains("'b' is used twice, on lines 2 and 4"), "\(repeated)")
        let beforeBad = try #require(error([item("a"), item("a"), #"{"itemName":1}"#]))
        #expect(beforeBad.contains("m.jsonl:2:") && beforeBad.contains("used twice"), "\(beforeBad)")
        let afterBad = try #require(error([item("a"), #"{"itemName":1}"#, item("a")]))
        #expect(afterBad.contains("m.jsonl:2:") && afterBad.contains("itemName must be a string"), "\(afterBad)")
    }

    @Test("Packed items read back as they were given")
    func itemListRoundTrip() throws {
        let long = String(repeating: "é", count: 300)
        var items = [
            ManifestItem(line: 1, itemName: "a", itemKey: "k1"),
            ManifestItem(
                line: 3, itemName: long, serialNumber: "S", valueInDollars: Int32.min,
                dateCreated: Date(timeIntervalSinceReferenceDate: -1.25), itemKey: "k2", image: "p.jpg",
                imagePath: "/m/p.jpg"),
            ManifestItem(
                line: 4, itemName: "b", valueInDollars: Int32.max, itemKey: "k3", image: "/abs.png",
                imagePath: "/abs.png"),
            ManifestItem(line: 9, itemName: "c", itemKey: "k4", image: "x.jpg", imagePath: "/elsewhere/x.jpg"),
            ManifestItem(line: 10, itemName: "d", itemKey: "k5", image: nil, imagePath: nil),
        ]
        items[4].carried = .thumbnail(Data([1, 2, 3]))
        var builder = ItemList.Builder(folder: "/m")
        for item in items { builder.append(item) }
        let list = ItemList(builder: builder)
        #expect(Array(list) == items)
        #expect(ItemList(items) == list)
        #expect(list.withImageCount == 3)
        #expect(list.indices.map { list.hasImage(at: $0) } == [false, true, true, true, false])
        #expect(list.indices.map { list.itemKey(at: $0) } == ["k1", "k2", "k3", "k4", "k5"])
        #expect(Array(list.selecting([3, 1])) == [items[3], items[1]])
        let index = KeyIndex(list)
        for (position, item) in items.enumerated() { #expect(index.position(of: item.itemKey) == position) }
        #expect(index.position(of: "k6") == nil)
    }

    /// Writes `items` to `folder/items.archive` keeping an index; returns how many were copied.
    func write(_ items: [ArchivedItem], in folder: String, index: Bool = true) throws -> Int {
        let writer = try KeyedArchiveWriter(
            path: folder + "/items.archive", className: "BNRItem", itemCount: items.count,
            indexPath: index ? folder + "/archive.index" : nil)
        for item in items { try writer.append(item) }
        try writer.finish()
        return writer.copiedItems
    }

    @Test("An archive rebuilt from the previous one copies unchanged items and equals a fresh one")
    func archiveCopiesUnchangedItems() throws {
        let folder = TestPaths.temporaryFolder("copy")
        let fresh = TestPaths.temporaryFolder("fresh")
        var items = sampleItems(3000)
        #expect(try write(items, in: folder) == 0, "nothing to copy from")
        // One item's thumbnail changes: every other item is copied.
        items[1500].thumbnailData = Data([9, 9, 9])
        #expect(try write(items, in: folder) == 2999)
        _ = try write(items, in: fresh, index: false)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: fresh + "/items.archive")))
        // An item gains a thumbnail: the objects after it are numbered anew, so
        // only the items before it are copied; the bytes still equal a fresh archive.
        let gaining = try #require(items.indices.first { items[$0].thumbnailData == nil && $0 > 100 })
        items[gaining].thumbnailData = Data([1])
        #expect(try write(items, in: folder) == gaining)
        _ = try write(items, in: fresh, index: false)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: fresh + "/items.archive")))
        #expect(try KeyedArchiveReader(path: folder + "/items.archive").items() == items)
    }

    @Test("An index that does not describe the archive on disk is not used")
    func staleIndexIsIgnored() throws {
        let folder = TestPaths.temporaryFolder("stale")
        let items = sampleItems(200)
        _ = try write(items, in: folder)
        // Someone touches the archive: its time no longer matches the index.
        let archive = folder + "/items.archive"
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, archive, &times, 0) == 0)
        #expect(try write(items, in: folder) == 0)
        // A cut index (whole entries or not) is not whole: nothing is copied from it.
        _ = try write(items, in: folder)
        let indexPath = folder + "/archive.index"
        let whole = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        try whole.prefix(ArchiveIndex.headerSize + 10 * ArchiveIndex.entrySize).write(
            to: URL(fileURLWithPath: indexPath))
        #expect(try write(items, in: folder) == 0)
        #expect(try KeyedArchiveReader(path: archive).items() == items)
        let again = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        try again.prefix(ArchiveIndex.headerSize + 10 * ArchiveIndex.entrySize + 7).write(
            to: URL(fileURLWithPath: indexPath))
        #expect(try write(items, in: folder) == 0)
        #expect(try KeyedArchiveReader(path: archive).items() == items)
        // An entry edited without its checksum: the index is not used at all.
        _ = try write(items, in: folder)
        var edited = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        edited[ArchiveIndex.headerSize + 50 * ArchiveIndex.entrySize + 8] ^= 0x01
        try edited.write(to: URL(fileURLWithPath: indexPath))
        #expect(try write(items, in: folder) == 0)
        #expect(try KeyedArchiveReader(path: archive).items() == items)
        // One that claims more items than the archive can hold, checksum and all: not used.
        _ = try write(items, in: folder)
        var claiming = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        claiming.replaceSubrange(
            ArchiveIndex.Header.itemCountBytes, with: withUnsafeBytes(of: UInt64(1 << 40).littleEndian) { Data($0) })
        try claiming.write(to: URL(fileURLWithPath: indexPath))
        #expect(try write(items, in: folder) == 0)
    }

    /// Rewrites the index's checksum after an edit, as a crafted index would.
    func resealIndex(_ data: inout Data) {
        let checksum = data.dropFirst(ArchiveIndex.headerSize).withUnsafeBytes { ContentHash.xxh64($0) }
        data.replaceSubrange(
            ArchiveIndex.Header.checksumBytes, with: withUnsafeBytes(of: checksum.littleEndian) { Data($0) })
    }

    @Test("Object sizes shifted in a resealed index (its item hashes intact) copy nothing wrong")
    func shiftedSizesAreNotTrusted() throws {
        let folder = TestPaths.temporaryFolder("shifted")
        let fresh = TestPaths.temporaryFolder("shifted-fresh")
        let items = sampleItems(100)
        _ = try write(items, in: folder)
        _ = try write(items, in: fresh, index: false)
        let indexPath = folder + "/archive.index"
        var index = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        // Item 40: one byte moves from its name to its serial number; the total stays.
        let entry = ArchiveIndex.headerSize + 40 * ArchiveIndex.entrySize
        index[entry + 16] &+= 1
        index[entry + 20] &-= 1
        resealIndex(&index)
        try index.write(to: URL(fileURLWithPath: indexPath))
        // Every other item is copied; item 40 is encoded afresh, and the archive equals a fresh one.
        #expect(try write(items, in: folder) == 99)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: fresh + "/items.archive")))
        #expect(try KeyedArchiveReader(path: folder + "/items.archive").items() == items)
    }

    @Test("An archive edited in place, its size and time kept, is not carried into the next one")
    func editedArchiveIsNotCopied() throws {
        let folder = TestPaths.temporaryFolder("edited")
        let fresh = TestPaths.temporaryFolder("edited-fresh")
        let items = sampleItems(100)
        _ = try write(items, in: folder)
        _ = try write(items, in: fresh, index: false)
        let archive = folder + "/items.archive"
        var info = stat()
        #expect(stat(archive, &info) == 0)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
        // One serial number's letter changes (S → 4), in place.
        let serial = Array(items[61].serialNumber.utf8)
        let at = try #require(bytes.firstRange(of: Data(serial))).lowerBound
        bytes[at] = UInt8(ascii: "4")
        try bytes.write(to: URL(fileURLWithPath: archive))
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, archive, &times, 0) == 0)
        #expect(try write(items, in: folder) == 99)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: archive))
                == Data(contentsOf: URL(fileURLWithPath: fresh + "/items.archive")))
    }
}
