import Foundation

/// A manifest read and checked in full: items in order, plus the warnings it raised.
public struct Manifest: Sendable {
    /// The manifest file's path.
    public var path: String
    /// The items, in manifest order.
    public var items: [ManifestItem]
    /// One line per unknown field name, e.g. `items.jsonl:3: unknown field 'colour' ignored`.
    public var warnings: [String]
    /// The manifest file's modification time: the date of items without a photo.
    public var modificationDate: Date

    /// The fields a manifest may have.
    public static let knownFields: Set<String> = [
        "itemName", "serialNumber", "valueInDollars", "dateCreated", "itemKey", "image",
    ]

    /// Creates a manifest from items already checked.
    public init(path: String, items: [ManifestItem], warnings: [String] = [], modificationDate: Date) {
        self.path = path
        self.items = items
        self.warnings = warnings
        self.modificationDate = modificationDate
    }

    /// Reads a manifest by its extension: `.jsonl`/`.ndjson`, `.json` or `.csv`.
    /// - Throws: ``ThumbpipeError`` with exit status 66 when the file cannot be
    ///   read, 65 with `file:line: reason` when its content is wrong.
    public static func read(path: String) throws -> Manifest {
        let url = URL(fileURLWithPath: path)
        let name = url.lastPathComponent
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ThumbpipeError(.noInput, "\(path): cannot open manifest: \(ThumbpipeError.describe(error))")
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let mtime = (attributes?[.modificationDate] as? Date) ?? Date(timeIntervalSince1970: 0)
        var manifest = try parse(
            [UInt8](data), fileName: name, folder: url.deletingLastPathComponent().path, type: url.pathExtension)
        manifest.path = path
        manifest.modificationDate = mtime
        return manifest
    }

    /// Parses manifest bytes of a type (`jsonl`, `ndjson`, `json`, `csv`), resolving
    /// image paths against `folder`.
    /// - Throws: ``ThumbpipeError`` (65) with `fileName:line: reason`.
    public static func parse(_ bytes: [UInt8], fileName: String, folder: String, type: String) throws -> Manifest {
        var builder = ManifestBuilder(fileName: fileName, folder: folder)
        switch type.lowercased() {
        case "jsonl", "ndjson": try readJSONLines(bytes, into: &builder)
        case "json": try readJSONArray(bytes, into: &builder)
        case "csv": try readCSV(bytes, into: &builder)
        default:
            throw ThumbpipeError(
                .dataError, "\(fileName): unknown manifest type '.\(type)' (use .jsonl, .ndjson, .json or .csv)")
        }
        return Manifest(
            path: fileName, items: builder.items, warnings: builder.warnings,
            modificationDate: Date(timeIntervalSince1970: 0))
    }

    static func readJSONLines(_ bytes: [UInt8], into builder: inout ManifestBuilder) throws {
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            lineNumber += 1
            let line = bytes[start..<end]
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            let value: JSONValue
            do {
                value = try JSONParser.parse(Array(line), firstLine: lineNumber)
            } catch let error as JSONSyntaxError {
                throw ThumbpipeError.data(
                    builder.fileName, lineNumber, "invalid JSON: \(error.reason) (column \(error.column))")
            }
            try builder.add(json: value, line: lineNumber)
        }
    }

    static func readJSONArray(_ bytes: [UInt8], into builder: inout ManifestBuilder) throws {
        do {
            try JSONParser.forEachElement(of: bytes) { value, line in
                try builder.add(json: value, line: line)
            }
        } catch let error as JSONSyntaxError {
            throw ThumbpipeError.data(
                builder.fileName, error.line, "invalid JSON: \(error.reason) (column \(error.column))")
        }
    }

    static func readCSV(_ bytes: [UInt8], into builder: inout ManifestBuilder) throws {
        var header: [String]? = nil
        do {
            try CSVReader.forEachRecord(bytes) { fields, line in
                guard let columns = header else {
                    let names = fields.map { $0.trimmingCharacters(in: .whitespaces) }
                    if let duplicate = Dictionary(grouping: names, by: { $0 }).first(where: { $0.value.count > 1 })?.key
                    {
                        throw ThumbpipeError.data(
                            builder.fileName, line, "column '\(duplicate)' appears twice in the header")
                    }
                    header = names
                    return
                }
                guard fields.count == columns.count else {
                    throw ThumbpipeError.data(
                        builder.fileName, line, "row has \(fields.count) fields, the header has \(columns.count)")
                }
                try builder.add(csv: Array(zip(columns, fields)), line: line)
            }
        } catch let error as CSVReader.SyntaxError {
            throw ThumbpipeError.data(builder.fileName, error.line, error.reason)
        }
        if header == nil {
            throw ThumbpipeError.data(builder.fileName, 1, "a .csv manifest needs a header row")
        }
    }
}

/// Turns manifest records into checked ``ManifestItem``s, whatever the format.
struct ManifestBuilder {
    let fileName: String
    let folder: String
    var items: [ManifestItem] = []
    var warnings: [String] = []
    private var keyLines: [String: Int] = [:]
    private var warnedFields: Set<String> = []

    init(fileName: String, folder: String) {
        self.fileName = fileName
        self.folder = folder
    }

    private func fail(_ line: Int, _ reason: String) -> ThumbpipeError {
        .data(fileName, line, reason)
    }

    mutating func add(json value: JSONValue, line: Int) throws {
        guard case .object(let members, _) = value else {
            throw fail(line, "expected an object, found \(value.typeName)")
        }
        var fields = RawFields()
        for member in members {
            if case .null = member.value { continue }
            fields.values[member.key] = member.value
        }
        try add(fields, line: line)
    }

    mutating func add(csv pairs: [(String, String)], line: Int) throws {
        var fields = RawFields(fromCSV: true)
        for (name, text) in pairs where !text.isEmpty {
            fields.values[name] = .string(text)
        }
        try add(fields, line: line)
    }

    struct RawFields {
        var values: [String: JSONValue] = [:]
        var fromCSV = false
    }

    private mutating func add(_ fields: RawFields, line: Int) throws {
        for name in fields.values.keys.sorted() where !Manifest.knownFields.contains(name) {
            if warnedFields.insert(name).inserted {
                warnings.append("\(fileName):\(line): unknown field '\(name)' ignored")
            }
        }
        func string(_ name: String) throws -> String? {
            guard let value = fields.values[name] else { return nil }
            guard case .string(let s) = value else {
                throw fail(line, "\(name) must be a string, found \(value.typeName)")
            }
            return s
        }
        guard let name = try string("itemName") else {
            throw fail(line, "itemName is required")
        }
        let serial = try string("serialNumber") ?? ""
        var dollars: Int32 = 0
        if let value = fields.values["valueInDollars"] {
            let text: String
            switch value {
            case .number(let n): text = n
            case .string(let s) where fields.fromCSV: text = s.trimmingCharacters(in: .whitespaces)
            default: throw fail(line, "valueInDollars must be an integer, found \(value.typeName)")
            }
            guard let parsed = Self.integer(text) else {
                throw fail(line, "valueInDollars must be a whole number, found '\(text)'")
            }
            guard let fitted = Int32(exactly: parsed) else {
                throw fail(line, "valueInDollars \(text) is out of range (\(Int32.min)...\(Int32.max))")
            }
            dollars = fitted
        }
        var date: Date? = nil
        if let text = try string("dateCreated") {
            guard let parsed = ISO8601.parse(text) else {
                throw fail(line, "dateCreated '\(text)' is not an ISO 8601 date or date-time")
            }
            date = parsed
        }
        let image = try string("image")
        if let image, image.isEmpty || image.utf8.contains(0) {
            throw fail(line, "image must be a non-empty path without NUL bytes")
        }
        let key = try string("itemKey") ?? ManifestItem.defaultKey(image: image, itemName: name)
        guard ManifestItem.isSafeKey(key) else {
            let shown = key.utf8.count > 40 ? String(key.prefix(40)) + "…" : key
            throw fail(
                line,
                "itemKey '\(shown.replacingOccurrences(of: "\u{0}", with: "\\0"))' is not a safe file name (use 1-255 of A-Z a-z 0-9 . _ -, not starting with . _ or -)"
            )
        }
        if let first = keyLines[key] {
            throw fail(line, "itemKey '\(key)' is used twice, on lines \(first) and \(line)")
        }
        keyLines[key] = line
        let resolved = image.map { $0.hasPrefix("/") ? $0 : folder + "/" + $0 }
        items.append(
            ManifestItem(
                line: line, itemName: name, serialNumber: serial, valueInDollars: dollars,
                dateCreated: date, itemKey: key, image: image, imagePath: resolved))
    }

    /// A JSON/CSV integer: optional sign, digits, optionally `.0…` or an exponent that keeps it whole.
    static func integer(_ text: String) -> Int64? {
        if let exact = Int64(text) { return exact }
        guard let value = Double(text), value.isFinite, value == value.rounded(),
            abs(value) < 9.2e18
        else { return nil }
        return Int64(value)
    }
}
