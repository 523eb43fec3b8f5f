import Foundation

/// Parses ISO 8601 dates as manifests write them: `2024-05-01`, `2024-05-01T09:30:00Z`,
/// `2024-05-01T09:30:00.250+02:00`, `2024-05-01 09:30`. A time without a zone is UTC.
enum ISO8601 {
    static func parse(_ text: String) -> Date? {
        guard let parts = wallClock(text) else { return nil }
        return Date(timeIntervalSince1970: parts.seconds - Double(parts.offset ?? 0))
    }

    /// A date's wall-clock reading (seconds since 1970 as if it were UTC) and its
    /// offset east of UTC in seconds when it names one (`Z` is 0; none is nil).
    static func wallClock(_ text: String) -> (seconds: Double, offset: Int?)? {
        let s = Array(text.utf8)
        var i = 0
        func number(_ digits: Int) -> Int? {
            guard i + digits <= s.count else { return nil }
            var value = 0
            for k in 0..<digits {
                let c = s[i + k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            i += digits
            return value
        }
        func take(_ c: Character) -> Bool {
            if i < s.count, s[i] == c.asciiValue! {
                i += 1
                return true
            }
            return false
        }
        guard let year = number(4), take("-"), let month = number(2), take("-"), let day = number(2) else {
            return nil
        }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day) else { return nil }
        var seconds = Double(daysFromCivil(year, month, day)) * 86400
        if i == s.count { return (seconds, nil) }
        guard take("T") || take("t") || take(" ") else { return nil }
        guard let hour = number(2), take(":"), let minute = number(2) else { return nil }
        var second = 0.0
        if take(":") {
            guard let whole = number(2) else { return nil }
            second = Double(whole)
            if take(".") || take(",") {
                var scale = 0.1
                var digits = 0
                while i < s.count, s[i] >= 0x30, s[i] <= 0x39 {
                    second += Double(s[i] - 0x30) * scale
                    scale /= 10
                    i += 1
                    digits += 1
                }
                if digits == 0 { return nil }
            }
        }
        guard hour <= 23, minute <= 59, second < 61 else { return nil }
        seconds += Double(hour * 3600 + minute * 60) + second
        if i == s.count { return (seconds, nil) }
        if take("Z") || take("z") {
            return i == s.count ? (seconds, 0) : nil
        }
        let sign: Double
        if take("+") { sign = 1 } else if take("-") { sign = -1 } else { return nil }
        guard let offsetHours = number(2) else { return nil }
        _ = take(":")
        let offsetMinutes = number(2) ?? 0
        guard i == s.count, offsetHours <= 23, offsetMinutes <= 59 else { return nil }
        return (seconds, Int(sign) * (offsetHours * 3600 + offsetMinutes * 60))
    }

    /// Parses an EXIF date (`2010:03:07 13:07:57`), taken as UTC since EXIF has no zone.
    /// - Parameter offset: EXIF's OffsetTimeOriginal (or OffsetTime), `±HH:MM`, which
    ///   says which zone the wall-clock time was in; without one (or with one that is
    ///   not `±HH:MM` within ±14 h) the time is read as UTC.
    static func parseEXIF(_ text: String, offset: String? = nil) -> Date? {
        let trimmed = text.prefix(19)
        guard trimmed.count == 19 else { return nil }
        var chars = Array(trimmed)
        chars[4] = "-"
        chars[7] = "-"
        chars[10] = "T"
        guard let wallClock = parse(String(chars)) else { return nil }
        return wallClock.addingTimeInterval(-Double(offset.flatMap(exifOffsetSeconds) ?? 0))
    }

    /// Seconds east of UTC of an EXIF offset (`+02:00`, `-05:30`), or nil.
    static func exifOffsetSeconds(_ text: String) -> Int? {
        let c = Array(text.prefix(6))
        guard c.count == 6, c[0] == "+" || c[0] == "-", c[3] == ":",
            let hours = Int(String(c[1...2])), let minutes = Int(String(c[4...5])), hours <= 14, minutes < 60
        else { return nil }
        return (c[0] == "-" ? -1 : 1) * (hours * 3600 + minutes * 60)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
