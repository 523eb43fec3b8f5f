import Foundation

/// Splits bytes that arrive in chunks into lines, numbering them from 1. A line
/// longer than ``maxLineBytes`` ends the reading with 65 at that line: a manifest
/// line holds one item, and a file without newlines (`/dev/zero`, a binary file
/// named `.jsonl`) must not be buffered whole.
struct LineReader {
    /// The longest line a manifest may have: 1 MiB.
    static let maxLineBytes = 1 << 20
    let fileName: String
    private var carried: [UInt8] = []
    private var lineNumber = 0

    init(fileName: String) { self.fileName = fileName }

    private func tooLong() -> ThumbpipeError {
        .data(
            fileName, lineNumber + 1,
            "line longer than \(Self.maxLineBytes / 1_048_576) MiB (one item a line; is this a JSON Lines manifest?)")
    }

    /// Calls `body` with each complete line in what came so far; keeps the incomplete tail.
    mutating func feed(
        _ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, Int) throws -> Void
    ) throws {
        guard let base = bytes.baseAddress else { return }
        var start = 0
        while start < bytes.count {
            guard let found = memchr(base + start, 0x0A, bytes.count - start) else {
                guard carried.count + bytes.count - start <= Self.maxLineBytes else { throw tooLong() }
                carried.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
                return
            }
            let end = UnsafeRawPointer(found) - base
            guard carried.count + end - start <= Self.maxLineBytes else { throw tooLong() }
            lineNumber += 1
            if carried.isEmpty {
                try body(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), lineNumber)
            } else {
                carried.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                try carried.withUnsafeBytes { try body($0, lineNumber) }
                carried.removeAll(keepingCapacity: true)
            }
            start = end + 1
        }
    }

    /// Calls `body` with the last line when it has no newline.
    mutating func finish(_ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        guard !carried.isEmpty else { return }
        lineNumber += 1
        try carried.withUnsafeBytes { try body($0, lineNumber) }
        carried.removeAll()
    }
}
