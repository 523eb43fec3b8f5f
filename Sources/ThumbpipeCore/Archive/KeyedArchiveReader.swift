import Foundation

/// Reads `items.archive` back: checks the `bplist00` structure and the
/// NSKeyedArchiver layout, and fails with a one-line reason (never a crash)
/// on anything else.
public struct KeyedArchiveReader: Sendable {
    /// The class name the items were archived as.
    public let className: String
    /// The number of items.
    public var count: Int { itemIndices.count }

    private let plist: BinaryPlist
    private let objectRefs: [Int]
    private let itemIndices: [Int]

    /// Opens and checks an archive file.
    /// - Throws: ``ThumbpipeError`` (66) when it cannot be read, (65) when it is not a valid items archive.
    public init(path: String) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        } catch {
            throw ThumbpipeError(.noInput, "\(path): cannot open: \(ThumbpipeError.describe(error))")
        }
        do {
            try self.init(data: data)
        } catch let error as ArchiveFormatError {
            throw ThumbpipeError(.dataError, "\(path): not a valid items archive: \(error.reason)")
        }
    }

    /// Checks an archive held in memory.
    /// - Throws: ``ArchiveFormatError`` naming the first problem.
    public init(data: Data) throws {
        let plist = try BinaryPlist(data: data)
        self.plist = plist
        let top = try plist.dictionary(plist.topObject, "the top object")
        guard try plist.string(top[KeyedArchiveKeys.archiver], "$archiver") == KeyedArchiveKeys.archiverName else {
            throw ArchiveFormatError("$archiver is not NSKeyedArchiver")
        }
        guard try plist.integer(top[KeyedArchiveKeys.version], "$version") == KeyedArchiveKeys.versionNumber else {
            throw ArchiveFormatError("$version is not 100000")
        }
        objectRefs = try plist.array(top[KeyedArchiveKeys.objects], "$objects")
        let topDict = try plist.dictionary(top[KeyedArchiveKeys.top], "$top")
        let rootIndex = try plist.uid(topDict[KeyedArchiveKeys.root], "$top.root")
        let root = try Self.archived(rootIndex, objectRefs, plist, "the root object")
        let rootClass = try Self.classNames(of: root, objectRefs, plist)
        guard rootClass.first == "NSMutableArray" || rootClass.first == "NSArray" else {
            throw ArchiveFormatError("the root object is \(rootClass.first ?? "?"), not NSMutableArray")
        }
        let elements = try plist.array(root[KeyedArchiveKeys.arrayObjects], "NS.objects")
        var indices: [Int] = []
        indices.reserveCapacity(elements.count)
        var className: String? = nil
        for (position, element) in elements.enumerated() {
            let index = try plist.uid(element, "item \(position + 1)")
            let item = try Self.archived(index, objectRefs, plist, "item \(position + 1)")
            let names = try Self.classNames(of: item, objectRefs, plist)
            guard let name = names.first else { throw ArchiveFormatError("item \(position + 1) has no class") }
            if className == nil { className = name }
            guard name == className else {
                throw ArchiveFormatError("item \(position + 1) is a \(name), not a \(className!)")
            }
            indices.append(index)
        }
        self.className = className ?? "BNRItem"
        itemIndices = indices
    }

    /// The item at `position` (0-based), fully decoded and checked.
    /// - Throws: ``ArchiveFormatError`` when a field is missing or of the wrong type.
    public func item(at position: Int) throws -> ArchivedItem {
        let label = "item \(position + 1)"
        let dict = try Self.archived(itemIndices[position], objectRefs, plist, label)
        func object(_ key: String) throws -> Int {
            guard let ref = dict[key] else { throw ArchiveFormatError("\(label) has no \(key)") }
            return try Self.resolve(try plist.uid(ref, "\(label).\(key)"), objectRefs, "\(label).\(key)")
        }
        func text(_ key: String) throws -> String {
            try plist.string(try object(key), "\(label).\(key)")
        }
        let dateDict = try plist.dictionary(try object(KeyedArchiveKeys.dateCreated), "\(label).dateCreated")
        let time = try plist.real(dateDict[KeyedArchiveKeys.time], "\(label).dateCreated NS.time")
        let value = try plist.integer(dict[KeyedArchiveKeys.valueInDollars], "\(label).valueInDollars")
        guard let dollars = Int32(exactly: value) else {
            throw ArchiveFormatError("\(label).valueInDollars \(value) does not fit a 32-bit integer")
        }
        var thumbnail: Data? = nil
        if dict[KeyedArchiveKeys.thumbnailData] != nil {
            let ref = try object(KeyedArchiveKeys.thumbnailData)
            if try !plist.isNull(ref) { thumbnail = try plist.data(ref, "\(label).thumbnailData") }
        }
        return ArchivedItem(
            itemName: try text(KeyedArchiveKeys.itemName), serialNumber: try text(KeyedArchiveKeys.serialNumber),
            valueInDollars: dollars, dateCreated: Date(timeIntervalSinceReferenceDate: time),
            itemKey: try text(KeyedArchiveKeys.itemKey), thumbnailData: thumbnail)
    }

    /// Every item, in archive order.
    public func items() throws -> [ArchivedItem] {
        try (0..<count).map { try item(at: $0) }
    }

    private static func resolve(_ index: Int, _ objectRefs: [Int], _ what: String) throws -> Int {
        guard index >= 0, index < objectRefs.count else {
            throw ArchiveFormatError("\(what) points outside $objects")
        }
        return objectRefs[index]
    }

    private static func archived(_ index: Int, _ objectRefs: [Int], _ plist: BinaryPlist, _ what: String) throws
        -> [String: Int]
    {
        try plist.dictionary(try resolve(index, objectRefs, what), what)
    }

    private static func classNames(of dict: [String: Int], _ objectRefs: [Int], _ plist: BinaryPlist) throws
        -> [String]
    {
        let classIndex = try plist.uid(dict[KeyedArchiveKeys.classRef], "$class")
        let description = try archived(classIndex, objectRefs, plist, "a class description")
        let name = try plist.string(description[KeyedArchiveKeys.className], "$classname")
        return [name]
    }
}

/// Why bytes are not a valid binary plist or items archive.
public struct ArchiveFormatError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A checked view of a `bplist00` file: objects are decoded on demand, by reference.
struct BinaryPlist: @unchecked Sendable {
    private let bytes: Data
    private let offsetWidth: Int
    private let refWidth: Int
    private let objectCount: Int
    private let tableOffset: Int
    let topObject: Int

    init(data: Data) throws {
        bytes = data
        guard data.count >= 8 + 32, data.prefix(8).elementsEqual(BinaryPlistEncoding.header) else {
            throw ArchiveFormatError("not a binary property list (no bplist00 header)")
        }
        let trailer = data.count - 32
        offsetWidth = Int(data[data.startIndex + trailer + 6])
        refWidth = Int(data[data.startIndex + trailer + 7])
        func field(_ at: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in 0..<8 { v = v << 8 | UInt64(data[data.startIndex + trailer + at + i]) }
            return v
        }
        let count = field(8)
        let top = field(16)
        let table = field(24)
        guard [1, 2, 4, 8].contains(offsetWidth), [1, 2, 4, 8].contains(refWidth) else {
            throw ArchiveFormatError("bad trailer: offset or reference width")
        }
        guard count > 0, count < UInt64(data.count), top < count, table >= 8,
            table.multipliedReportingOverflow(by: 1).partialValue < UInt64(trailer),
            UInt64(trailer) - table >= count * UInt64(offsetWidth)
        else {
            throw ArchiveFormatError("bad trailer: object count, top object or offset table out of range")
        }
        objectCount = Int(count)
        topObject = Int(top)
        tableOffset = Int(table)
    }

    private func byte(_ at: Int) throws -> UInt8 {
        guard at >= 0, at < bytes.count else { throw ArchiveFormatError("object runs past the end of the file") }
        return bytes[bytes.startIndex + at]
    }

    private func uint(_ at: Int, _ width: Int) throws -> UInt64 {
        guard at >= 0, width <= 8, at + width <= bytes.count else {
            throw ArchiveFormatError("object runs past the end of the file")
        }
        var v: UInt64 = 0
        for i in 0..<width { v = v << 8 | UInt64(bytes[bytes.startIndex + at + i]) }
        return v
    }

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
            guard value < UInt64(bytes.count) else { throw ArchiveFormatError("object \(ref) is longer than the file") }
            count = Int(value)
            start += 1 + width
        }
        return (type, count, start)
    }

    private func refs(_ start: Int, _ count: Int) throws -> [Int] {
        guard count <= bytes.count / refWidth else { throw ArchiveFormatError("container longer than the file") }
        return try (0..<count).map { i in
            let ref = try uint(start + i * refWidth, refWidth)
            guard ref < UInt64(objectCount) else { throw ArchiveFormatError("reference \(ref) out of range") }
            return Int(ref)
        }
    }

    private func need(_ ref: Int?, _ what: String) throws -> Int {
        guard let ref else { throw ArchiveFormatError("\(what) is missing") }
        return ref
    }

    func dictionary(_ ref: Int?, _ what: String) throws -> [String: Int] {
        let h = try header(try need(ref, what))
        guard h.type == 0xD else { throw ArchiveFormatError("\(what) is not a dictionary") }
        let keys = try refs(h.start, h.count)
        let values = try refs(h.start + h.count * refWidth, h.count)
        var result: [String: Int] = [:]
        for (k, v) in zip(keys, values) {
            result[try string(k, "a dictionary key in \(what)")] = v
        }
        return result
    }

    func array(_ ref: Int?, _ what: String) throws -> [Int] {
        let h = try header(try need(ref, what))
        guard h.type == 0xA else { throw ArchiveFormatError("\(what) is not an array") }
        return try refs(h.start, h.count)
    }

    func string(_ ref: Int?, _ what: String) throws -> String {
        let h = try header(try need(ref, what))
        switch h.type {
        case 0x5:
            guard h.start + h.count <= bytes.count else { throw ArchiveFormatError("\(what) runs past the end") }
            let slice = bytes[(bytes.startIndex + h.start)..<(bytes.startIndex + h.start + h.count)]
            guard slice.allSatisfy({ $0 < 0x80 }) else { throw ArchiveFormatError("\(what) is not ASCII") }
            return String(decoding: slice, as: UTF8.self)
        case 0x6:
            guard h.count <= bytes.count / 2, h.start + h.count * 2 <= bytes.count else {
                throw ArchiveFormatError("\(what) runs past the end")
            }
            let units = try (0..<h.count).map { UInt16(try uint(h.start + $0 * 2, 2)) }
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
        guard h.start + h.count <= bytes.count else { throw ArchiveFormatError("\(what) runs past the end") }
        return Data(bytes[(bytes.startIndex + h.start)..<(bytes.startIndex + h.start + h.count)])
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
        let marker = try byte(at)
        switch marker {
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
