/// SHA-1 (FIPS 180-4), used only where a format asks for it: name-based UUIDs (RFC 4122 v5).
struct SHA1 {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
    )
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        for b in bytes {
            buffer.append(b)
            length += 1
            if buffer.count == 64 {
                compress(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        update([0x80])
        while buffer.count != 56 { update([0]) }
        update((0..<8).reversed().map { UInt8(truncatingIfNeeded: bitLength >> (UInt64($0) * 8)) })
        var out: [UInt8] = []
        for word in [h.0, h.1, h.2, h.3, h.4] {
            out += [UInt8(word >> 24), UInt8((word >> 16) & 0xFF), UInt8((word >> 8) & 0xFF), UInt8(word & 0xFF)]
        }
        return out
    }

    static func hash<S: Sequence>(_ bytes: S) -> [UInt8] where S.Element == UInt8 {
        var s = SHA1()
        s.update(bytes)
        return s.finalize()
    }

    private mutating func compress(_ block: [UInt8]) {
        var w = [UInt32](repeating: 0, count: 80)
        for i in 0..<16 {
            w[i] =
                UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16 | UInt32(block[i * 4 + 2]) << 8
                | UInt32(block[i * 4 + 3])
        }
        for i in 16..<80 {
            let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
            w[i] = (x << 1) | (x >> 31)
        }
        var (a, b, c, d, e) = h
        for i in 0..<80 {
            let f: UInt32
            let k: UInt32
            switch i {
            case 0..<20: f = (b & c) | (~b & d); k = 0x5A82_7999
            case 20..<40: f = b ^ c ^ d; k = 0x6ED9_EBA1
            case 40..<60: f = (b & c) | (b & d) | (c & d); k = 0x8F1B_BCDC
            default: f = b ^ c ^ d; k = 0xCA62_C1D6
            }
            let t = ((a << 5) | (a >> 27)) &+ f &+ e &+ k &+ w[i]
            e = d
            d = c
            c = (b << 30) | (b >> 2)
            b = a
            a = t
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
    }
}

/// Name-based UUIDs (RFC 4122 version 5).
enum NameBasedUUID {
    /// The namespace thumbpipe's default item keys live in (RFC 4122's URL namespace).
    static let namespace: [UInt8] = [
        0x6B, 0xA7, 0xB8, 0x11, 0x9D, 0xAD, 0x11, 0xD1, 0x80, 0xB4, 0x00, 0xC0, 0x4F, 0xD4, 0x30, 0xC8,
    ]

    /// The upper-case v5 UUID of `name` in ``namespace``.
    static func make(_ name: String) -> String {
        var digest = Array(SHA1.hash(namespace + Array(name.utf8)).prefix(16))
        digest[6] = (digest[6] & 0x0F) | 0x50
        digest[8] = (digest[8] & 0x3F) | 0x80
        let hex = digest.map { String($0, radix: 16, uppercase: true).leftPadded(to: 2) }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(
                hex[
                    hex.index(
                        hex.startIndex, offsetBy: range.lowerBound)..<hex.index(
                            hex.startIndex, offsetBy: range.upperBound)])
        }
        return parts.joined(separator: "-")
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
