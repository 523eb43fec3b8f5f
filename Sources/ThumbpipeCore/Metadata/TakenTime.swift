import Foundation

/// When a photo was taken, as its metadata says: an instant when the metadata
/// names its offset from UTC, else a wall-clock reading in a zone it does not
/// name (EXIF before 2.31, a date-only IPTC or XMP date), which the run resolves
/// (``resolved(in:)``): by the offset its GPS time stamp implies, else in the
/// zone the user gives (`--time-zone`, by default the machine's).
public enum TakenTime: Sendable, Codable, Equatable {
    /// An instant: the metadata named its offset.
    case instant(Date)
    /// A wall-clock reading, as seconds since 1970 read as if it were UTC, and the
    /// offset east of UTC (seconds) its GPS time stamp implies, when it has one.
    case wallClock(Double, gpsOffset: Int?)

    /// How a wall-clock reading's zone was decided.
    public enum Zone: Sendable, Equatable {
        /// The metadata named the offset.
        case named
        /// From the GPS time stamp (UTC) beside the wall-clock time.
        case gps
        /// The run's time zone, assumed.
        case assumed
    }

    /// The instant, and how its zone was decided.
    public func resolved(in zone: TimeZone) -> (date: Date, zone: Zone) {
        switch self {
        case .instant(let date): return (date, .named)
        case .wallClock(let seconds, let gps?): return (Date(timeIntervalSince1970: seconds - Double(gps)), .gps)
        case .wallClock(let seconds, nil):
            // The zone's offset at the instant, found in two steps (right across a
            // change of offset but within its hour).
            var instant = seconds - Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: seconds)))
            instant = seconds - Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: instant)))
            return (Date(timeIntervalSince1970: instant), .assumed)
        }
    }

    /// An ISO 8601 date as XMP writes it (`2006-10-29`, `1993-01-01T03:11:11.311+01:00`).
    static func iso(_ text: String) -> TakenTime? {
        guard let parts = ISO8601.wallClock(text.trimmingCharacters(in: .whitespaces)) else { return nil }
        guard let offset = parts.offset else { return .wallClock(parts.seconds, gpsOffset: nil) }
        return .instant(Date(timeIntervalSince1970: parts.seconds - Double(offset)))
    }

    /// EXIF's DateTimeOriginal (`2001:01:01 01:11:11`) with its SubSecTimeOriginal
    /// and OffsetTimeOriginal; without an offset, the GPS date and time stamp
    /// (UTC) give one when they lie within 14 hours of it (rounded to 15 minutes).
    static func exif(_ fields: EXIFFields) -> TakenTime? {
        guard let text = fields.dateTimeOriginal, text.count >= 19 else { return nil }
        var chars = Array(text.prefix(19))
        guard chars[4] == ":", chars[7] == ":" else { return nil }
        chars[4] = "-"
        chars[7] = "-"
        chars[10] = "T"
        guard var parts = ISO8601.wallClock(String(chars)) else { return nil }
        if let digits = fields.subSecond?.prefix(9), !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit),
            let fraction = Double("0." + digits)
        {
            parts.seconds += fraction
        }
        if let offset = fields.offset.flatMap(ISO8601.exifOffsetSeconds) {
            return .instant(Date(timeIntervalSince1970: parts.seconds - Double(offset)))
        }
        return .wallClock(parts.seconds, gpsOffset: gpsOffset(wallClock: parts.seconds, fields))
    }

    /// The offset the GPS stamp implies, rounded to 15 minutes, within ±14 hours.
    static func gpsOffset(wallClock: Double, _ fields: EXIFFields) -> Int? {
        guard let day = fields.gpsDate?.prefix(10), day.count == 10,
            let date = ISO8601.wallClock(day.replacingOccurrences(of: ":", with: "-"))?.seconds,
            let time = fields.gpsTime.flatMap(rationalSeconds)
        else { return nil }
        let offset = ((wallClock - (date + time)) / 900).rounded() * 900
        return abs(offset) <= 14 * 3600 ? Int(offset) : nil
    }

    /// `20/1 52/1 10/1` (hours, minutes, seconds as rationals) in seconds.
    static func rationalSeconds(_ text: String) -> Double? {
        let values = text.split(separator: " ").prefix(3).map { part -> Double? in
            let pair = part.split(separator: "/")
            guard pair.count == 2, let n = Double(pair[0]), let d = Double(pair[1]), d > 0 else { return nil }
            return n / d
        }
        guard values.count == 3, let h = values[0], let m = values[1], let s = values[2], h < 24, m < 60, s < 61
        else { return nil }
        return h * 3600 + m * 60 + s
    }
}

/// The EXIF fields metadata is read from, as text (libvips reads the EXIF block).
struct EXIFFields: Sendable, Equatable {
    var imageDescription: String?
    var dateTimeOriginal: String?
    var subSecond: String?
    /// OffsetTimeOriginal, else OffsetTime.
    var offset: String?
    var gpsDate: String?
    var gpsTime: String?
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
