import Foundation

/// Reads the description of an ICC profile, to recognise sRGB profiles.
enum ICCProfile {
    /// The profile's description (`desc` tag, v2 text or v4 `mluc`), or nil when it has none.
    static func description(_ profile: UnsafeRawBufferPointer) -> String? {
        let bytes = profile.bindMemory(to: UInt8.self)
        func u32(_ at: Int) -> Int? {
            guard at >= 0, at + 4 <= bytes.count else { return nil }
            return Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        }
        guard let count = u32(128), count < 1000 else { return nil }
        for i in 0..<count {
            let entry = 132 + i * 12
            guard let signature = u32(entry), let offset = u32(entry + 4), let size = u32(entry + 8) else {
                return nil
            }
            guard signature == 0x6465_7363, offset + size <= bytes.count, size >= 12 else { continue }  // 'desc'
            let type = u32(offset)
            if type == 0x6465_7363, let length = u32(offset + 8), offset + 12 + length <= bytes.count {  // 'desc' v2
                let text = bytes[(offset + 12)..<(offset + 12 + length)].prefix { $0 != 0 }
                return String(decoding: text, as: UTF8.self)
            }
            if type == 0x6D6C_7563, let records = u32(offset + 8), records > 0,  // 'mluc' v4
                let length = u32(offset + 20), let start = u32(offset + 24), offset + start + length <= bytes.count
            {
                let units = stride(from: offset + start, to: offset + start + length - 1, by: 2).map {
                    UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])
                }
                return String(decoding: units, as: UTF16.self)
            }
        }
        return nil
    }

    /// Whether a profile describes itself as sRGB (IEC 61966-2.1 and its vendor copies),
    /// so 8-bit pixels tagged with it are already what the output needs.
    static func isSRGB(_ profile: UnsafeRawBufferPointer) -> Bool {
        guard let text = description(profile)?.lowercased() else { return false }
        return text.contains("srgb") || text.contains("61966-2")
    }
}
