import Foundation

/// An IPTC-IIM block, as JPEG's APP13 carries it inside Photoshop's image
/// resources (`Photoshop 3.0`, then `8BIM` resources: 0x0404 the IIM datasets,
/// 0x0425 the digest a tool that kept XMP in step wrote), or bare (TIFF).
/// Hostile input: every length is checked against what is left; nothing is
/// allocated beyond the block's own size.
struct IPTCBlock {
    /// The IIM datasets, in order: record, dataset number, bytes.
    private(set) var datasets: [(record: UInt8, number: UInt8, bytes: ArraySlice<UInt8>)] = []
    /// MD5 of the IIM bytes as they are (exiftool's CurrentIPTCDigest).
    private(set) var currentDigest: [UInt8]?
    /// The digest resource 0x0425, as the last XMP-aware tool wrote it (IPTCDigest).
    private(set) var storedDigest: [UInt8]?

    /// Reads a block. - Throws: a message for a warning when it is malformed.
    init(_ data: Data) throws(MetadataProblem) {
        let bytes = [UInt8](data)
        let header = Array("Photoshop 3.0\u{0}".utf8)
        if bytes.starts(with: header) {
            try readResources(bytes[header.count...])
        } else if bytes.starts(with: Array("8BIM".utf8)) {
            try readResources(bytes[...])
        } else if bytes.first == 0x1C {
            try readDatasets(bytes[...])
        } else {
            throw MetadataProblem("IPTC block in an unknown form")
        }
    }

    /// Photoshop's image resources: `8BIM`, id, a Pascal name padded to even, size, data padded to even.
    private mutating func readResources(_ bytes: ArraySlice<UInt8>) throws(MetadataProblem) {
        var i = bytes.startIndex
        while bytes.endIndex - i >= 12, bytes[i..<i + 4].elementsEqual("8BIM".utf8) {
            let id = Int(bytes[i + 4]) << 8 | Int(bytes[i + 5])
            let nameLength = Int(bytes[i + 6])
            var j = i + 6 + ((nameLength + 2) & ~1)
            guard bytes.endIndex - j >= 4 else { throw MetadataProblem("IPTC resource cut short") }
            let size = bytes[j..<j + 4].reduce(0) { $0 << 8 | Int($1) }
            j += 4
            guard size <= bytes.endIndex - j else { throw MetadataProblem("IPTC resource longer than its block") }
            let data = bytes[j..<j + size]
            if id == 0x0404 && currentDigest == nil {
                currentDigest = MD5.hash(data)
                try readDatasets(data)
            } else if id == 0x0425 && size == 16 {
                storedDigest = Array(data)
            }
            i = j + ((size + 1) & ~1)
            if i > bytes.endIndex { break }
        }
    }

    /// IIM datasets: 0x1C, record, number, a 2-byte size (or, with its high bit,
    /// the count of size bytes that follow), data. Padding zeros end the list.
    private mutating func readDatasets(_ bytes: ArraySlice<UInt8>) throws(MetadataProblem) {
        var i = bytes.startIndex
        while i < bytes.endIndex, bytes[i] == 0x1C {
            guard bytes.endIndex - i >= 5 else { throw MetadataProblem("IPTC dataset cut short") }
            let record = bytes[i + 1]
            let number = bytes[i + 2]
            var size = Int(bytes[i + 3]) << 8 | Int(bytes[i + 4])
            i += 5
            if size & 0x8000 != 0 {
                let count = size & 0x7FFF
                guard (1...4).contains(count), bytes.endIndex - i >= count else {
                    throw MetadataProblem("IPTC dataset with a bad extended size")
                }
                size = bytes[i..<i + count].reduce(0) { $0 << 8 | Int($1) }
                i += count
            }
            guard size <= bytes.endIndex - i else { throw MetadataProblem("IPTC dataset longer than its block") }
            datasets.append((record, number, bytes[i..<i + size]))
            i += size
        }
    }

    /// Whether the block declares UTF-8 (dataset 1:90 holds `ESC % G`).
    var declaresUTF8: Bool {
        datasets.contains { $0.record == 1 && $0.number == 90 && $0.bytes.elementsEqual([0x1B, 0x25, 0x47]) }
    }

    /// Dataset `2:number` as text: UTF-8 when declared or valid, else Latin-1.
    func text(_ number: UInt8) -> String? {
        guard let bytes = datasets.first(where: { $0.record == 2 && $0.number == number })?.bytes else { return nil }
        let trimmed = bytes.prefix { $0 != 0 }
        if declaresUTF8 || String(validating: trimmed, as: UTF8.self) != nil {
            return String(decoding: trimmed, as: UTF8.self)
        }
        return String(trimmed.map { Character(Unicode.Scalar($0)) })
    }

    /// Whether the XMP may be trusted over this block (MWG): no digest was
    /// stored, or the stored one is the block's own (the XMP was kept in step).
    var xmpInStep: Bool { storedDigest == nil || storedDigest == currentDigest }

    /// DateCreated (2:55, `CCYYMMDD`) with TimeCreated (2:60, `HHMMSS±HHMM`).
    var dateCreated: TakenTime? {
        guard let day = text(55), day.count == 8, day.allSatisfy(\.isASCIIDigit) else { return nil }
        var iso = "\(day.prefix(4))-\(day.dropFirst(4).prefix(2))-\(day.suffix(2))"
        if let time = text(60), time.count >= 6, time.prefix(6).allSatisfy(\.isASCIIDigit) {
            let t = Array(time)
            iso += "T\(String(t[0...1])):\(String(t[2...3])):\(String(t[4...5]))"
            if t.count == 11, "+-".contains(t[6]), t[7...10].allSatisfy(\.isASCIIDigit) {
                iso += "\(t[6])\(String(t[7...8])):\(String(t[9...10]))"
            }
        }
        return TakenTime.iso(iso)
    }
}
