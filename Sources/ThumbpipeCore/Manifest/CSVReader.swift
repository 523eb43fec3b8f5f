/// An RFC 4180 CSV reader: quoted fields may hold commas, quotes (`""`) and newlines.
enum CSVReader {
    struct SyntaxError: Error {
        var line: Int
        var reason: String
    }

    /// Calls `record` with each record's fields and the line it starts on.
    static func forEachRecord(_ bytes: [UInt8], _ record: ([String], Int) throws -> Void) throws {
        var i = 0
        var line = 1
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
        while i < bytes.count {
            let startLine = line
            var fields: [String] = []
            var field: [UInt8] = []
            var endOfRecord = false
            func finishField() throws {
                guard let s = String(validating: field, as: UTF8.self) else {
                    throw SyntaxError(line: line, reason: "invalid UTF-8")
                }
                fields.append(s)
                field.removeAll(keepingCapacity: true)
            }
            while !endOfRecord {
                if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
                    try quoted(bytes, at: &i, line: &line, startLine: startLine, into: &field)
                    if i < bytes.count, ![UInt8(ascii: ","), 0x0A, 0x0D].contains(bytes[i]) {
                        throw SyntaxError(line: line, reason: "unexpected character after a closing quote")
                    }
                }
                while i < bytes.count, bytes[i] != UInt8(ascii: ","), bytes[i] != 0x0A {
                    if bytes[i] == UInt8(ascii: "\"") {
                        throw SyntaxError(line: line, reason: "a quote inside an unquoted field")
                    }
                    if !(bytes[i] == 0x0D && (i + 1 == bytes.count || bytes[i + 1] == 0x0A)) {
                        field.append(bytes[i])
                    }
                    i += 1
                }
                try finishField()
                if i < bytes.count, bytes[i] == UInt8(ascii: ",") {
                    i += 1
                    if i == bytes.count { fields.append(""); endOfRecord = true }
                } else {
                    if i < bytes.count { i += 1 }
                    line += 1
                    endOfRecord = true
                }
            }
            if fields == [""] { continue }
            try record(fields, startLine)
        }
    }

    /// A quoted field's content, from its opening quote at `i` to past its closing
    /// one (`""` is a quote; newlines inside count lines).
    private static func quoted(
        _ bytes: [UInt8], at i: inout Int, line: inout Int, startLine: Int, into field: inout [UInt8]
    ) throws {
        i += 1
        while true {
            guard i < bytes.count else { throw SyntaxError(line: startLine, reason: "unterminated quoted field") }
            let c = bytes[i]
            i += 1
            if c == UInt8(ascii: "\"") {
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return }
                field.append(c)
                i += 1
            } else {
                if c == 0x0A { line += 1 }
                field.append(c)
            }
        }
    }
}
