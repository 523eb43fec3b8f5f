import Foundation

// How one item's objects and the archive's big tables are laid out in bytes:
// pure encoding, apart from the writer's file and its bookkeeping.
extension KeyedArchiveWriter {
    /// The plist references of the keys every item uses, looked up once.
    struct ItemKeys {
        var classRef = 0, name = 0, serial = 0, dollars = 0, date = 0, key = 0, thumbnail = 0, time = 0
    }

    /// Encodes one item's objects, in the order ``ArchiveIndex/Layout`` numbers
    /// them, recording the sizes of those whose size varies.
    static func encode(
        _ item: ArchivedItem, layout: ArchiveIndex.Layout, keys k: ItemKeys, itemClassUID: Int, dateClassUID: Int,
        refWidth: Int, entry: inout ArchiveIndex.Entry, into out: inout [UInt8]
    ) {
        func ref(_ value: Int) { BinaryPlistEncoding.appendBigEndian(UInt64(value), width: refWidth, to: &out) }
        func sized(_ body: (inout [UInt8]) -> Void) -> UInt32 {
            let before = out.count
            body(&out)
            return UInt32(out.count - before)
        }
        let first = layout.firstObject
        let hasThumbnail = item.thumbnailData != nil
        let base = UInt64(layout.firstArchiveRef)
        entry.nameSize = sized { BinaryPlistEncoding.appendString(item.itemName, to: &$0) }
        entry.serialSize = sized { BinaryPlistEncoding.appendString(item.serialNumber, to: &$0) }
        BinaryPlistEncoding.appendReal(item.dateCreated.timeIntervalSinceReferenceDate, to: &out)
        BinaryPlistEncoding.appendMarker(0xD, count: 2, to: &out)
        ref(k.classRef)
        ref(k.time)
        ref(dateClassUID)
        ref(first + 2)
        entry.keySize = sized { BinaryPlistEncoding.appendString(item.itemKey, to: &$0) }
        if let data = item.thumbnailData {
            entry.dataSize = sized {
                BinaryPlistEncoding.appendDataHeader(count: data.count, to: &$0)
                $0.append(contentsOf: data)
            }
        }
        let uids = first + (hasThumbnail ? 6 : 5)
        for k in 1...(hasThumbnail ? 5 : 4) { BinaryPlistEncoding.appendUID(base + UInt64(k), to: &out) }
        let dollars = uids + (hasThumbnail ? 5 : 4)
        entry.integerSize = UInt8(sized { BinaryPlistEncoding.appendInteger(Int64(item.valueInDollars), to: &$0) })
        BinaryPlistEncoding.appendMarker(0xD, count: hasThumbnail ? 7 : 6, to: &out)
        ref(k.classRef)
        ref(k.name)
        ref(k.serial)
        ref(k.date)
        ref(k.key)
        if hasThumbnail { ref(k.thumbnail) }
        ref(k.dollars)
        ref(itemClassUID)
        for k in 0..<(hasThumbnail ? 5 : 4) { ref(uids + k) }
        ref(dollars)
        BinaryPlistEncoding.appendUID(base, to: &out)
    }

    /// Big-endian integers of one width, gathered in a megabyte and written
    /// straight to the file: the tables at the end hold tens of millions.
    struct Table {
        let width: Int
        let storage: UnsafeMutableRawPointer
        var count = 0
        static let capacity = 1 << 20

        /// Room past the capacity: one item's integers (at most 14 of 8 bytes) and an 8-byte store.
        static let slack = 256

        init(width: Int) {
            self.width = width
            storage = .allocate(byteCount: Self.capacity + Self.slack, alignment: 8)
        }

        /// Stores `value` in its `width` bytes (an 8-byte store; the slack absorbs the rest).
        /// Callers drain the table after each item, so it never passes capacity + slack.
        @inline(__always) mutating func put(_ value: UInt64) {
            precondition(count + 8 <= Self.capacity + Self.slack, "table not drained")
            let shifted = width == 8 ? value : value << UInt64(64 - 8 * width)
            storage.storeBytes(of: shifted.bigEndian, toByteOffset: count, as: UInt64.self)
            count += width
        }
    }
}
