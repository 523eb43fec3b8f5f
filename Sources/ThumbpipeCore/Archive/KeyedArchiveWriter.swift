import Foundation

/// Writes `items.archive` as NSKeyedArchiver lays it out (a `bplist00` with
/// `$archiver`, `$version`, `$top` and `$objects`), streaming: items are
/// written as they are appended and thumbnails are never all held at once.
///
/// The file is written under a temporary name and renamed into place by
/// ``finish()``; ``abandon()`` removes it. The same items in the same order
/// always give the same bytes.
///
/// `$objects` layout: 0 `$null`, 1 the root `NSMutableArray`, 2–4 the class
/// descriptions (item class, `NSDate`, `NSMutableArray`), then per item its
/// dictionary, name, serial number, date, key and thumbnail data.
public final class KeyedArchiveWriter {
    private let file: TemporaryFile
    private let finalPath: String
    private let itemCount: Int
    private let refWidth: Int
    private var buffer: [UInt8] = []
    private var flushedBytes: UInt64 = 0
    /// The byte offset of every plist object, by object reference.
    private var offsets: [UInt64] = []
    /// The plist object reference of each `$objects` entry, by archive index.
    private var archiveRefs: [Int] = []
    /// The plist references of the per-item UID objects that the root array lists.
    private var rootElementRefs: [Int] = []
    private var keys: [String: Int] = [:]
    private var itemClassUID = 0
    private var dateClassUID = 0
    private var written = 0
    private var finished = false

    private static let itemClassIndex: UInt64 = 2
    private static let dateClassIndex: UInt64 = 3
    private static let arrayClassIndex: UInt64 = 4
    private static let firstItemIndex = 5
    /// The most plist objects one item takes: 3 strings, a date (real + dictionary),
    /// data, 5 UIDs, an integer, its dictionary and the root array's UID to it.
    private static let maxObjectsPerItem = 14
    private static let fixedObjects = 64

    /// Opens a temporary file next to `path` for an archive of exactly `itemCount` items.
    /// - Parameters:
    ///   - path: where the finished archive goes.
    ///   - className: the class the items are archived as (`BNRItem`).
    ///   - itemCount: how many items will be appended.
    /// - Throws: ``ThumbpipeError`` (73) when the file cannot be created.
    public init(path: String, className: String, itemCount: Int) throws {
        let url = URL(fileURLWithPath: path)
        file = try TemporaryFile(in: url.deletingLastPathComponent().path, for: url.lastPathComponent)
        finalPath = path
        self.itemCount = itemCount
        // References are as wide as the largest possible object count needs;
        // this depends on the item count alone, so output stays deterministic.
        refWidth = BinaryPlistEncoding.byteWidth(
            for: UInt64(Self.fixedObjects + Self.maxObjectsPerItem * itemCount))
        buffer.reserveCapacity(1 << 20)
        buffer.append(contentsOf: BinaryPlistEncoding.header)
        writePrologue(className: className)
    }

    deinit {
        if !finished { file.discard() }
    }

    private var position: UInt64 { flushedBytes + UInt64(buffer.count) }

    /// Starts a new plist object and returns its reference.
    private func begin() -> Int {
        offsets.append(position)
        return offsets.count - 1
    }

    private func string(_ value: String) -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendString(value, to: &buffer)
        return ref
    }

    private func key(_ name: String) -> Int {
        if let ref = keys[name] { return ref }
        let ref = string(name)
        keys[name] = ref
        return ref
    }

    private func uid(_ index: UInt64) -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendUID(index, to: &buffer)
        return ref
    }

    private func integer(_ value: Int64) -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendInteger(value, to: &buffer)
        return ref
    }

    private func array(_ refs: [Int]) -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendArray(refs, refWidth: refWidth, to: &buffer)
        return ref
    }

    private func dictionary(_ pairs: [(key: Int, value: Int)]) -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendDictionary(pairs, refWidth: refWidth, to: &buffer)
        return ref
    }

    private func classDescription(_ names: [String]) -> Int {
        let classes = array(names.map { string($0) })
        return dictionary([
            (key(KeyedArchiveKeys.className), string(names[0])), (key(KeyedArchiveKeys.classes), classes),
        ])
    }

    private func writePrologue(className: String) {
        for name in [
            KeyedArchiveKeys.classRef, KeyedArchiveKeys.itemName, KeyedArchiveKeys.serialNumber,
            KeyedArchiveKeys.valueInDollars, KeyedArchiveKeys.dateCreated, KeyedArchiveKeys.itemKey,
            KeyedArchiveKeys.thumbnailData, KeyedArchiveKeys.time,
        ] {
            _ = key(name)
        }
        archiveRefs.append(string(KeyedArchiveKeys.null))
        archiveRefs.append(-1)  // the root array, written last
        archiveRefs.append(classDescription([className, "NSObject"]))
        archiveRefs.append(classDescription(["NSDate", "NSObject"]))
        archiveRefs.append(classDescription(["NSMutableArray", "NSArray", "NSObject"]))
        itemClassUID = uid(Self.itemClassIndex)
        dateClassUID = uid(Self.dateClassIndex)
    }

    /// Appends the next item, in manifest order.
    /// - Throws: ``ThumbpipeError`` (74) when the write fails.
    public func append(_ item: ArchivedItem) throws {
        precondition(written < itemCount, "more items appended than the archive was opened for")
        let base = UInt64(archiveRefs.count)
        let nameRef = string(item.itemName)
        let serialRef = string(item.serialNumber)
        let timeRef = begin()
        BinaryPlistEncoding.appendReal(item.dateCreated.timeIntervalSinceReferenceDate, to: &buffer)
        let dateRef = dictionary([
            (key(KeyedArchiveKeys.classRef), dateClassUID), (key(KeyedArchiveKeys.time), timeRef),
        ])
        let keyRef = string(item.itemKey)
        var thumbnailRef: Int? = nil
        if let data = item.thumbnailData {
            thumbnailRef = begin()
            BinaryPlistEncoding.appendDataHeader(count: data.count, to: &buffer)
            buffer.append(contentsOf: data)
        }
        var pairs: [(key: Int, value: Int)] = [
            (key(KeyedArchiveKeys.classRef), itemClassUID),
            (key(KeyedArchiveKeys.itemName), uid(base + 1)),
            (key(KeyedArchiveKeys.serialNumber), uid(base + 2)),
            (key(KeyedArchiveKeys.dateCreated), uid(base + 3)),
            (key(KeyedArchiveKeys.itemKey), uid(base + 4)),
        ]
        if thumbnailRef != nil {
            pairs.append((key(KeyedArchiveKeys.thumbnailData), uid(base + 5)))
        }
        pairs.append((key(KeyedArchiveKeys.valueInDollars), integer(Int64(item.valueInDollars))))
        let itemRef = dictionary(pairs)
        archiveRefs.append(itemRef)
        archiveRefs.append(nameRef)
        archiveRefs.append(serialRef)
        archiveRefs.append(dateRef)
        archiveRefs.append(keyRef)
        if let thumbnailRef { archiveRefs.append(thumbnailRef) }
        rootElementRefs.append(uid(base))
        written += 1
        if buffer.count >= 1 << 20 { try flush() }
    }

    private func flush() throws {
        try buffer.withUnsafeBytes { try file.write($0) }
        flushedBytes += UInt64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes the root array, `$objects`, the top dictionary, the offset table
    /// and the trailer, then flushes and renames the archive into place.
    /// - Throws: ``ThumbpipeError`` (74) when a write fails; nothing is left at the final path.
    public func finish() throws {
        precondition(written == itemCount, "archive opened for \(itemCount) items, \(written) appended")
        let elements = array(rootElementRefs)
        let arrayClassUID = uid(Self.arrayClassIndex)
        archiveRefs[1] = dictionary([
            (key(KeyedArchiveKeys.classRef), arrayClassUID), (key(KeyedArchiveKeys.arrayObjects), elements),
        ])
        let objects = array(archiveRefs)
        let top = dictionary([(key(KeyedArchiveKeys.root), uid(1))])
        let topLevel = dictionary([
            (key(KeyedArchiveKeys.archiver), string(KeyedArchiveKeys.archiverName)),
            (key(KeyedArchiveKeys.objects), objects),
            (key(KeyedArchiveKeys.top), top),
            (key(KeyedArchiveKeys.version), integer(KeyedArchiveKeys.versionNumber)),
        ])
        let tableOffset = position
        let offsetWidth = BinaryPlistEncoding.byteWidth(for: tableOffset)
        for offset in offsets {
            BinaryPlistEncoding.appendBigEndian(offset, width: offsetWidth, to: &buffer)
            if buffer.count >= 1 << 20 { try flush() }
        }
        buffer.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetWidth), UInt8(refWidth)])
        BinaryPlistEncoding.appendBigEndian(UInt64(offsets.count), width: 8, to: &buffer)
        BinaryPlistEncoding.appendBigEndian(UInt64(topLevel), width: 8, to: &buffer)
        BinaryPlistEncoding.appendBigEndian(tableOffset, width: 8, to: &buffer)
        try flush()
        try file.commit(to: finalPath)
        finished = true
    }

    /// Removes the temporary file; nothing is left at the final path.
    public func abandon() {
        finished = true
        file.discard()
    }
}
