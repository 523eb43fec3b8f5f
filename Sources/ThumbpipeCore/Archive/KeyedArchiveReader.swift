import Foundation

/// Reads `items.archive` back: checks the `bplist00` structure and the
/// NSKeyedArchiver layout, and fails with a one-line reason (never a crash or
/// a hang) on anything else. Items are decoded one at a time, on demand, from
/// the file, so an archive of any size reads in flat memory.
public final class KeyedArchiveReader {
    /// The class name the items were archived as (that of the first item).
    public private(set) var className: String = "BNRItem"
    /// The number of items.
    public let count: Int

    /// Where the archive was read from, for messages.
    public private(set) var source = "archive"
    private let plist: BinaryPlist
    private let objects: BinaryPlist.Container
    private let elements: BinaryPlist.Container

    /// Opens and checks an archive file.
    /// - Throws: ``ThumbpipeError`` (66) when it cannot be read, (65) when it is not a valid items archive.
    public convenience init(path: String) throws {
        let bytes = try FileBytes(path: path)
        do {
            try self.init(source: bytes)
            source = path
        } catch let error as ArchiveFormatError {
            throw ThumbpipeError(.dataError, "\(path): not a valid items archive: \(error.reason)")
        }
    }

    /// Checks an archive held in memory.
    /// - Throws: ``ArchiveFormatError`` naming the first problem.
    public convenience init(data: Data) throws {
        try self.init(source: MemoryBytes(data))
    }

    init(source: any ByteSource) throws {
        let plist = try BinaryPlist(source: source)
        self.plist = plist
        let top = try plist.dictionary(plist.topObject, "the top object")
        guard try plist.string(top[KeyedArchiveKeys.archiver], "$archiver") == KeyedArchiveKeys.archiverName else {
            throw ArchiveFormatError("$archiver is not NSKeyedArchiver")
        }
        guard try plist.integer(top[KeyedArchiveKeys.version], "$version") == KeyedArchiveKeys.versionNumber else {
            throw ArchiveFormatError("$version is not 100000")
        }
        objects = try plist.array(top[KeyedArchiveKeys.objects], "$objects")
        let topDict = try plist.dictionary(top[KeyedArchiveKeys.top], "$top")
        let rootIndex = try plist.uid(topDict[KeyedArchiveKeys.root], "$top.root")
        let root = try plist.dictionary(
            try Self.resolve(rootIndex, objects, plist, "the root object"), "the root object")
        let rootClass = try Self.className(of: root, objects, plist)
        guard rootClass == "NSMutableArray" || rootClass == "NSArray" else {
            throw ArchiveFormatError("the root object is \(rootClass), not NSMutableArray")
        }
        elements = try plist.array(root[KeyedArchiveKeys.arrayObjects], "NS.objects")
        count = elements.count
        if count > 0 {
            className = try Self.className(of: try itemDictionary(0), objects, plist)
        }
    }

    private func itemDictionary(_ position: Int) throws -> [String: Int] {
        let label = "item \(position + 1)"
        let index = try plist.uid(try plist.element(elements, position), label)
        return try plist.dictionary(try Self.resolve(index, objects, plist, label), label)
    }

    /// The item at `position` (0-based), fully decoded and checked.
    /// - Throws: ``ArchiveFormatError`` when a field is missing or of the wrong type.
    public func item(at position: Int) throws -> ArchivedItem {
        precondition(position >= 0 && position < count, "item \(position) out of range")
        let label = "item \(position + 1)"
        let dict = try itemDictionary(position)
        let name = try Self.className(of: dict, objects, plist)
        guard name == className else { throw ArchiveFormatError("\(label) is a \(name), not a \(className)") }
        func object(_ key: String) throws -> Int {
            guard let ref = dict[key] else { throw ArchiveFormatError("\(label) has no \(key)") }
            return try Self.resolve(try plist.uid(ref, "\(label).\(key)"), objects, plist, "\(label).\(key)")
        }
        // Apple's NSKeyedArchiver writes a string as a plain string, or as an
        // NSString / NSMutableString object holding it under NS.string; nil as $null.
        func text(_ key: String) throws -> String {
            let ref = try object(key)
            if try plist.isNull(ref) { return "" }
            if let wrapped = try? plist.dictionary(ref, ""), let inner = wrapped[KeyedArchiveKeys.nsString] {
                return try plist.string(inner, "\(label).\(key) NS.string")
            }
            return try plist.string(ref, "\(label).\(key)")
        }
        // Data likewise: plain, or an NSData / NSMutableData object under NS.data.
        func bytes(_ key: String) throws -> Data? {
            let ref = try object(key)
            if try plist.isNull(ref) { return nil }
            if let wrapped = try? plist.dictionary(ref, ""), let inner = wrapped[KeyedArchiveKeys.nsData] {
                return try plist.data(inner, "\(label).\(key) NS.data")
            }
            return try plist.data(ref, "\(label).\(key)")
        }
        let dateDict = try plist.dictionary(try object(KeyedArchiveKeys.dateCreated), "\(label).dateCreated")
        let time = try plist.real(dateDict[KeyedArchiveKeys.time], "\(label).dateCreated NS.time")
        // NSDate's range: ±10,000 years around 2001 is more than any photo needs.
        guard time.isFinite, abs(time) < ArchivedItem.dateLimit else {
            throw ArchiveFormatError("\(label).dateCreated \(time) is not a date")
        }
        let value =
            dict[KeyedArchiveKeys.valueInDollars] == nil
            ? 0 : try plist.integer(dict[KeyedArchiveKeys.valueInDollars], "\(label).valueInDollars")
        guard let dollars = Int32(exactly: value) else {
            throw ArchiveFormatError("\(label).valueInDollars \(value) does not fit a 32-bit integer")
        }
        var thumbnail: Data? = nil
        if dict[KeyedArchiveKeys.thumbnailData] != nil {
            thumbnail = try bytes(KeyedArchiveKeys.thumbnailData)
        }
        // The book's first edition archived a UIImage under "thumbnail" instead.
        let legacy = thumbnail == nil && dict[KeyedArchiveKeys.legacyThumbnail] != nil
        let key = try text(KeyedArchiveKeys.itemKey)
        // Keys name files (store files, extracted thumbnails): the manifest's rule holds here too.
        guard ManifestItem.isSafeKey(key) else {
            throw ArchiveFormatError("\(label).itemKey '\(key)' is not a safe file name")
        }
        var item = ArchivedItem(
            itemName: try text(KeyedArchiveKeys.itemName),
            serialNumber: dict[KeyedArchiveKeys.serialNumber] == nil ? "" : try text(KeyedArchiveKeys.serialNumber),
            valueInDollars: dollars, dateCreated: Date(timeIntervalSinceReferenceDate: time),
            itemKey: key, thumbnailData: thumbnail)
        item.hasLegacyThumbnail = legacy
        return item
    }

    /// The item at `position`, with a damaged item reported as a user's error.
    /// - Throws: ``ThumbpipeError`` (65) naming the archive and the problem.
    public func validItem(at position: Int) throws -> ArchivedItem {
        do {
            return try item(at: position)
        } catch let error as ArchiveFormatError {
            throw ThumbpipeError(.dataError, "\(source): not a valid items archive: \(error.reason)")
        }
    }

    /// Checks that no item key is used twice (a crafted or damaged archive): the
    /// keys name files, so a second one would overwrite the first's.
    /// - Throws: ``ThumbpipeError`` (65) naming the key and both positions.
    public func checkKeysUnique() throws {
        var seen: [UInt64: Int] = [:]
        seen.reserveCapacity(count)
        for position in 0..<count {
            let key = try validItem(at: position).itemKey
            let hash = Array(key.utf8).withUnsafeBytes { ContentHash.xxh64($0) }
            if let first = seen[hash], try validItem(at: first).itemKey == key {
                throw ThumbpipeError(
                    .dataError,
                    "\(source): not a valid items archive: itemKey '\(key)' is used by items \(first + 1) and \(position + 1)"
                )
            }
            seen[hash] = position
        }
    }

    /// Every item, in archive order (for small archives; large ones read ``item(at:)`` one by one).
    public func items() throws -> [ArchivedItem] {
        try (0..<count).map { try item(at: $0) }
    }

    private static func resolve(_ index: Int, _ objects: BinaryPlist.Container, _ plist: BinaryPlist, _ what: String)
        throws -> Int
    {
        guard index >= 0, index < objects.count else { throw ArchiveFormatError("\(what) points outside $objects") }
        return try plist.element(objects, index)
    }

    private static func className(of dict: [String: Int], _ objects: BinaryPlist.Container, _ plist: BinaryPlist)
        throws -> String
    {
        let classIndex = try plist.uid(dict[KeyedArchiveKeys.classRef], "$class")
        let description = try plist.dictionary(
            try resolve(classIndex, objects, plist, "a class description"), "a class description")
        return try plist.string(description[KeyedArchiveKeys.className], "$classname")
    }
}

/// Why bytes are not a valid binary plist or items archive.
public struct ArchiveFormatError: Error, Sendable, CustomStringConvertible {
    /// What is wrong, in a few words.
    public var reason: String
    init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A checked view of a `bplist00` file: objects are decoded on demand, by reference.
final class BinaryPlist {
    /// An array's references, read lazily.
    struct Container {
        var start: Int
        var count: Int
    }

    private let source: any ByteSource
    private let offsetWidth: Int
    private let refWidth: Int
    private let objectCount: Int
    private let tableOffset: Int
    let topObject: Int
    /// Dictionary keys by reference: archives share their key strings.
    private var keyCache: [Int: String] = [:]

    init(source: any ByteSource) throws {
        self.source = source
        let size = source.count
        guard size >= 8 + 32 else { throw ArchiveFormatError("not a binary property list (too short)") }
        let header = try source.withBytes(at: 0, length: 8) { Array($0) }
        guard header == BinaryPlistEncoding.header else {
            throw ArchiveFormatError("not a binary property list (no bplist00 header)")
        }
        let trailer = try source.withBytes(at: size - 32, length: 32) { Array($0) }
        offsetWidth = Int(trailer[6])
        refWidth = Int(trailer[7])
        func field(_ at: Int) -> UInt64 { trailer[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        let count = field(8)
        let top = field(16)
        let table = field(24)
        guard [1, 2, 4, 8].contains(offsetWidth), [1, 2, 4, 8].contains(refWidth) else {
            throw ArchiveFormatError("bad trailer: offset or reference width")
        }
        let objectArea = UInt64(size - 32)
        guard count > 0, count < UInt64(size), top < count, table >= 8, table < objectArea,
            (objectArea - table) / UInt64(offsetWidth) >= count
        else {
            throw ArchiveFormatError("bad trailer: object count, top object or offset table out of range")
        }
        objectCount = Int(count)
        topObject = Int(top)
        tableOffset = Int(table)
    }

    private func uint(_ at: Int, _ width: Int) throws -> UInt64 {
        guard at >= 0, width <= 8, at <= source.count - width else {
            throw ArchiveFormatError("object runs past the end of the file")
        }
        return try source.withBytes(at: at, length: width) { $0.reduce(0) { $0 << 8 | UInt64($1) } }
    }

    private func byte(_ at: Int) throws -> UInt8 { UInt8(try uint(at, 1)) }

    private func offset(_ ref: Int) throws -> Int {
        guard ref >= 0, ref < objectCount else { throw ArchiveFormatError("reference \(ref) out of range") }
        let value = try uint(tableOffset + ref * offsetWidth, offsetWidth)
        guard value >= 8, value < UInt64(tableOffset) else {
            throw ArchiveFormatError("object \(ref) has an offset outside the object area")
        }
        return Int(value)
    }

    /// The marker nibbles and the position after the length, for the object at `ref`.
    private func header(_ ref: Int) throws -> (type: UInt8, count: Int, start: Int) {
        let at = try offset(ref)
        let marker = try byte(at)
        let type = marker >> 4
        var count = Int(marker & 0x0F)
        var start = at + 1
        if count == 0x0F, [0x4, 0x5, 0x6, 0xA, 0xD].contains(type) {
            let intMarker = try byte(start)
            guard intMarker >> 4 == 0x1, intMarker & 0x0F <= 3 else {
                throw ArchiveFormatError("object \(ref) has a bad length")
            }
            let width = 1 << Int(intMarker & 0x0F)
            let value = try uint(start + 1, width)
            guard value < UInt64(source.count) else {
                throw ArchiveFormatError("object \(ref) is longer than the file")
            }
            count = Int(value)
            start += 1 + width
        }
        return (type, count, start)
    }

    private func checkSpan(_ start: Int, _ length: Int, _ what: String) throws {
        guard length >= 0, start <= tableOffset, length <= tableOffset - start else {
            throw ArchiveFormatError("\(what) runs past the object area")
        }
    }

    private func reference(at position: Int) throws -> Int {
        let value = try uint(position, refWidth)
        guard value < UInt64(objectCount) else { throw ArchiveFormatError("reference \(value) out of range") }
        return Int(value)
    }

    private func need(_ ref: Int?, _ what: String) throws -> Int {
        guard let ref else { throw ArchiveFormatError("\(what) is missing") }
        return ref
    }

    func dictionary(_ ref: Int?, _ what: String) throws -> [String: Int] {
        let h = try header(try need(ref, what))
        guard h.type == 0xD else { throw ArchiveFormatError("\(what) is not a dictionary") }
        try checkSpan(h.start, h.count.multipliedReportingOverflow(by: 2 * refWidth).partialValue, what)
        guard h.count <= 4096 else { throw ArchiveFormatError("\(what) has \(h.count) keys") }
        var result: [String: Int] = [:]
        for i in 0..<h.count {
            let keyRef = try reference(at: h.start + i * refWidth)
            let valueRef = try reference(at: h.start + (h.count + i) * refWidth)
            let key: String
            if let cached = keyCache[keyRef] {
                key = cached
            } else {
                key = try string(keyRef, "a dictionary key in \(what)")
                if keyCache.count < 1024 { keyCache[keyRef] = key }
            }
            result[key] = valueRef
        }
        return result
    }

    func array(_ ref: Int?, _ what: String) throws -> Container {
        let h = try header(try need(ref, what))
        guard h.type == 0xA else { throw ArchiveFormatError("\(what) is not an array") }
        try checkSpan(h.start, h.count.multipliedReportingOverflow(by: refWidth).partialValue, what)
        return Container(start: h.start, count: h.count)
    }

    func element(_ container: Container, _ index: Int) throws -> Int {
        try reference(at: container.start + index * refWidth)
    }

    func string(_ ref: Int?, _ what: String) throws -> String {
        let h = try header(try need(ref, what))
        switch h.type {
        case 0x5:
            try checkSpan(h.start, h.count, what)
            return try source.withBytes(at: h.start, length: h.count) { raw in
                guard raw.allSatisfy({ $0 < 0x80 }) else { throw ArchiveFormatError("\(what) is not ASCII") }
                return String(decoding: raw, as: UTF8.self)
            }
        case 0x6:
            try checkSpan(h.start, h.count.multipliedReportingOverflow(by: 2).partialValue, what)
            let units = try source.withBytes(at: h.start, length: h.count * 2) { raw in
                (0..<h.count).map { UInt16(raw[$0 * 2]) << 8 | UInt16(raw[$0 * 2 + 1]) }
            }
            guard let s = String(validating: units, as: UTF16.self) else {
                throw ArchiveFormatError("\(what) is not valid UTF-16")
            }
            return s
        default:
            throw ArchiveFormatError("\(what) is not a string")
        }
    }

    func data(_ ref: Int?, _ what: String) throws -> Data {
        let h = try header(try need(ref, what))
        guard h.type == 0x4 else { throw ArchiveFormatError("\(what) is not data") }
        try checkSpan(h.start, h.count, what)
        return try source.withBytes(at: h.start, length: h.count) { Data($0) }
    }

    func integer(_ ref: Int?, _ what: String) throws -> Int64 {
        let at = try offset(try need(ref, what))
        let marker = try byte(at)
        guard marker >> 4 == 0x1, marker & 0x0F <= 3 else { throw ArchiveFormatError("\(what) is not an integer") }
        let width = 1 << Int(marker & 0x0F)
        let raw = try uint(at + 1, width)
        return width == 8 ? Int64(bitPattern: raw) : Int64(raw)
    }

    func real(_ ref: Int?, _ what: String) throws -> Double {
        let at = try offset(try need(ref, what))
        switch try byte(at) {
        case 0x23: return Double(bitPattern: try uint(at + 1, 8))
        case 0x22: return Double(Float(bitPattern: UInt32(try uint(at + 1, 4))))
        default: throw ArchiveFormatError("\(what) is not a real number")
        }
    }

    func uid(_ ref: Int?, _ what: String) throws -> Int {
        let at = try offset(try need(ref, what))
        let marker = try byte(at)
        guard marker >> 4 == 0x8 else { throw ArchiveFormatError("\(what) is not a UID") }
        let value = try uint(at + 1, Int(marker & 0x0F) + 1)
        guard value < UInt64(Int32.max) else { throw ArchiveFormatError("\(what) is out of range") }
        return Int(value)
    }

    func isNull(_ ref: Int) throws -> Bool {
        let h = try header(ref)
        guard h.type == 0x5, h.count == 5 else { return false }
        return try string(ref, "") == KeyedArchiveKeys.null
    }
}
