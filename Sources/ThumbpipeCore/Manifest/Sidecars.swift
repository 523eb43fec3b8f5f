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

    /// The sidecars beside the photo at `path`: the first Takeout JSON and the
    /// first XMP sidecar whose names are regular files, with what stat says of them.
    static func found(for path: String) -> [(kind: Kind, name: String, info: FileInfo)] {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let name = url.lastPathComponent
        var found: [(kind: Kind, name: String, info: FileInfo)] = []
        for (kind, names) in [(Kind.takeout, takeoutNames(for: name)), (.xmp, xmpNames(for: name))] {
            for candidate in names {
                if let info = FileInfo(path: folder + "/" + candidate), info.kind == .regular {
                    found.append((kind, candidate, info))
                    break
                }
            }
        }
        return found
    }

    /// What the sidecars beside the photo at `path` are, as a nightly compares
    /// them: each one's name, size, modification and change times ("" for none).
    /// Another stamp is a metadata edit: the photo's date and title are read again.
    public static func stamp(for path: String) -> String { stamp(found(for: path)) }

    private static func stamp(_ found: [(kind: Kind, name: String, info: FileInfo)]) -> String {
        // "/" separates: no file name has one (and SQLite's text ends at a NUL).
        found.map { "\($0.name)/\($0.info.size)/\($0.info.modified)/\($0.info.changed)" }.joined(separator: "/")
    }

    /// The sidecars beside the photo at `path`, read (at most ``maxBytes`` each),
    /// and their stamp (``stamp(for:)``) as they were found.
    public static func read(for path: String) -> (sidecars: [Bytes], stamp: String) {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var sidecars: [Bytes] = []
        let found = found(for: path)
        for (kind, sidecar, info) in found {
            let file = folder + "/" + sidecar
            let size = info.size
            if size > maxBytes {
                sidecars.append(
                    Bytes(kind: kind, name: sidecar, data: nil, problem: "\(size) bytes, over 1 MiB: not read"))
            } else if let data = FileDescriptor.contents(ofRegularFile: file, limit: maxBytes) {
                sidecars.append(Bytes(kind: kind, name: sidecar, data: data, problem: nil))
            } else {
                sidecars.append(Bytes(kind: kind, name: sidecar, data: nil, problem: "cannot be read"))
            }
        }
        return (sidecars, stamp(found))
    }
}

/// What a photo's sidecars say: a Google Takeout JSON's date, title and
/// description, an XMP sidecar's metadata, and warnings for the bad ones.
public struct SidecarFacts: Sendable, Codable, Equatable {
    /// Takeout's `photoTakenTime`: a UTC instant that carries the user's corrections.
    public var takeoutTaken: Date?
    /// Takeout's `title`, when the user gave one: Takeout writes the uploaded
    /// file's name there, which is not one.
    public var takeoutTitle: String?
    /// Takeout's `description` (the caption the user wrote in Google Photos).
    public var takeoutDescription: String?
    /// Takeout's `geoData` (where Google Photos places the photo), when it names a place.
    public var takeoutPlace: GeoPoint?
    /// An XMP sidecar's title, description and date taken.
    public var xmp: PhotoMetadata?
    public var warnings: [String] = []

    public init() {}
}

/// The worker's reading of a photo's sidecars. Hostile input: bounded (the
/// parent sends at most 1 MiB), JSON through the manifest's own parser (fuzzed,
/// depth-limited), XMP through ``XMPPacket`` (no DTD, no entity expanded: a
/// billion-laughs XMP is a warning); a sidecar that says nothing usable is a
/// warning, never a failure.
public enum SidecarReader {
    /// Reads `sidecars` of the photo named `photoName`.
    public static func read(_ sidecars: [Sidecars.Bytes], photoName: String) -> SidecarFacts {
        var facts = SidecarFacts()
        for sidecar in sidecars {
            guard let data = sidecar.data else {
                facts.warnings.append("sidecar \(sidecar.name): \(sidecar.problem ?? "not read")")
                continue
            }
            switch sidecar.kind {
            case .takeout:
                guard case .object(let root, _)? = try? JSONParser.parse(Array(data)) else {
                    facts.warnings.append("sidecar \(sidecar.name): not JSON an object can be read from")
                    continue
                }
                facts.takeoutTaken = takeoutDate(root)
                if facts.takeoutTaken == nil {
                    facts.warnings.append("sidecar \(sidecar.name): no photoTakenTime a date can be read from")
                }
                facts.takeoutTitle = text(root, "title").flatMap { isFileName($0, photoName: photoName) ? nil : $0 }
                facts.takeoutDescription = text(root, "description")
                facts.takeoutPlace = place(root)
            case .xmp:
                let metadata = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: data, iptc: nil)
                facts.warnings += metadata.warnings.map { "sidecar \(sidecar.name): \($0)" }
                facts.xmp = metadata
                if metadata.taken == nil && metadata.warnings.isEmpty {
                    facts.warnings.append("sidecar \(sidecar.name): no date taken")
                }
            }
        }
        return facts
    }

    /// The extensions of the files a photo library exports.
    static let fileExtensions: Set<String> = [
        "jpg", "jpeg", "jpe", "png", "gif", "heic", "heif", "hif", "avif", "webp", "tif", "tiff", "bmp", "dng", "cr2",
        "cr3", "nef", "arw", "orf", "rw2", "raf", "mov", "mp4", "m4v", "3gp", "avi", "mkv", "webm",
    ]

    /// Whether a Takeout title is a file's name (the uploaded file's, which
    /// Takeout writes there unless the user gave a title): the photo's own
    /// name or stem, or any name with a photo or video file's extension.
    static func isFileName(_ title: String, photoName: String) -> Bool {
        let stem = URL(fileURLWithPath: photoName).deletingPathExtension().lastPathComponent
        let ext = URL(fileURLWithPath: title).pathExtension.lowercased()
        return title == photoName || title == stem || fileExtensions.contains(ext)
    }

    /// A non-blank string member of `object`, at most ``PhotoMetadata/maxText`` characters.
    static func text(_ object: [(key: String, value: JSONValue, line: Int)], _ key: String) -> String? {
        guard case .string(let value)? = object.first(where: { $0.key == key })?.value else { return nil }
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : String(trimmed.prefix(PhotoMetadata.maxText))
    }

    /// `geoData`'s latitude and longitude; nil for Takeout's 0, 0 ("no place") or
    /// values that are not on Earth.
    static func place(_ root: [(key: String, value: JSONValue, line: Int)]) -> GeoPoint? {
        guard case .object(let geo, _)? = root.first(where: { $0.key == "geoData" })?.value else { return nil }
        func number(_ key: String) -> Double? {
            guard case .number(let text)? = geo.first(where: { $0.key == key })?.value else { return nil }
            return Double(text).flatMap { $0.isFinite ? $0 : nil }
        }
        guard let latitude = number("latitude"), let longitude = number("longitude"), abs(latitude) <= 90,
            abs(longitude) <= 180, latitude != 0 || longitude != 0
        else { return nil }
        return GeoPoint(latitude: latitude, longitude: longitude)
    }

    /// `photoTakenTime.timestamp` (seconds since 1970, as a string or a number).
    static func takeoutDate(_ root: [(key: String, value: JSONValue, line: Int)]) -> Date? {
        guard case .object(let taken, _)? = root.first(where: { $0.key == "photoTakenTime" })?.value,
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
}

/// A place on Earth, in degrees.
public struct GeoPoint: Sendable, Codable, Equatable {
    public var latitude: Double
    public var longitude: Double
}
