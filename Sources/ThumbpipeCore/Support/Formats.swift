import CZlib
import Foundation

/// ISO 8601 text for dates, UTC, whole seconds unless the date has a fraction.
public enum ISO8601Format {
    /// `2024-05-01T09:30:00Z`.
    public static func string(_ date: Date) -> String {
        // Rounded to the millisecond first, so .9999 carries into the next second;
        // clamped to ±100,000 years (what no photo has), so no date traps the
        // conversions below (an item's date is refused long before, on reading).
        let bound = 3.2e15
        let since1970 = date.timeIntervalSince1970 * 1000
        let milliseconds = since1970.isNaN ? 0 : min(bound, max(-bound, since1970)).rounded()
        let seconds = (milliseconds / 1000).rounded(.down)
        var days = Int(seconds / 86400)
        var rest = Int(seconds) - days * 86400
        if rest < 0 {
            rest += 86400
            days -= 1
        }
        let (y, m, d) = civil(fromDays: days)
        let fraction = Int(milliseconds - seconds * 1000)
        var text = "\(String(y).leftPadded(to: 4))-\(String(m).leftPadded(to: 2))-\(String(d).leftPadded(to: 2))"
        text +=
            "T\(String(rest / 3600).leftPadded(to: 2)):\(String(rest / 60 % 60).leftPadded(to: 2)):\(String(rest % 60).leftPadded(to: 2))"
        if fraction > 0 { text += "." + String(fraction).leftPadded(to: 3) }
        return text + "Z"
    }

    static func civil(fromDays z0: Int) -> (Int, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}

/// Reads a PNG's header without decoding it.
public enum PNGInfo {
    /// The eight bytes every PNG starts with.
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Width and height from the IHDR chunk, or nil when `data` is not a PNG.
    public static func size(_ data: Data) -> (width: Int, height: Int)? {
        let bytes = [UInt8](data.prefix(33))
        guard bytes.count >= 24, bytes.starts(with: signature),
            bytes[12...15].elementsEqual(Array("IHDR".utf8))
        else { return nil }
        func be(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (be(16), be(20))
    }

    /// Bit depth and colour type from IHDR (8 and 6 for 8-bit RGBA).
    public static func format(_ data: Data) -> (bitDepth: Int, colourType: Int)? {
        let bytes = [UInt8](data.prefix(33))
        guard size(data) != nil, bytes.count >= 26 else { return nil }
        return (Int(bytes[24]), Int(bytes[25]))
    }

    /// Why `data` is not a thumbnail as thumbpipe encodes one, or nil when it is: a
    /// PNG whose IHDR says `width`×`height`, 8-bit RGBA, not interlaced; then only
    /// IDAT and ancillary chunks, every chunk's CRC right, ending with IEND at
    /// the last byte. It reads the chunks, not the pixels (no inflate): enough to
    /// tell a thumbnail thumbpipe stored from a truncated, bit-rotten or foreign
    /// blob, without decoding a PNG in the parent.
    public static func thumbnailProblem(_ data: Data, width: Int, height: Int) -> String? {
        data.withUnsafeBytes { thumbnailProblem($0, width: width, height: height) }
    }

    static func thumbnailProblem(_ bytes: UnsafeRawBufferPointer, width: Int, height: Int) -> String? {
        let walked: (chunks: [PNGChunks.Chunk], end: Int)
        switch PNGChunks.read(bytes) {
        case .success(let result): walked = result
        case .failure(let problem): return problem.description
        }
        func be32(_ at: Int) -> Int { PNGChunks.be32(bytes, at) }
        guard walked.chunks.first?.type == PNGChunks.ihdr else { return "no IHDR first" }
        var sawData = false
        for chunk in walked.chunks {
            let data = chunk.data.lowerBound
            switch chunk.type {
            case PNGChunks.ihdr:
                guard chunk.index == 0, chunk.data.count == 13 else { return "IHDR out of place" }
                let (w, h) = (be32(data), be32(data + 4))
                guard w == width, h == height else { return "\(w)×\(h) pixels, not \(width)×\(height)" }
                guard bytes[data + 8] == 8, bytes[data + 9] == 6 else { return "not 8-bit RGBA" }
                guard bytes[data + 10] == 0, bytes[data + 11] == 0, bytes[data + 12] == 0 else {
                    return "not a plain (non-interlaced) PNG"
                }
            case PNGChunks.idat:
                sawData = true
            case PNGChunks.iend:
                guard sawData else { return "no image data" }
                guard chunk.data.isEmpty, walked.end == bytes.count else { return "bytes after its end" }
            default:
                guard PNGChunks.isAncillary(chunk.type) else {
                    return "an unknown critical chunk '\(String(decoding: bytes[data - 4..<data], as: UTF8.self))'"
                }
            }
        }
        return nil
    }
}

/// A PNG's chunks, walked once for both of thumbpipe's readers of PNGs it did
/// not just write (``PNGInfo/thumbnailProblem(_:width:height:)`` and
/// ``PNGDecode``): the signature, then each chunk's length within the bytes and
/// its CRC right (zlib's `crc32`), up to IEND.
enum PNGChunks {
    static let ihdr = 0x4948_4452
    static let plte = 0x504C_5445
    static let trns = 0x7452_4E53
    static let idat = 0x4944_4154
    static let iend = 0x4945_4E44

    /// One chunk: its type, where its data lies in the bytes, its place (from 0).
    struct Chunk {
        let type: Int
        let data: Range<Int>
        let index: Int
    }

    /// Why the chunks could not be walked.
    enum Problem: Error, CustomStringConvertible {
        case notPNG
        /// Fewer than a chunk's 12 bytes left after `at`.
        case cutShort(at: Int)
        /// Chunk `chunk` (from 1) claims more bytes than there are.
        case cutShortIn(chunk: Int, claimed: Int)
        case badCRC(chunk: Int)

        var description: String {
            switch self {
            case .notPNG: return "not a PNG"
            case .cutShort(let at): return "cut short after \(at) bytes"
            case .cutShortIn(let chunk, let claimed): return "cut short in chunk \(chunk) (\(claimed) bytes claimed)"
            case .badCRC(let chunk): return "chunk \(chunk)'s CRC does not match"
            }
        }
    }

    /// A big-endian 32-bit number at `at`.
    static func be32(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> Int {
        (0..<4).reduce(0) { $0 << 8 | Int(bytes[at + $1]) }
    }

    /// Whether a chunk type is ancillary (a lower-case first letter): one a reader may skip.
    static func isAncillary(_ type: Int) -> Bool { type & 0x2000_0000 != 0 }

    /// Every chunk through IEND, and the offset just past IEND (bytes after it are the caller's to judge).
    static func read(_ bytes: UnsafeRawBufferPointer) -> Result<(chunks: [Chunk], end: Int), Problem> {
        guard bytes.count >= 8, bytes.prefix(8).elementsEqual(PNGInfo.signature) else { return .failure(.notPNG) }
        var chunks: [Chunk] = []
        var at = 8
        while true {
            guard bytes.count - at >= 12 else { return .failure(.cutShort(at: at)) }
            // 12 bytes of length, type and CRC around `length` bytes of data.
            let length = be32(bytes, at)
            guard length <= bytes.count - at - 12 else {
                return .failure(.cutShortIn(chunk: chunks.count + 1, claimed: length))
            }
            let crc = crc32(0, bytes.baseAddress.map { $0 + at + 4 }, UInt32(4 + length))
            guard crc == UInt(be32(bytes, at + 8 + length)) else { return .failure(.badCRC(chunk: chunks.count + 1)) }
            let chunk = Chunk(type: be32(bytes, at + 4), data: at + 8..<at + 8 + length, index: chunks.count)
            chunks.append(chunk)
            at = chunk.data.upperBound + 4
            if chunk.type == iend { return .success((chunks, at)) }
        }
    }
}
