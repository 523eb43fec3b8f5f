import Foundation

/// A parsed JSON value. Objects keep their keys in document order and the line
/// each value starts on, so manifest errors can name a line.
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number, kept as written so integers are checked exactly.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue, line: Int)], line: Int)

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a, _), .object(let b, _)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The member named `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members, _) = self {
            return members.last(where: { $0.key == key })?.value
        }
        return nil
    }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON syntax error at a line and column (both from 1).
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var reason: String
    public var description: String { "line \(line), column \(column): \(reason)" }
}

/// A strict RFC 8259 JSON parser over UTF-8 bytes, tracking lines.
public struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var line: Int
    private var lineStart = 0
    private var depth = 0
    private static let maxDepth = 256

    /// Creates a parser over `bytes`, numbering lines from `firstLine`.
    public init(bytes: [UInt8], firstLine: Int = 1) {
        self.bytes = bytes
        self.line = firstLine
    }

    /// Parses one complete JSON document.
    /// - Throws: ``JSONSyntaxError`` with the line and column of the first problem.
    public static func parse(_ bytes: [UInt8], firstLine: Int = 1) throws -> JSONValue {
        var parser = JSONParser(bytes: bytes, firstLine: firstLine)
        return try parser.parseDocument()
    }

    /// Parses a document that must be an array, calling `element` with each
    /// element and the line it starts on, without keeping them all.
    public static func forEachElement(
        of bytes: [UInt8], _ element: (JSONValue, Int) throws -> Void
    ) throws {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.peek() == UInt8(ascii: "[") else {
            throw parser.error("a .json manifest must be an array of objects")
        }
        parser.index += 1
        parser.skipWhitespace()
        if parser.peek() == UInt8(ascii: "]") {
            parser.index += 1
        } else {
            while true {
                parser.skipWhitespace()
                let startLine = parser.line
                let value = try parser.parseValue()
                try element(value, startLine)
                parser.skipWhitespace()
                guard let c = parser.peek() else { throw parser.error("unexpected end of input in array") }
                parser.index += 1
                if c == UInt8(ascii: "]") { break }
                if c != UInt8(ascii: ",") { throw parser.error("expected ',' or ']' in array") }
            }
        }
        parser.skipWhitespace()
        if parser.index != parser.bytes.count { throw parser.error("unexpected data after the array") }
    }

    mutating func parseDocument() throws -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index != bytes.count { throw error("unexpected data after the value") }
        return value
    }

    func error(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(line: line, column: index - lineStart + 1, reason: reason)
    }

    func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D: index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default: return
            }
        }
    }

    mutating func parseValue() throws -> JSONValue {
        guard let c = peek() else { throw error("unexpected end of input") }
        switch c {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    mutating func expectLiteral(_ word: String) throws {
        for b in word.utf8 {
            guard peek() == b else { throw error("invalid literal, expected '\(word)'") }
            index += 1
        }
    }

    mutating func enter() throws {
        depth += 1
        if depth > Self.maxDepth { throw error("nested deeper than \(Self.maxDepth) levels") }
    }

    mutating func parseObject() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        let startLine = line
        index += 1
        var members: [(key: String, value: JSONValue, line: Int)] = []
        // A name twice is refused: which of the two a reader takes is not defined.
        var names = Set<String>()
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return .object(members, line: startLine)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a string key in object") }
            let keyLine = line
            let key = try parseString()
            guard names.insert(key).inserted else { throw error("field \"\(key)\" appears twice in one object") }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after key \"\(key)\"") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            members.append((key, value, keyLine))
            skipWhitespace()
            guard let c = peek() else { throw error("unexpected end of input in object") }
            index += 1
            if c == UInt8(ascii: "}") { return .object(members, line: startLine) }
            if c != UInt8(ascii: ",") { throw error("expected ',' or '}' in object") }
        }
    }

    mutating func parseArray() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard let c = peek() else { throw error("unexpected end of input in array") }
            index += 1
            if c == UInt8(ascii: "]") { return .array(elements) }
            if c != UInt8(ascii: ",") { throw error("expected ',' or ']' in array") }
        }
    }

    mutating func parseNumber() throws -> String {
        let start = index
        switch JSONNumber.scan(bytes, from: start) {
        case .success(let end):
            index = end
            return String(decoding: bytes[start..<end], as: UTF8.self)
        case .failure(let problem):
            index = problem.at
            throw error(problem.reason)
        }
    }

    mutating func parseString() throws -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw error("unterminated string") }
            index += 1
            switch c {
            case UInt8(ascii: "\""):
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string")
                }
                return s
            case UInt8(ascii: "\\"):
                guard let e = peek() else { throw error("unterminated escape") }
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard peek() == UInt8(ascii: "\\") else { throw error("unpaired surrogate") }
                        index += 1
                        guard peek() == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                        index += 1
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            case 0x00..<0x20:
                if c == 0x0A { throw error("newline inside a string") }
                throw error("control character inside a string")
            default:
                out.append(c)
            }
        }
    }

    mutating func parseHex4() throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let c = peek() else { throw error("unterminated \\u escape") }
            index += 1
            let digit: UInt32
            switch c {
            case 0x30...0x39: digit = UInt32(c - 0x30)
            case 0x41...0x46: digit = UInt32(c - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(c - 0x61 + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value * 16 + digit
        }
        return value
    }
}

/// RFC 8259's number grammar, for the parser and the manifest's fast path alike.
enum JSONNumber {
    /// Why bytes are not a number, and where that shows.
    struct Problem: Error {
        var reason: String
        var at: Int
    }

    /// Where the number starting at `start` ends, or why it is not one.
    static func scan<Bytes: RandomAccessCollection>(_ bytes: Bytes, from start: Int) -> Result<Int, Problem>
    where Bytes.Element == UInt8, Bytes.Index == Int {
        var index = start
        func current() -> UInt8? { index < bytes.endIndex ? bytes[index] : nil }
        func digits() -> Int {
            let from = index
            while let c = current(), c >= 0x30, c <= 0x39 { index += 1 }
            return index - from
        }
        if current() == UInt8(ascii: "-") { index += 1 }
        guard let first = current(), first >= 0x30, first <= 0x39 else {
            return .failure(Problem(reason: "invalid number", at: index))
        }
        if first == 0x30 {
            index += 1
            if let c = current(), c >= 0x30, c <= 0x39 {
                return .failure(Problem(reason: "leading zero in number", at: index))
            }
        } else {
            _ = digits()
        }
        if current() == UInt8(ascii: ".") {
            index += 1
            if digits() == 0 { return .failure(Problem(reason: "invalid number: no digits after '.'", at: index)) }
        }
        if current() == UInt8(ascii: "e") || current() == UInt8(ascii: "E") {
            index += 1
            if current() == UInt8(ascii: "+") || current() == UInt8(ascii: "-") { index += 1 }
            if digits() == 0 { return .failure(Problem(reason: "invalid number: no digits in exponent", at: index)) }
        }
        return .success(index)
    }
}
