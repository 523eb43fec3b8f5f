import Foundation

/// Encodes single objects of Apple's binary property list format (`bplist00`),
/// as CFBinaryPList lays them out: a marker byte (type in the high nibble,
/// size in the low), big-endian payloads, and references of a fixed width.
enum BinaryPlistEncoding {
    /// The bytes every binary plist starts with.
    static let header: [UInt8] = Array("bplist00".utf8)

    /// The smallest of 1, 2, 4 or 8 bytes that holds `value`.
    static func byteWidth(for value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }

    @inline(__always) static func appendBigEndian(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        // One append per byte: for one to eight bytes, cheaper than appending a buffer.
        @inline(__always) func byte(_ shift: UInt64) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
        switch width {
        case 1: byte(0)
        case 2:
            byte(8)
            byte(0)
        case 4:
            byte(24)
            byte(16)
            byte(8)
            byte(0)
        default:
            for shift in stride(from: UInt64(width - 1) * 8, through: 0, by: -8) { byte(shift) }
        }
    }

    /// A marker with a count: counts of 15 and more follow as an integer object.
    static func appendMarker(_ type: UInt8, count: Int, to out: inout [UInt8]) {
        if count < 15 {
            out.append(type << 4 | UInt8(count))
        } else {
            out.append(type << 4 | 0x0F)
            appendInteger(Int64(count), to: &out)
        }
    }

    /// An integer object: 1, 2 or 4 unsigned bytes, or 8 signed.
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        let width = value < 0 ? 8 : byteWidth(for: UInt64(value))
        out.append(0x10 | UInt8(width.trailingZeroBitCount))
        appendBigEndian(UInt64(bitPattern: value), width: width, to: &out)
    }

    /// A 64-bit real object.
    static func appendReal(_ value: Double, to out: inout [UInt8]) {
        out.append(0x23)
        appendBigEndian(value.bitPattern, width: 8, to: &out)
    }

    /// A string: ASCII as 0x5n, anything else as UTF-16 big-endian 0x6n.
    static func appendString(_ value: String, to out: inout [UInt8]) {
        let utf8 = value.utf8
        if utf8.allSatisfy({ $0 < 0x80 }) {
            appendMarker(0x5, count: utf8.count, to: &out)
            out.append(contentsOf: utf8)
        } else {
            let units = Array(value.utf16)
            appendMarker(0x6, count: units.count, to: &out)
            for unit in units {
                out.append(UInt8(unit >> 8))
                out.append(UInt8(unit & 0xFF))
            }
        }
    }

    /// The marker and length of a data object; the caller appends the bytes.
    static func appendDataHeader(count: Int, to out: inout [UInt8]) {
        appendMarker(0x4, count: count, to: &out)
    }

    /// A UID object (NSKeyedArchiver's reference into `$objects`).
    static func appendUID(_ value: UInt64, to out: inout [UInt8]) {
        let width = byteWidth(for: value)
        out.append(0x80 | UInt8(width - 1))
        appendBigEndian(value, width: width, to: &out)
    }

    /// An array of object references.
    static func appendArray(_ refs: [Int], refWidth: Int, to out: inout [UInt8]) {
        appendMarker(0xA, count: refs.count, to: &out)
        for ref in refs { appendBigEndian(UInt64(ref), width: refWidth, to: &out) }
    }

    /// A dictionary: all key references, then all value references.
    static func appendDictionary(_ pairs: [(key: Int, value: Int)], refWidth: Int, to out: inout [UInt8]) {
        appendMarker(0xD, count: pairs.count, to: &out)
        for pair in pairs { appendBigEndian(UInt64(pair.key), width: refWidth, to: &out) }
        for pair in pairs { appendBigEndian(UInt64(pair.value), width: refWidth, to: &out) }
    }
}
