import Foundation

/// The fields of one manifest record: the six a manifest may have, by slot,
/// plus the names of any others (warned about once each).
struct ManifestFields {
    enum Name: Int, CaseIterable {
        case itemName, serialNumber, valueInDollars, dateCreated, itemKey, image
        /// The folder (or album) `scan` found the photo in: kept in the manifest for
        /// its reader, not archived (BNRItem has no such field).
        case folder
        /// The photo's description, as `scan` read it (MWG): kept for the manifest's
        /// reader, not archived.
        case description
        /// Where the library places the photo (Takeout's `geoData`), as `scan`
        /// read it: kept for the manifest's reader, not archived.
        case latitude, longitude

        var text: String {
            switch self {
            case .itemName: "itemName"
            case .serialNumber: "serialNumber"
            case .valueInDollars: "valueInDollars"
            case .dateCreated: "dateCreated"
            case .itemKey: "itemKey"
            case .image: "image"
            case .folder: "folder"
            case .description: "description"
            case .latitude: "latitude"
            case .longitude: "longitude"
            }
        }

        init?(_ text: String) {
            guard let name = Name.allCases.first(where: { $0.text == text }) else { return nil }
            self = name
        }

        /// The field a key's UTF-8 bytes name, without making a string of them.
        init?(bytes: UnsafeRawBufferPointer) {
            for name in Name.allCases where Self.utf8[name.rawValue].count == bytes.count {
                if Self.utf8[name.rawValue].elementsEqual(bytes) {
                    self = name
                    return
                }
            }
            return nil
        }

        private static let utf8: [[UInt8]] = allCases.map { Array($0.text.utf8) }
    }

    private var values: [JSONValue?] = Array(repeating: nil, count: Name.allCases.count)
    /// Names of fields a manifest does not have, in the order they came.
    var unknown: [String] = []
    /// Whether the record came from a CSV row (where every value is text).
    var fromCSV = false

    subscript(name: Name) -> JSONValue? {
        get { values[name.rawValue] }
        set { values[name.rawValue] = newValue }
    }

    /// Sets a field by name; `null` leaves it unset, as if absent (and unwarned).
    mutating func set(_ name: String, _ value: JSONValue) {
        guard value != .null else { return }
        if let known = Name(name) {
            self[known] = value
        } else {
            unknown.append(name)
        }
    }
}

/// The fast path for JSON Lines manifests: a line that is one flat object of
/// strings without escapes, numbers, booleans and nulls (what every manifest
/// writer produces) is read straight from its bytes. Anything else, valid or
/// not, is left to ``JSONParser``, which alone reports errors.
enum FlatJSONLine {
    /// The fields of `line`, or nil when the full parser must read it.
    static func scan(_ line: UnsafeRawBufferPointer) -> ManifestFields? {
        var scanner = Scanner(bytes: line)
        return scanner.object()
    }

    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0D {
                index += 1
            }
        }

        mutating func object() -> ManifestFields? {
            var fields = ManifestFields()
            // Known names seen, null or not: a name twice is the full parser's to report.
            var seen: UInt8 = 0
            skipWhitespace()
            guard current == UInt8(ascii: "{") else { return nil }
            index += 1
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                index += 1
                return end() ? fields : nil
            }
            while true {
                skipWhitespace()
                guard let key = stringBytes() else { return nil }
                skipWhitespace()
                guard current == UInt8(ascii: ":") else { return nil }
                index += 1
                skipWhitespace()
                guard let value = value() else { return nil }
                if let name = ManifestFields.Name(bytes: key) {
                    guard seen & (1 << name.rawValue) == 0 else { return nil }
                    seen |= 1 << name.rawValue
                    if value != .null { fields[name] = value }  // null: absent, as the full path has it
                } else {
                    // An unknown name is checked even with a null value: invalid UTF-8 in it is
                    // the full parser's to report (found by the jsonl fuzz target).
                    guard let text = Self.text(key) else { return nil }
                    if value != .null {
                        guard !fields.unknown.contains(text) else { return nil }
                        fields.unknown.append(text)
                    }
                }
                skipWhitespace()
                guard let c = current else { return nil }
                index += 1
                if c == UInt8(ascii: "}") { return end() ? fields : nil }
                guard c == UInt8(ascii: ",") else { return nil }
            }
        }

        mutating func end() -> Bool {
            skipWhitespace()
            return index == bytes.count
        }

        /// The bytes of a string without escapes or control characters, the
        /// quotes excluded; nil for anything else.
        mutating func stringBytes() -> UnsafeRawBufferPointer? {
            guard current == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            while index < bytes.count {
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    index += 1
                    return UnsafeRawBufferPointer(rebasing: bytes[start..<index - 1])
                }
                if c == UInt8(ascii: "\\") || c < 0x20 { return nil }
                index += 1
            }
            return nil
        }

        mutating func value() -> JSONValue? {
            guard let c = current else { return nil }
            switch c {
            case UInt8(ascii: "\""):
                guard let raw = stringBytes(), let text = Self.text(raw) else { return nil }
                return .string(text)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return number()
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return nil
            }
        }

        /// The bytes as a string when they are valid UTF-8 (ASCII, the usual case, checked first).
        static func text(_ bytes: UnsafeRawBufferPointer) -> String? {
            if !bytes.contains(where: { $0 >= 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
            return String(validating: bytes, as: UTF8.self)
        }

        mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count,
                UnsafeRawBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                    UnsafeRawBufferPointer(start: word.utf8Start, count: count))
            else { return nil }
            index += count
            return value
        }

        /// A number as RFC 8259 writes one, kept as text.
        mutating func number() -> JSONValue? {
            guard case .success(let end) = JSONNumber.scan(bytes, from: index) else { return nil }
            defer { index = end }
            return .number(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[index..<end]), as: UTF8.self))
        }
    }
}
