import Foundation

/// The items of a manifest, packed into one byte buffer: a million items cost
/// tens of megabytes, not the hundreds that as many ``ManifestItem`` values
/// would. Items are decoded when they are read; the list never changes once built.
///
/// Each record is a flags byte, `valueInDollars` (4 bytes), `dateCreated`
/// (8 bytes, when present), then length-prefixed UTF-8 strings: name, serial
/// number, key, and the image path as written and as resolved when they are
/// present. A path the manifest's folder resolves is not stored twice.
public struct ItemList: RandomAccessCollection, Sendable, Equatable {
    final class Storage: Sendable {
        let bytes: [UInt8]
        /// Where each record starts (its strings carry their lengths, so nothing marks the end).
        let offsets: [Int]
        let lines: [Int]
        /// Relative image paths resolve against this folder.
        let folder: String?
        /// What migrated items carry, by position (only `run OLD/items.archive` has them).
        let carried: [Int: ManifestItem.Carried]
        let withImage: Int

        init(builder: Builder) {
            bytes = builder.bytes
            offsets = builder.offsets
            lines = builder.lines
            folder = builder.folder
            carried = builder.carried
            withImage = builder.withImage
        }
    }

    private let storage: Storage

    /// The items with an image.
    public var withImageCount: Int { storage.withImage }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage.lines.count }

    /// Packs `items` (image paths kept exactly as given).
    public init(_ items: [ManifestItem] = []) {
        var builder = Builder(folder: nil)
        for item in items { builder.append(item) }
        storage = Storage(builder: builder)
    }

    init(builder: Builder) {
        storage = Storage(builder: builder)
    }

    public subscript(position: Int) -> ManifestItem {
        var reader = Reader(storage: storage, position: position)
        let flags = reader.byte()
        let value = reader.int32()
        let date = flags & Flags.date != 0 ? Date(timeIntervalSinceReferenceDate: reader.double()) : nil
        let name = reader.string()
        let serial = reader.string()
        let key = reader.string()
        let image = flags & Flags.image != 0 ? reader.string() : nil
        var imagePath: String? = nil
        if flags & Flags.explicitPath != 0 {
            imagePath = reader.string()
        } else if let image, flags & Flags.resolvedPath != 0 {
            imagePath = Builder.resolve(image, in: storage.folder ?? "")
        }
        var item = ManifestItem(
            line: storage.lines[position], itemName: name, serialNumber: serial, valueInDollars: value,
            dateCreated: date, itemKey: key, image: image, imagePath: imagePath)
        item.carried = storage.carried[position]
        item.nameFromFile = flags & Flags.nameFromFile != 0
        return item
    }

    /// The items at `positions`, in that order, packed alike.
    public func selecting(_ positions: [Int]) -> ItemList {
        var builder = Builder(folder: storage.folder)
        for position in positions { builder.append(self[position]) }
        return ItemList(builder: builder)
    }

    /// The key of the item at `position`, without decoding the rest.
    public func itemKey(at position: Int) -> String {
        var reader = Reader(storage: storage, position: position)
        let flags = reader.byte()
        reader.skip(4 + (flags & Flags.date != 0 ? 8 : 0))
        reader.skipString()
        reader.skipString()
        return reader.string()
    }

    /// A hash of what the item at `position` archives besides its photo (name,
    /// serial number, value, the date the manifest gives), read straight from
    /// its packed bytes: nothing is decoded or allocated, so a plan compares a
    /// million items' fields at the cost of hashing them.
    public func fieldsHash(at position: Int) -> UInt64 {
        var reader = Reader(storage: storage, position: position)
        let start = reader.index
        let flags = reader.byte()
        reader.skip(4 + (flags & Flags.date != 0 ? 8 : 0))
        reader.skipString()
        reader.skipString()
        var hash = ContentHash.Streaming()
        withUnsafeBytes(of: flags & Flags.date) { hash.update($0) }
        storage.bytes.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[(start + 1)..<reader.index])) }
        return hash.finish()
    }

    /// ``fieldsHash(at:)`` of an item not in a list.
    public static func fieldsHash(of item: ManifestItem) -> UInt64 { ItemList([item]).fieldsHash(at: 0) }

    /// Whether the item at `position` has an image.
    public func hasImage(at position: Int) -> Bool {
        storage.bytes[storage.offsets[position]] & (Flags.resolvedPath | Flags.explicitPath) != 0
    }

    /// Calls `body` with the packed bytes of every item, in order: equal bytes
    /// mean equal items (the fields, not the lines they are on).
    func withPackedBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.bytes.withUnsafeBytes(body)
    }

    public static func == (lhs: ItemList, rhs: ItemList) -> Bool {
        lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { $0 == $1 }
    }

    enum Flags {
        static let date: UInt8 = 1
        static let image: UInt8 = 2
        /// The image path is the manifest folder's resolution of `image`.
        static let resolvedPath: UInt8 = 4
        /// The image path is stored as it is.
        static let explicitPath: UInt8 = 8
        /// The name is the photo's file name (folder mode): its title replaces it.
        static let nameFromFile: UInt8 = 16
    }

    private struct Reader {
        let storage: Storage
        var index: Int

        init(storage: Storage, position: Int) {
            self.storage = storage
            index = storage.offsets[position]
        }

        mutating func byte() -> UInt8 {
            defer { index += 1 }
            return storage.bytes[index]
        }

        mutating func skip(_ count: Int) { index += count }

        mutating func int32() -> Int32 {
            var value: UInt32 = 0
            for shift in stride(from: 0, to: 32, by: 8) { value |= UInt32(byte()) << UInt32(shift) }
            return Int32(bitPattern: value)
        }

        mutating func double() -> Double {
            var bits: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 8) { bits |= UInt64(byte()) << UInt64(shift) }
            return Double(bitPattern: bits)
        }

        mutating func length() -> Int {
            var value = 0
            var shift = 0
            while true {
                let b = byte()
                value |= Int(b & 0x7F) << shift
                if b < 0x80 { return value }
                shift += 7
            }
        }

        mutating func string() -> String {
            let count = length()
            defer { index += count }
            return storage.bytes.withUnsafeBufferPointer {
                String(decoding: UnsafeBufferPointer(rebasing: $0[index..<index + count]), as: UTF8.self)
            }
        }

        mutating func skipString() { index += length() }
    }

    /// Packs items one at a time.
    struct Builder {
        var bytes: [UInt8] = []
        var offsets: [Int] = []
        var lines: [Int] = []
        let folder: String?
        var carried: [Int: ManifestItem.Carried] = [:]
        var withImage = 0

        /// - Parameter folder: the folder relative image paths resolve against (nil: store paths as given).
        init(folder: String?) {
            self.folder = folder
        }

        var count: Int { lines.count }

        static func resolve(_ image: String, in folder: String) -> String {
            image.hasPrefix("/") ? image : folder + "/" + image
        }

        mutating func append(_ item: ManifestItem) {
            offsets.append(bytes.count)
            lines.append(item.line)
            var flags: UInt8 = 0
            if item.dateCreated != nil { flags |= Flags.date }
            if item.image != nil { flags |= Flags.image }
            if item.nameFromFile { flags |= Flags.nameFromFile }
            var explicitPath: String? = nil
            if let path = item.imagePath {
                withImage += 1
                if let image = item.image, let folder, path == Self.resolve(image, in: folder) {
                    flags |= Flags.resolvedPath
                } else {
                    flags |= Flags.explicitPath
                    explicitPath = path
                }
            }
            bytes.append(flags)
            let value = UInt32(bitPattern: item.valueInDollars)
            for shift in stride(from: 0, to: 32, by: 8) {
                bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
            }
            if let date = item.dateCreated {
                let bits = date.timeIntervalSinceReferenceDate.bitPattern
                for shift in stride(from: 0, to: 64, by: 8) {
                    bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
                }
            }
            appendString(item.itemName)
            appendString(item.serialNumber)
            appendString(item.itemKey)
            if let image = item.image { appendString(image) }
            if let explicitPath { appendString(explicitPath) }
            if let carried = item.carried { self.carried[lines.count - 1] = carried }
        }

        private mutating func appendString(_ text: String) {
            var count = text.utf8.count
            while count >= 0x80 {
                bytes.append(UInt8(count & 0x7F) | 0x80)
                count >>= 7
            }
            bytes.append(UInt8(count))
            bytes.append(contentsOf: text.utf8)
        }
    }

    /// The manifest line of the item at `position`.
    func lines(_ position: Int) -> Int { storage.lines[position] }
}

/// The keys of an ``ItemList`` by hash, sorted: finds an item by key in a few
/// comparisons with 16 bytes per item, where a dictionary of strings would take
/// ten times that.
struct KeyIndex: Sendable {
    private let list: ItemList
    /// (hash of the key, position), sorted.
    private let entries: [(hash: UInt64, position: Int32)]

    init(_ list: ItemList) {
        self.list = list
        var entries: [(hash: UInt64, position: Int32)] = []
        entries.reserveCapacity(list.count)
        for position in 0..<list.count {
            entries.append((Self.hash(list.itemKey(at: position)), Int32(position)))
        }
        entries.sort { $0.hash != $1.hash ? $0.hash < $1.hash : $0.position < $1.position }
        self.entries = entries
    }

    /// FNV-1a over the key's UTF-8: only ever compared within one process.
    static func hash(_ key: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in key.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    /// Runs of positions whose keys hash alike (almost always one position each).
    func equalHashRuns() -> [[Int]] {
        var runs: [[Int]] = []
        var start = 0
        while start < entries.count {
            var end = start + 1
            while end < entries.count && entries[end].hash == entries[start].hash { end += 1 }
            if end - start > 1 { runs.append(entries[start..<end].map { Int($0.position) }) }
            start = end
        }
        return runs
    }

    /// The position of the item with `key`, or nil.
    func position(of key: String) -> Int? {
        let h = Self.hash(key)
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].hash < h { low = mid + 1 } else { high = mid }
        }
        while low < entries.count && entries[low].hash == h {
            let position = Int(entries[low].position)
            if list.itemKey(at: position) == key { return position }
            low += 1
        }
        return nil
    }
}
