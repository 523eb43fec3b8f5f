import Foundation

/// A photo's sidecars, found by the names library exports give them and read as
/// bytes by the parent, never parsed there: a Google Takeout JSON (its
/// `photoTakenTime`) and an XMP sidecar (darktable, digiKam, Lightroom). The
/// worker parses them (``SidecarReader``), confined like the photo's decoder.
public enum Sidecars {
    /// What kind of sidecar a file is.
    public enum Kind: String, Sendable, Codable { case takeout, xmp }

    /// A sidecar handed to a worker: its name (for messages), its bytes, or why
    /// they were not read.
    public struct Bytes: Sendable, Codable, Equatable {
        public var kind: Kind
        public var name: String
        public var data: Data?
        public var problem: String?
    }

    /// The most bytes a sidecar may have (a real one has a few kilobytes).
    public static let maxBytes: Int64 = 1 << 20

    /// The longest name Google Takeout gives a sidecar before `.json` (longer ones are cut).
    static let takeoutNameLimit = 46

    /// The names a Takeout export may give the JSON sidecar of the photo named
    /// `name`, old and new: `IMG.jpg.json`, `IMG.jpg.supplemental-metadata.json`,
    /// those cut to 46 characters before `.json` (`…supplemental-me.json`), a
    /// duplicate's number after the name (`IMG(1).jpg` ↔ `IMG.jpg(1).json`,
    /// `IMG.jpg.supplemental-metadata(1).json`), an `-edited` copy's original's, and
    /// the name without its extension (`IMG.json`), most specific first.
    public static func takeoutNames(for name: String) -> [String] {
        var base = name
        var number = ""
        // IMG(1).jpg: the duplicate's number goes after the sidecar's name.
        if let open = name.lastIndex(of: "("), let close = name[open...].firstIndex(of: ")"),
            name[name.index(after: open)..<close].allSatisfy(\.isNumber), close > name.index(after: open)
        {
            number = String(name[open...close])
            base = String(name[..<open]) + String(name[name.index(after: close)...])
        }
        var bases = [base]
        let ext = URL(fileURLWithPath: base).pathExtension
        let stem = URL(fileURLWithPath: base).deletingPathExtension().lastPathComponent
        if stem.hasSuffix("-edited") {
            bases.append(String(stem.dropLast("-edited".count)) + (ext.isEmpty ? "" : "." + ext))
        }
        var names: [String] = []
        for base in bases {
            for full in [base + ".supplemental-metadata", base] {
                names.append(full + number + ".json")
                if full.count > takeoutNameLimit {
                    names.append(String(full.prefix(takeoutNameLimit)) + number + ".json")
                }
            }
            let bare = URL(fileURLWithPath: base).deletingPathExtension().lastPathComponent
            names.append(bare + number + ".json")
        }
        var seen = Set<String>()
        return names.filter { seen.insert($0).inserted }
    }

    /// The names an XMP sidecar of the photo named `name` may have: `IMG.xmp`
    /// (Lightroom, Capture One) and `IMG.jpg.xmp` (darktable, digiKam), either case.
    public static func xmpNames(for name: String) -> [String] {
        let stem = URL(fileURLWithPath: name).deletingPathExtension().lastPathComponent
        return [name + ".xmp", name + ".XMP", stem + ".xmp", stem + ".XMP"]
    }

    /// The sidecars beside the photo at `path`, read (at most ``maxBytes`` each):
    /// the first Takeout JSON and the first XMP sidecar whose names exist.
    public static func read(for path: String) -> [Bytes] {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let name = url.lastPathComponent
        var found: [Bytes] = []
        for (kind, names) in [(Kind.takeout, takeoutNames(for: name)), (.xmp, xmpNames(for: name))] {
            guard let sidecar = names.first(where: { FileInfo(path: folder + "/" + $0)?.kind == .regular }) else {
                continue
            }
            let file = folder + "/" + sidecar
            let size = FileInfo(path: file)?.size ?? 0
            if size > maxBytes {
                found.append(
                    Bytes(kind: kind, name: sidecar, data: nil, problem: "\(size) bytes, over 1 MiB: not read"))
            } else if let data = FileDescriptor.contents(ofRegularFile: file, limit: maxBytes) {
                found.append(Bytes(kind: kind, name: sidecar, data: data, problem: nil))
            } else {
                found.append(Bytes(kind: kind, name: sidecar, data: nil, problem: "cannot be read"))
            }
        }
        return found
    }
}

/// The worker's reading of a photo's sidecars: the date each records, nothing
/// else of them trusted. Hostile input: bounded (the parent sends at most 1 MiB),
/// JSON through the manifest's own parser (fuzzed, depth-limited), XMP scanned as
/// text for the few properties read, no entity expanded (a billion-laughs XMP is
/// just text); a sidecar that says nothing usable is a warning, never a failure.
public enum SidecarReader {
    /// What the sidecars say of the photo's date, and warnings for the bad ones.
    public struct Dates: Sendable, Equatable {
        /// Takeout's `photoTakenTime`: a UTC instant that carries the user's corrections.
        public var takeout: Date?
        /// An XMP sidecar's date taken (`exif:DateTimeOriginal`, `photoshop:DateCreated`, `xmp:CreateDate`).
        public var xmp: Date?
        public var warnings: [String] = []
    }

    public static func dates(_ sidecars: [Sidecars.Bytes]) -> Dates {
        var dates = Dates()
        for sidecar in sidecars {
            guard let data = sidecar.data else {
                dates.warnings.append("sidecar \(sidecar.name): \(sidecar.problem ?? "not read")")
                continue
            }
            switch sidecar.kind {
            case .takeout:
                dates.takeout = takeoutDate(data)
                if dates.takeout == nil {
                    dates.warnings.append("sidecar \(sidecar.name): no photoTakenTime a date can be read from")
                }
            case .xmp:
                dates.xmp = xmpDate(data)
                if dates.xmp == nil { dates.warnings.append("sidecar \(sidecar.name): no date taken") }
            }
        }
        return dates
    }

    /// `photoTakenTime.timestamp` (seconds since 1970, as a string or a number).
    static func takeoutDate(_ data: Data) -> Date? {
        guard case .object(let root, _)? = try? JSONParser.parse(Array(data)),
            case .object(let taken, _)? = root.first(where: { $0.key == "photoTakenTime" })?.value,
            let value = taken.first(where: { $0.key == "timestamp" })?.value
        else { return nil }
        let text: String
        switch value {
        case .string(let s): text = s
        case .number(let n): text = n
        default: return nil
        }
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds < ArchivedItem.dateLimit else {
            return nil
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// The first of the XMP date-taken properties, as an attribute
    /// (`exif:DateTimeOriginal="…"`) or an element (`<exif:DateTimeOriginal>…<`).
    static func xmpDate(_ data: Data) -> Date? {
        let text = String(decoding: data, as: UTF8.self)
        for property in ["exif:DateTimeOriginal", "photoshop:DateCreated", "xmp:CreateDate"] {
            for opener in [property + "=\"", property + "='", "<" + property + ">"] {
                guard let start = text.range(of: opener) else { continue }
                let rest = text[start.upperBound...]
                let value = rest.prefix { !"\"'<".contains($0) }.trimmingCharacters(in: .whitespacesAndNewlines)
                if value.count <= 40, let date = ISO8601.parse(value) { return date }
            }
        }
        return nil
    }
}
