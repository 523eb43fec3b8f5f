/// A bounds-checked reader of ISO base media boxes (ISO/IEC 14496-12) over a
/// HEIF file's bytes: every read is checked against the box it is in, every
/// length against what is left, so a crafted file can only be refused.
struct HEIFReader {
    let bytes: UnsafeRawBufferPointer
    var at: Int
    let end: Int

    init(_ bytes: UnsafeRawBufferPointer, from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        at = start
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var remaining: Int { max(0, end - at) }

    /// Runs `body` with a reader over `bytes` (an item's or a property's own copy).
    static func reading<T>(_ bytes: [UInt8], _ body: (inout HEIFReader) throws(HEIFRefusal) -> T) throws(HEIFRefusal)
        -> T
    {
        var result: Result<T, HEIFRefusal> = .failure(HEIFRefusal("no bytes"))
        bytes.withUnsafeBytes { raw in
            var reader = HEIFReader(raw)
            result = Result { () throws(HEIFRefusal) in try body(&reader) }
        }
        return try result.get()
    }

    mutating func skip(_ count: Int) throws(HEIFRefusal) {
        guard count >= 0, count <= remaining else { throw HEIFRefusal("a box shorter than its fields") }
        at += count
    }

    /// A big-endian unsigned integer of `size` bytes (0, 1, 2, 4 or 8).
    mutating func uint(_ size: Int) throws(HEIFRefusal) -> Int {
        guard [0, 1, 2, 4, 8].contains(size) else { throw HEIFRefusal("a field of \(size) bytes") }
        guard size <= remaining else { throw HEIFRefusal("a box shorter than its fields") }
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(bytes[at + i]) }
        at += size
        guard value <= UInt64(Int32.max) * 4 else { throw HEIFRefusal("a field of \(value)") }
        return Int(value)
    }

    mutating func u8() throws(HEIFRefusal) -> Int { try uint(1) }
    mutating func u16() throws(HEIFRefusal) -> Int { try uint(2) }
    mutating func u32() throws(HEIFRefusal) -> Int { try uint(4) }

    /// A four-character code.
    mutating func fourCC() throws(HEIFRefusal) -> String {
        guard remaining >= 4 else { throw HEIFRefusal("a box shorter than its fields") }
        let code = String(decoding: (0..<4).map { bytes[at + $0] }, as: UTF8.self)
        at += 4
        return code
    }

    /// A NUL-terminated string (a URN, an item name), at most 256 bytes read.
    mutating func cString() throws(HEIFRefusal) -> String {
        var text: [UInt8] = []
        while at < end, bytes[at] != 0, text.count < 256 {
            text.append(bytes[at])
            at += 1
        }
        if at < end && bytes[at] == 0 { at += 1 }
        return String(decoding: text, as: UTF8.self)
    }

    /// The boxes from here to the end: (type, payload start, payload end).
    func boxes() throws(HEIFRefusal) -> [(type: String, start: Int, end: Int)] {
        var reader = self
        var found: [(type: String, start: Int, end: Int)] = []
        while reader.remaining >= 8 {
            let start = reader.at
            var size = try reader.u32()
            let type = try reader.fourCC()
            if size == 1 {
                size = try reader.uint(8)
            } else if size == 0 {
                size = reader.end - start
            }
            let header = reader.at - start
            guard size >= header, size <= reader.end - start else {
                throw HEIFRefusal("a '\(type)' box overruns its parent")
            }
            found.append((type, reader.at, start + size))
            reader.at = start + size
            // A crafted file of millions of empty boxes costs a refusal, not minutes.
            guard found.count <= 100_000 else { throw HEIFRefusal("over 100,000 boxes in one parent") }
        }
        return found
    }
}

/// Why the HEIC route does not take a file: it goes to libvips, this the reason
/// the profile names.
struct HEIFRefusal: Error, Equatable {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
