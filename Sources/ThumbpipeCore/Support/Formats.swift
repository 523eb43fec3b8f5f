import Foundation

/// ISO 8601 text for dates, UTC, whole seconds unless the date has a fraction.
public enum ISO8601Format {
    /// `2024-05-01T09:30:00Z`.
    public static func string(_ date: Date) -> String {
        // Rounded to the millisecond first, so .9999 carries into the next second.
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
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
    /// Width and height from the IHDR chunk, or nil when `data` is not a PNG.
    public static func size(_ data: Data) -> (width: Int, height: Int)? {
        let bytes = [UInt8](data.prefix(33))
        guard bytes.count >= 24, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
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
}
