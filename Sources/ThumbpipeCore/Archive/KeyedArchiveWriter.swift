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
///
/// With an index path, the writer keeps an ``ArchiveIndex`` beside the
/// archive: per item a hash of its fields and thumbnail and where its objects
/// lie. The next writer reads it: an item equal to the previous archive's item
/// at the same position, whose objects would get the same numbers, is not
/// encoded again but copied byte for byte from the previous archive, when
/// those bytes still hash as the index recorded (else it is encoded afresh).
public final class KeyedArchiveWriter {
    private let file: TemporaryFile
    private let finalPath: String
    private let itemCount: Int
    private let refWidth: Int
    private let className: String
    private var buffer: [UInt8] = []
    private var flushedBytes: UInt64 = 0
    /// Per item, where its objects lie (one ``ArchiveIndex/Entry`` each), on disk.
    private let entries: ArchiveIndex.Writer
    private var objectCount = 0
    private var prologueObjectCount = 0
    /// The byte offsets of the objects before the first item (header, prologue).
    private var prologueOffsets: [UInt64] = []
    /// The plist references of the fixed `$objects` entries: `$null`, the root, the class descriptions.
    private var fixedArchiveRefs: [Int] = []
    /// How many `$objects` entries the items so far added.
    private var itemArchiveRefCount = 0
    private var keys: [String: Int] = [:]
    private var itemKeys = ItemKeys()
    private var itemClassUID = 0
    private var dateClassUID = 0
    private var written = 0
    private var finished = false
    /// The previous archive and its index, when items can be copied from it.
    private var previous: ArchiveIndex.Reader?
    /// XXH64 of every byte written so far: the finished archive's ``contentHash``.
    private var writtenHash = ContentHash.Streaming()
    /// Items copied rather than encoded, and their bytes.
    public private(set) var copiedItems = 0
    public private(set) var copiedBytes: UInt64 = 0

    private static let itemClassIndex: UInt64 = 2
    private static let dateClassIndex: UInt64 = 3
    private static let arrayClassIndex: UInt64 = 4
    /// The most plist objects one item takes: 3 strings, a date (real + dictionary),
    /// data, 5 UIDs, an integer, its dictionary and the root array's UID to it.
    private static let maxObjectsPerItem = 14
    private static let fixedObjects = 64

    /// Opens a temporary file next to `path` for an archive of exactly `itemCount` items.
    /// - Parameters:
    ///   - path: where the finished archive goes.
    ///   - className: the class the items are archived as (`BNRItem`).
    ///   - itemCount: how many items will be appended.
    ///   - indexPath: where to keep the archive's index (nil: keep none, copy nothing).
    /// - Throws: ``ThumbpipeError`` (73) when the file cannot be created.
    public init(path: String, className: String, itemCount: Int, indexPath: String? = nil) throws {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        file = try TemporaryFile(in: folder)
        finalPath = path
        self.itemCount = itemCount
        self.className = className
        // References are as wide as the largest possible object count needs;
        // this depends on the item count alone, so output stays deterministic.
        refWidth = BinaryPlistEncoding.byteWidth(
            for: UInt64(Self.fixedObjects + Self.maxObjectsPerItem * itemCount))
        do {
            entries = try ArchiveIndex.Writer(
                folder: indexPath.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path } ?? folder,
                finalPath: indexPath)
        } catch {
            file.discard()
            throw error
        }
        buffer.reserveCapacity(1 << 20)
        buffer.append(contentsOf: BinaryPlistEncoding.header)
        writePrologue(className: className)
        prologueObjectCount = objectCount
        let firstLayout = ArchiveIndex.Layout(firstObject: objectCount, firstArchiveRef: fixedArchiveRefs.count)
        entries.firstLayout = firstLayout
        if let indexPath {
            previous = ArchiveIndex.Reader(
                indexPath: indexPath, archivePath: path, className: className, refWidth: refWidth,
                firstLayout: firstLayout, firstStart: position)
        }
    }

    deinit {
        if !finished {
            file.discard()
            entries.discard()
        }
    }

    private var position: UInt64 { flushedBytes + UInt64(buffer.count) }

    /// Starts a new plist object and returns its reference.
    private func begin() -> Int {
        prologueOffsets.append(position)
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
        itemKeys = ItemKeys(
            classRef: key(KeyedArchiveKeys.classRef), name: key(KeyedArchiveKeys.itemName),
            serial: key(KeyedArchiveKeys.serialNumber), dollars: key(KeyedArchiveKeys.valueInDollars),
            date: key(KeyedArchiveKeys.dateCreated), key: key(KeyedArchiveKeys.itemKey),
            thumbnail: key(KeyedArchiveKeys.thumbnailData), time: key(KeyedArchiveKeys.time))
    }

    /// Appends the next item, in manifest order: copied from the previous
    /// archive when it holds this very item at this position, else encoded.
    /// - Throws: ``ThumbpipeError`` (74) when the write fails.
    public func append(_ item: ArchivedItem) throws {
        precondition(written < itemCount, "more items appended than the archive was opened for")
        let hash = ArchiveIndex.hash(item)
        let layout = ArchiveIndex.Layout(
            firstObject: objectCount, firstArchiveRef: fixedArchiveRefs.count + itemArchiveRefCount)
        var entry = ArchiveIndex.Entry(hash: hash, start: position)
        if let previous, let old = previous.next(), old.entry.hash == hash, old.layout == layout,
            previous.withVerifiedBytes(of: old.entry, count: old.byteCount, { buffer.append(contentsOf: $0) })
        {
            entry = old.entry
            entry.start = position - old.byteCount
            copiedItems += 1
            copiedBytes += old.byteCount
        } else {
            let from = buffer.count
            Self.encode(
                item, layout: layout, keys: itemKeys, itemClassUID: itemClassUID, dateClassUID: dateClassUID,
                refWidth: refWidth, entry: &entry, into: &buffer)
            entry.bytesHash = buffer.withUnsafeBytes {
                entry.hashOfBytes(UnsafeRawBufferPointer(rebasing: $0[from...]))
            }
        }
        try entries.append(entry)
        objectCount += layout.objectCount(hasThumbnail: entry.dataSize != 0)
        itemArchiveRefCount += entry.dataSize != 0 ? 6 : 5
        written += 1
        if buffer.count >= 1 << 20 { try flush() }
    }

    private func writeBuffer() throws {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBytes {
            writtenHash.update($0)
            try file.write($0)
        }
        flushedBytes += UInt64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
        startWriteback()
    }

    /// Where the disk's writeback was last asked to start from.
    private var writebackFrom: UInt64 = 0

    /// Every 8 MB written, starts the disk on them, so the fsync in ``finish()``
    /// waits for the tail of the archive rather than all of it.
    private func startWriteback() {
        guard flushedBytes - writebackFrom >= 8 << 20 else { return }
        file.startWriteback(offset: writebackFrom, count: flushedBytes - writebackFrom)
        writebackFrom = flushedBytes
    }

    private func flush() throws { try writeBuffer() }

    /// Writes what is buffered, then runs `body` with a table of `width`-byte
    /// integers; `body` calls ``drain(_:)`` whenever the table is full.
    private func withTable(width: Int, _ body: (inout Table) throws -> Void) throws {
        try writeBuffer()
        var table = Table(width: width)
        defer { table.storage.deallocate() }
        try body(&table)
        try drain(&table)
    }

    /// Writes out a table's integers (when it holds a megabyte, or `force`).
    @inline(__always) private func drain(_ table: inout Table, ifFull: Bool = false) throws {
        guard !ifFull || table.count >= Table.capacity else { return }
        let bytes = UnsafeRawBufferPointer(start: table.storage, count: table.count)
        writtenHash.update(bytes)
        try file.write(bytes)
        flushedBytes += UInt64(table.count)
        table.count = 0
        startWriteback()
    }

    /// Writes the root array, `$objects`, the top dictionary, the offset table
    /// and the trailer, then flushes and renames the archive (and its index) into place.
    /// - Throws: ``ThumbpipeError`` (74) when a write fails; nothing is left at the final path.
    public func finish() throws {
        precondition(written == itemCount, "archive opened for \(itemCount) items, \(written) appended")
        try flush()
        let elements = try writeRootArray()
        let arrayClassUID = uid(Self.arrayClassIndex)
        fixedArchiveRefs[1] = dictionary([
            (itemKeys.classRef, arrayClassUID), (key(KeyedArchiveKeys.arrayObjects), elements),
        ])
        let objects = try writeObjects()
        let top = dictionary([(key(KeyedArchiveKeys.root), uid(1))])
        let topLevel = dictionary([
            (key(KeyedArchiveKeys.archiver), string(KeyedArchiveKeys.archiverName)),
            (key(KeyedArchiveKeys.objects), objects),
            (key(KeyedArchiveKeys.top), top),
            (key(KeyedArchiveKeys.version), integer(KeyedArchiveKeys.versionNumber)),
        ])
        try writeOffsetTable(topLevel: topLevel)
        try flush()
        contentHash = String(writtenHash.finish(), radix: 16).leftPadded(to: 16)
        let syncStart = Spans.now
        try file.commit(to: finalPath)
        finished = true
        // The index describes the archive now in place; until it is renamed, the
        // old index no longer matches the archive and is not used.
        try? entries.commit(
            header: ArchiveIndex.Header(
                itemCount: UInt64(itemCount), refWidth: UInt8(refWidth), className: className,
                archive: FileStamp(path: finalPath)))
        syncSeconds = Double(Spans.now - syncStart) / 1e9
    }

    /// The root array: the UID at the end of each item. Returns its object.
    private func writeRootArray() throws -> Int {
        let elements = begin()
        BinaryPlistEncoding.appendMarker(0xA, count: itemCount, to: &buffer)
        let refWidth = refWidth
        try withTable(width: refWidth) { table in
            try entries.forEach { entry, layout in
                table.put(UInt64(layout.firstObject + layout.objectCount(hasThumbnail: entry.dataSize != 0) - 1))
                try drain(&table, ifFull: true)
            }
        }
        return elements
    }

    /// `$objects`: the fixed entries, then per item its dictionary, name, serial,
    /// date, key (and data). Returns its object.
    private func writeObjects() throws -> Int {
        let refWidth = refWidth
        let objects = begin()
        BinaryPlistEncoding.appendMarker(0xA, count: fixedArchiveRefs.count + itemArchiveRefCount, to: &buffer)
        for ref in fixedArchiveRefs { BinaryPlistEncoding.appendBigEndian(UInt64(ref), width: refWidth, to: &buffer) }
        try withTable(width: refWidth) { table in
            try entries.forEach { entry, layout in
                let hasThumbnail = entry.dataSize != 0
                let first = UInt64(layout.firstObject)
                table.put(first + UInt64(layout.objectCount(hasThumbnail: hasThumbnail) - 2))
                table.put(first)
                table.put(first + 1)
                table.put(first + 3)
                table.put(first + 4)
                if hasThumbnail { table.put(first + 5) }
                try drain(&table, ifFull: true)
            }
        }
        return objects
    }

    /// The offset table (the prologue's objects, every item's, then the
    /// trailer's) and the trailer naming `topLevel`.
    private func writeOffsetTable(topLevel: Int) throws {
        let refWidth = refWidth
        let tableOffset = position
        let offsetWidth = BinaryPlistEncoding.byteWidth(for: tableOffset)
        func offset(_ value: UInt64) {
            BinaryPlistEncoding.appendBigEndian(value, width: offsetWidth, to: &buffer)
        }
        for value in prologueOffsets[0..<prologueObjectCount] { offset(value) }
        try withTable(width: offsetWidth) { table in
            try entries.forEach { entry, layout in
                var at = entry.start
                entry.forEachObjectSize(layout, refWidth: refWidth) { size in
                    table.put(at)
                    at += size
                }
                try drain(&table, ifFull: true)
            }
        }
        for value in prologueOffsets[prologueObjectCount...] { offset(value) }
        buffer.append(contentsOf: [0, 0, 0, 0, 0, 0, UInt8(offsetWidth), UInt8(refWidth)])
        BinaryPlistEncoding.appendBigEndian(UInt64(objectCount), width: 8, to: &buffer)
        BinaryPlistEncoding.appendBigEndian(UInt64(topLevel), width: 8, to: &buffer)
        BinaryPlistEncoding.appendBigEndian(tableOffset, width: 8, to: &buffer)
    }

    /// XXH64 of the finished archive's bytes (hex), as ``ContentHash/file(_:)``
    /// gives it: what a later run checks before it trusts the archive unread.
    public private(set) var contentHash = ""

    /// The time ``finish()`` spent flushing the archive and its index to disk
    /// (fsync) and renaming them: the disk's share of writing an archive.
    public private(set) var syncSeconds = 0.0

    /// Removes the temporary file; nothing is left at the final path.
    public func abandon() {
        finished = true
        file.discard()
        entries.discard()
    }
}
