import Foundation

/// A manifest read and checked in full: items in order (packed, see ``ItemList``), plus the warnings it raised.
public struct Manifest: Sendable {
    /// The manifest file's path.
    public var path: String
    /// The items, in manifest order.
    public var items: ItemList {
        didSet { cachedKeyIndex = nil }
    }
    /// One line per unknown field name, e.g. `items.jsonl:3: unknown field 'colour' ignored`.
    public var warnings: [String]
    /// The manifest file's modification time: the date of items without a photo.
    public var modificationDate: Date
    /// The folder its image paths are relative to (the manifest's own folder, or the
    /// folder a folder run scans), absolute; "" when unknown.
    public var folder = ""
    /// The items' keys by hash, when reading the manifest already made it.
    private var cachedKeyIndex: KeyIndex?

    /// Creates a manifest from items already checked.
    public init(path: String, items: [ManifestItem], warnings: [String] = [], modificationDate: Date) {
        self.init(path: path, items: ItemList(items), warnings: warnings, modificationDate: modificationDate)
    }

    /// Creates a manifest from packed items already checked.
    public init(path: String, items: ItemList, warnings: [String] = [], modificationDate: Date) {
        self.path = path
        self.items = items
        self.warnings = warnings
        self.modificationDate = modificationDate
    }

    /// The items' keys by hash, to find an item by key.
    var keyIndex: KeyIndex { cachedKeyIndex ?? KeyIndex(items) }

    /// Reads a manifest by its extension: `.jsonl`/`.ndjson`, `.json` or `.csv`.
    /// A JSON Lines manifest is read in chunks, never whole.
    /// - Throws: ``ThumbpipeError`` with exit status 66 when the file cannot be
    ///   read, 65 with `file:line: reason` when its content is wrong.
    public static func read(path: String) throws -> Manifest {
        let url = URL(fileURLWithPath: path)
        let name = url.lastPathComponent
        let type = url.pathExtension.lowercased()
        let cannotOpen = { (reason: String) in
            ThumbpipeError(.noInput, "\(path): cannot open manifest: \(reason)")
        }
        let info = FileInfo(path: path)
        let mtime = info?.referenceModificationDate ?? Date(timeIntervalSince1970: 0)
        // A device, a socket (/dev/null, /dev/tty): not a manifest file, whatever its name.
        if let info, info.kind == .other, type.isEmpty || !["jsonl", "ndjson"].contains(type) {
            throw ThumbpipeError(
                .noInput,
                "\(path) is not a manifest file (a device or socket): name a .jsonl, .ndjson, .json or .csv file, a folder of photos, or - for a JSONL manifest on standard input"
            )
        }
        if !["jsonl", "ndjson", "json", "csv"].contains(type), info?.kind == .regular,
            ImageFormat.sniff(Decode.head(path)) != nil
        {
            let folder = url.deletingLastPathComponent().relativePath
            throw ThumbpipeError(
                .usage,
                "\(path) is a photo, not a manifest: run takes a folder of photos, a manifest (.jsonl, .json, .csv) or an items.archive; did you mean: thumbpipe run \(folder.isEmpty ? "." : folder)"
            )
        }
        var manifest: Manifest
        if type == "jsonl" || type == "ndjson" {
            let descriptor: FileDescriptor
            do { descriptor = try FileDescriptor.open(path, O_RDONLY) } catch { throw cannotOpen(error.description) }
            manifest = try readJSONLines(
                descriptor: descriptor, fileName: name, folder: url.deletingLastPathComponent().path)
        } else {
            let bytes: [UInt8]
            do {
                bytes = try FileDescriptor.open(path, O_RDONLY).readToEnd()
            } catch {
                throw cannotOpen(error.rawValue == EISDIR ? "is a directory" : error.description)
            }
            manifest = try parse(
                bytes, fileName: name, folder: url.deletingLastPathComponent().path, type: type)
        }
        manifest.path = path
        manifest.modificationDate = mtime
        return manifest
    }

    /// Reads a JSON Lines manifest from an open descriptor (a file or standard
    /// input) in chunks, resolving image paths against `folder`.
    /// - Throws: ``ThumbpipeError`` (66) when reading fails, (65) with `fileName:line: reason`.
    public static func readJSONLines(descriptor: FileDescriptor, fileName: String, folder: String) throws -> Manifest {
        try build(fileName: fileName, folder: folder) { builder in
            var lines = LineReader(fileName: fileName)
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n: Int
                do { n = try descriptor.read(into: &chunk) } catch {
                    throw ThumbpipeError(.noInput, "\(fileName): cannot read manifest: \(error)")
                }
                if n == 0 { break }
                try chunk.withUnsafeBytes { raw in
                    try lines.feed(UnsafeRawBufferPointer(rebasing: raw[0..<n])) {
                        try builder.add(jsonLine: $0, line: $1)
                    }
                }
            }
            try lines.finish { try builder.add(jsonLine: $0, line: $1) }
        }
    }

    /// Parses manifest bytes of a type (`jsonl`, `ndjson`, `json`, `csv`), resolving
    /// image paths against `folder`.
    /// - Throws: ``ThumbpipeError`` (65) with `fileName:line: reason`.
    public static func parse(_ bytes: [UInt8], fileName: String, folder: String, type: String) throws -> Manifest {
        try build(fileName: fileName, folder: folder) { builder in
            switch type.lowercased() {
            case "jsonl", "ndjson":
                var lines = LineReader(fileName: fileName)
                try bytes.withUnsafeBytes { raw in
                    try lines.feed(raw) { try builder.add(jsonLine: $0, line: $1) }
                }
                try lines.finish { try builder.add(jsonLine: $0, line: $1) }
            // A UTF-8 byte-order mark (Windows editors write one) opens the file, not the JSON.
            case "json":
                try readJSONArray(
                    Array(bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]), into: &builder)
            case "csv": try readCSV(bytes, into: &builder)
            default:
                throw ThumbpipeError(
                    .dataError, "\(fileName): unknown manifest type '.\(type)' (use .jsonl, .ndjson, .json or .csv)")
            }
        }
    }

    /// Runs `reading` over a new builder, then checks keys are used once. A key
    /// used twice before a line that is wrong is reported first, as reading
    /// line by line would have found it first.
    private static func build(
        fileName: String, folder: String, _ reading: (inout ManifestBuilder) throws -> Void
    ) throws -> Manifest {
        var builder = ManifestBuilder(fileName: fileName, folder: folder)
        do {
            try reading(&builder)
        } catch {
            _ = try builder.checkedItems()
            throw error
        }
        let (items, keyIndex) = try builder.checkedItems()
        var manifest = Manifest(
            path: fileName, items: items, warnings: builder.warnings, modificationDate: Date(timeIntervalSince1970: 0))
        manifest.cachedKeyIndex = keyIndex
        manifest.folder = FolderScan.absolute(folder.isEmpty ? "." : folder)
        return manifest
    }

    /// A source path as thumbpipe shows it everywhere (dry run, summary, `--log`,
    /// report): relative to ``folder`` when it lies inside it, as the manifest names
    /// its photos; absolute when it lies outside (or the folder is unknown).
    public func shown(_ path: String) -> String {
        guard !folder.isEmpty, !path.isEmpty else { return path }
        let absolute = FolderScan.absolute(path)
        let prefix = folder == "/" ? "/" : folder + "/"
        guard absolute.hasPrefix(prefix) else { return absolute }
        return String(absolute.dropFirst(prefix.count))
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

/// Turns manifest records into checked, packed items, whatever the format.
struct ManifestBuilder {
    let fileName: String
    let folder: String
    var items: ItemList.Builder
    var warnings: [String] = []
    private var warnedFields: Set<String> = []

    init(fileName: String, folder: String) {
        self.fileName = fileName
        self.folder = folder
        items = ItemList.Builder(folder: folder)
    }

    private func fail(_ line: Int, _ reason: String) -> ThumbpipeError {
        .data(fileName, line, reason)
    }

    /// One line of a JSON Lines manifest; blank lines are skipped.
    mutating func add(jsonLine line1: UnsafeRawBufferPointer, line: Int) throws {
        var bytes = line1
        // A UTF-8 byte-order mark (Windows editors write one) opens the file, not the record.
        if line == 1 && bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            bytes = UnsafeRawBufferPointer(rebasing: bytes[3...])
        }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        if let fields = FlatJSONLine.scan(bytes) {
            try add(fields, line: line)
            return
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(bytes), firstLine: line)
        } catch let error as JSONSyntaxError {
            throw ThumbpipeError.data(fileName, line, "invalid JSON: \(error.reason) (column \(error.column))")
        }
        try add(json: value, line: line)
    }

    mutating func add(json value: JSONValue, line: Int) throws {
        guard case .object(let members, _) = value else {
            throw fail(line, "expected an object, found \(value.typeName)")
        }
        var fields = ManifestFields()
        for member in members { fields.set(member.key, member.value) }
        try add(fields, line: line)
    }

    mutating func add(csv pairs: [(String, String)], line: Int) throws {
        var fields = ManifestFields()
        fields.fromCSV = true
        for (name, text) in pairs where !text.isEmpty { fields.set(name, .string(text)) }
        try add(fields, line: line)
    }

    /// The items so far and their key index (the plan uses it too).
    /// - Throws: ``ThumbpipeError`` (65) for the first key used twice, in manifest order.
    func checkedItems() throws -> (ItemList, KeyIndex) {
        let list = ItemList(builder: items)
        let index = KeyIndex(list)
        var found: (first: Int, second: Int)? = nil
        for run in index.equalHashRuns() {
            for (i, a) in run.enumerated() {
                for b in run[(i + 1)...] where list.itemKey(at: a) == list.itemKey(at: b) {
                    if found == nil || b < found!.second { found = (a, b) }
                }
            }
        }
        guard let found else { return (list, index) }
        throw fail(
            list.lines(found.second),
            "itemKey '\(list.itemKey(at: found.first))' is used twice, on lines \(list.lines(found.first)) and \(list.lines(found.second))"
        )
    }

    mutating func add(_ fields: ManifestFields, line: Int) throws {
        if !fields.unknown.isEmpty {
            for name in Set(fields.unknown).sorted() where warnedFields.insert(name).inserted {
                warnings.append("\(fileName):\(line): unknown field '\(name)' ignored")
            }
        }
        func string(_ name: ManifestFields.Name) throws -> String? {
            guard let value = fields[name] else { return nil }
            guard case .string(let s) = value else {
                throw fail(line, "\(name.text) must be a string, found \(value.typeName)")
            }
            return s
        }
        guard let name = try string(.itemName) else {
            let seen = Set(fields.unknown).sorted()
            let likely = seen.first { ["name", "title", "item", "itemname", "item_name"].contains($0.lowercased()) }
            throw fail(
                line,
                "itemName is required"
                    + (likely.map { "; found '\($0)': rename it to itemName" }
                        ?? (seen.isEmpty ? "" : " (found \(seen.map { "'\($0)'" }.joined(separator: ", ")))")))
        }
        let serial = try string(.serialNumber) ?? ""
        let dollars = try fields[.valueInDollars].map { try self.dollars($0, fromCSV: fields.fromCSV, line: line) } ?? 0
        var date: Date? = nil
        if let text = try string(.dateCreated) {
            guard let parsed = ISO8601.parse(text) else {
                throw fail(line, "dateCreated '\(text)' is not an ISO 8601 date or date-time")
            }
            date = parsed
        }
        let image = try string(.image)
        if let image, image.isEmpty || image.utf8.contains(0) {
            throw fail(line, "image must be a non-empty path without NUL bytes")
        }
        let key = try string(.itemKey) ?? ManifestItem.defaultKey(image: image, itemName: name)
        guard ManifestItem.isSafeKey(key) else {
            let shown = key.utf8.count > 40 ? String(key.prefix(40)) + "…" : key
            throw fail(
                line,
                "itemKey '\(shown.replacingOccurrences(of: "\u{0}", with: "\\0"))' is not a safe file name (use 1-255 of A-Z a-z 0-9 . _ -, not starting with . _ or -)"
            )
        }
        let resolved = image.map { ItemList.Builder.resolve($0, in: folder) }
        items.append(
            ManifestItem(
                line: line, itemName: name, serialNumber: serial, valueInDollars: dollars,
                dateCreated: date, itemKey: key, image: image, imagePath: resolved))
    }

    /// A `valueInDollars` value: a whole number that fits 32 bits (a CSV cell's text too).
    private func dollars(_ value: JSONValue, fromCSV: Bool, line: Int) throws -> Int32 {
        let text: String
        switch value {
        case .number(let n): text = n
        case .string(let s) where fromCSV: text = s.trimmingCharacters(in: .whitespaces)
        default: throw fail(line, "valueInDollars must be an integer, found \(value.typeName)")
        }
        guard let parsed = Self.integer(text) else {
            throw fail(line, "valueInDollars must be a whole number, found '\(text)'")
        }
        guard let fitted = Int32(exactly: parsed) else {
            throw fail(line, "valueInDollars \(text) is out of range (\(Int32.min)...\(Int32.max))")
        }
        return fitted
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
