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
    // Lists that grow with the item count live on disk (SpillList), so memory
    // stays flat however large the archive.
    /// The byte offset of every plist object, by object reference.
    private let offsets: SpillList
    private var objectCount = 0
    /// The plist references of the fixed `$objects` entries: `$null`, the root, the class descriptions.
    private var fixedArchiveRefs: [Int] = []
    /// The plist reference of each item's `$objects` entries, in archive order.
    private let itemArchiveRefs: SpillList
    /// The plist references of the per-item UID objects that the root array lists.
    private let rootElementRefs: SpillList
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
        let folder = url.deletingLastPathComponent().path
        file = try TemporaryFile(in: folder)
        offsets = try SpillList(in: folder)
        itemArchiveRefs = try SpillList(in: folder)
        rootElementRefs = try SpillList(in: folder)
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
        objectCount += 1
        return objectCount - 1
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

    /// An array whose references are `fixed`, then everything in `spilled`.
    private func array(fixed: [Int], spilled: SpillList) throws -> Int {
        let ref = begin()
        BinaryPlistEncoding.appendMarker(0xA, count: fixed.count + spilled.count, to: &buffer)
        for element in fixed { BinaryPlistEncoding.appendBigEndian(UInt64(element), width: refWidth, to: &buffer) }
        try spilled.forEach { element in
            BinaryPlistEncoding.appendBigEndian(element, width: refWidth, to: &buffer)
            if buffer.count >= 1 << 20 { try flush() }
        }
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
        fixedArchiveRefs.append(string(KeyedArchiveKeys.null))
        fixedArchiveRefs.append(-1)  // the root array, written last
        fixedArchiveRefs.append(classDescription([className, "NSObject"]))
        fixedArchiveRefs.append(classDescription(["NSDate", "NSObject"]))
        fixedArchiveRefs.append(classDescription(["NSMutableArray", "NSArray", "NSObject"]))
        itemClassUID = uid(Self.itemClassIndex)
        dateClassUID = uid(Self.dateClassIndex)
    }

    /// Appends the next item, in manifest order.
    /// - Throws: ``ThumbpipeError`` (74) when the write fails.
    public func append(_ item: ArchivedItem) throws {
        precondition(written < itemCount, "more items appended than the archive was opened for")
        let base = UInt64(fixedArchiveRefs.count + itemArchiveRefs.count)
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
        for ref in [itemRef, nameRef, serialRef, dateRef, keyRef] { itemArchiveRefs.append(UInt64(ref)) }
        if let thumbnailRef { itemArchiveRefs.append(UInt64(thumbnailRef)) }
        rootElementRefs.append(UInt64(uid(base)))
        written += 1
        if buffer.count >= 1 << 20 { try flush() }
        try offsets.spillIfNeeded()
        try itemArchiveRefs.spillIfNeeded()
        try rootElementRefs.spillIfNeeded()
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
        let elements = try array(fixed: [], spilled: rootElementRefs)
        let arrayClassUID = uid(Self.arrayClassIndex)
        fixedArchiveRefs[1] = dictionary([
            (key(KeyedArchiveKeys.classRef), arrayClassUID), (key(KeyedArchiveKeys.arrayObjects), elements),
        ])
        let objects = try array(fixed: fixedArchiveRefs, spilled: itemArchiveRefs)
        let top = dictionary([(key(KeyedArchiveKeys.root), uid(1))])
        let topLevel = dictionary([
            (key(KeyedArchiveKeys.archiver), string(KeyedArchiveKeys.archiverName)),
            (key(KeyedArchiveKeys.objects), objects),
            (key(KeyedArchiveKeys.top), top),
            (key(KeyedArchiveKeys.version), integer(KeyedArchiveKeys.versionNumber)),
        ])
        let tableOffset = position
        let offsetWidth = BinaryPlistEncoding.byteWidth(for: tableOffset)
        try offsets.forEach { offset in
            BinaryPlistEncoding.appendBigEndian(offset, width: offsetWidth, to: &buffer)
            if buffer.count >= 1 << 20 { try flush() }
        }
        buffer.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetWidth), UInt8(refWidth)])
        BinaryPlistEncoding.appendBigEndian(UInt64(objectCount), width: 8, to: &buffer)
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
