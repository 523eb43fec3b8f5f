// No C module here: in a whole-module build the first file (by path) to import
// libvips's headers through another module decides which module owns their
// declarations; the plane path's harness lives beside it (JpegPlaneStore+Fuzz.swift).
import Foundation

/// The parsers thumbpipe runs on untrusted bytes itself, outside libvips, as
/// fuzz targets: `make fuzz` runs each under libFuzzer with AddressSanitizer
/// (`Fuzz/`), and `make test` replays the corpora and the regression files in
/// `Fuzz/Corpus/TARGET/` and `Fuzz/Regressions/TARGET/` through them. Each target
/// takes any bytes and must not crash, hang or leak; where a property can be
/// checked it is (two parsers agree, a round trip gives back what went in), and
/// a broken property is returned as a finding.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// JSON Lines manifests: the fast path and the full JSON parser must agree on every line both take.
    case jsonl
    /// JSON array manifests.
    case json
    /// CSV manifests.
    case csv
    /// Pipeline files.
    case pipeline
    /// An `items.archive` (NSKeyedArchiver binary plist): what `inspect` and `run ARCHIVE` read;
    /// what reads must write back and read back equal.
    case archive
    /// A part's `shard.json`.
    case shard
    /// An embedded ICC profile: its parse, the sRGB-by-numbers decision and the shaper's tables.
    case icc
    /// EXIF dates and offsets (`2024:05:01 09:30:00` and `+02:00` on the next line), and ISO 8601
    /// manifest dates: what parses prints and parses back to the same instant.
    case dates
    /// The folder scan's signature sniff.
    case sniff
    /// The plane path's C (CJpegPlanes, and the thumbnail tap it fills): transcode and tap on any
    /// bytes, the orientation (1–8) and optimised coding chosen by the input's length (a JPEG's
    /// first and last bytes are fixed; trailing bytes after its end are not); a store it makes must
    /// be well formed and decode again.
    case jpegPlanes = "jpeg-planes"
    /// The check of a thumbnail read back from the state (``PNGInfo/thumbnailProblem(_:width:height:)``):
    /// the parent runs it on a blob it did not just write; what it passes must have the
    /// canvas's IHDR. And the command line's PNG reader (``PNGDecode``, `contact-sheet`):
    /// what it reads has the size IHDR gives.
    case thumbnailPNG = "thumbnail-png"
    /// A `report.json` read back (`report`, `merge`, `contact-sheet`): what ``ReportBounds``
    /// lets through is drawn as the report page without a trap.
    case report
    /// A photo's sidecar as the worker reads it (``SidecarReader``): the same bytes as a
    /// Google Takeout JSON and as an XMP sidecar; a date it gives is one an archive takes.
    case sidecar
    /// An embedded XMP packet (``XMPPacket``, through ``PhotoMetadata``): title, description and
    /// date read without a trap, within the length kept, any date one an archive takes.
    case xmp
    /// An embedded IPTC block (``IPTCBlock``: Photoshop's resources, IIM datasets), likewise.
    case iptc
    /// A HEIF container (``HEIFContainer``): the primary image the HEIC route would decode,
    /// its tiles' bytes inside the file, their count and size within the limits, each
    /// picture's Annex B within what its extents hold.
    case heif

    /// Runs the target on `bytes`.
    /// - Returns: nil, or what property broke (a finding, as a crash is).
    public func run(_ bytes: UnsafeRawBufferPointer) -> String? {
        let array = [UInt8](bytes)
        switch self {
        case .jsonl: return Self.jsonLines(array)
        case .json: _ = try? Manifest.parse(array, fileName: "fuzz.json", folder: "/", type: "json")
        case .csv: _ = try? Manifest.parse(array, fileName: "fuzz.csv", folder: "/", type: "csv")
        case .pipeline: _ = try? PipelineSettings.parse(array, file: "fuzz.json", name: "fuzz")
        case .archive: return Self.archive(array)
        case .shard: _ = try? ShardInfo.decode(Data(array), path: "shard.json")
        case .icc: return Self.icc(bytes)
        case .dates: return Self.dates(array)
        case .sniff: _ = ImageFormat.sniff(Array(array.prefix(512)))
        case .sidecar: return Self.sidecar(Data(array))
        case .xmp: return Self.metadata(PhotoMetadata.reconcile(exif: EXIFFields(), xmp: Data(array), iptc: nil))
        case .iptc: return Self.metadata(PhotoMetadata.reconcile(exif: EXIFFields(), xmp: nil, iptc: Data(array)))
        case .heif: return Self.heif(bytes)
        case .jpegPlanes: return Self.jpegPlanes(bytes)
        case .thumbnailPNG: return Self.thumbnailPNG(bytes)
        case .report:
            if let report = try? RunReport.decoded(Data(bytes)), !HTMLReport.render(report).hasSuffix("</html>\n") {
                return "a report drawn without its end"
            }
        }
        return nil
    }

    private static func thumbnailPNG(_ bytes: UnsafeRawBufferPointer) -> String? {
        let data = Data(bytes)
        if let image = try? PNGDecode.rgba(data, maxSide: 512),
            PNGInfo.size(data).map({ $0 != (image.width, image.height) }) ?? true
        {
            return "read as \(image.width)×\(image.height), not IHDR's size"
        }
        guard PNGInfo.thumbnailProblem(bytes, width: 80, height: 80) == nil else { return nil }
        guard let size = PNGInfo.size(data), size == (80, 80), let format = PNGInfo.format(data), format == (8, 6)
        else { return "passed as an 80×80 RGBA thumbnail without that IHDR" }
        return nil
    }

    private static func jsonLines(_ bytes: [UInt8]) -> String? {
        _ = try? Manifest.parse(bytes, fileName: "fuzz.jsonl", folder: "/", type: "jsonl")
        // Line by line: where the fast path reads a line, the full parser must read the same item.
        var start = 0
        var line = 1
        while start <= bytes.count {
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            let text = Array(bytes[start..<end])
            if !text.isEmpty, let fast = text.withUnsafeBytes({ FlatJSONLine.scan($0) }) {
                var viaFast = ManifestBuilder(fileName: "f", folder: "/")
                var viaFull = ManifestBuilder(fileName: "f", folder: "/")
                let a = Result { try viaFast.add(fast, line: line) }
                let b = Result { () throws -> Void in
                    let value = try JSONParser.parse(text, firstLine: line)
                    try viaFull.add(json: value, line: line)
                }
                switch (a, b) {
                case (.success, .success):
                    let x = try? viaFast.checkedItems().0
                    let y = try? viaFull.checkedItems().0
                    if x != y { return "line \(line): the fast path and the JSON parser read different items" }
                case (.failure(let e1), .failure(let e2)):
                    if "\(e1)" != "\(e2)" { return "line \(line): the two paths fail differently: \(e1) / \(e2)" }
                default:
                    return "line \(line): one path takes the line, the other refuses it"
                }
            }
            start = end + 1
            line += 1
        }
        return nil
    }

    private static func archive(_ bytes: [UInt8]) -> String? {
        guard let reader = try? KeyedArchiveReader(data: Data(bytes)), let items = try? reader.items() else {
            return nil
        }
        // What reads must write, and read back equal.
        let folder = NSTemporaryDirectory() + "thumbpipe-fuzz-\(getpid())"
        try? FileSystem.createFolder(folder, intermediate: true)
        let path = folder + "/items.archive"
        defer {
            try? FileSystem.remove(path)
            try? FileSystem.removeFolder(folder)
        }
        do {
            let writer = try KeyedArchiveWriter(path: path, className: reader.className, itemCount: items.count)
            for item in items { try writer.append(item) }
            try writer.finish()
        } catch {
            return nil  // an item the writer refuses (a name too long, say) is not a round trip's to check
        }
        guard let again = try? KeyedArchiveReader(path: path).items() else {
            return "the archive written from what was read cannot be read back"
        }
        return again == items ? nil : "the archive written from what was read reads back different items"
    }

    private static func icc(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let profile = ICCProfile(bytes) else { return nil }
        _ = profile.isSRGB
        _ = ShaperConversion(profile: profile)
        _ = ShaperConversion(profile: bytes)
        return nil
    }

    private static func dates(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        _ = ISO8601.parseEXIF(lines[0], offset: lines.count > 1 ? lines[1] : nil)
        guard let date = ISO8601.parse(lines[0]) else { return nil }
        // Printed by thumbpipe's own ISO 8601 printer (proleptic Gregorian, as the parser;
        // Foundation's formatter turns Julian before 1582, a harness mistake the first run
        // found) and parsed again: the same instant, to the millisecond.
        guard date.timeIntervalSince1970.magnitude < 1e11 else { return nil }
        let printed = ISO8601Format.string(date)
        guard let again = ISO8601.parse(printed) else { return "\(printed), printed from \(lines[0]), does not parse" }
        if abs(again.timeIntervalSince(date)) > 0.001 { return "\(lines[0]) → \(printed) → another instant" }
        return nil
    }

    private static func jpegPlanes(_ bytes: UnsafeRawBufferPointer) -> String? {
        JpegPlaneStore.fuzz(bytes)
    }

    /// The size a JPEG's first frame header gives, or nil.
    static func frameSize(_ bytes: UnsafeRawBufferPointer) -> (width: Int, height: Int)? {
        var at = 2
        guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        while at + 9 < bytes.count {
            guard bytes[at] == 0xFF else { return nil }
            let marker = bytes[at + 1]
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                return (Int(bytes[at + 7]) << 8 | Int(bytes[at + 8]), Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]))
            }
            guard length >= 2 else { return nil }
            at += 2 + length
        }
        return nil
    }
}

extension FuzzTarget {
    /// Both readers on the bytes: never a trap, and any date they give within what an archive takes.
    static func sidecar(_ data: Data) -> String? {
        let facts = SidecarReader.read(
            [
                Sidecars.Bytes(kind: .takeout, name: "f.json", data: data, problem: nil),
                Sidecars.Bytes(kind: .xmp, name: "f.xmp", data: data, problem: nil),
            ], photoName: "f.jpg")
        if let date = facts.takeoutTaken, !(abs(date.timeIntervalSinceReferenceDate) < ArchivedItem.dateLimit) {
            return "a sidecar date \(date.timeIntervalSince1970) no archive takes"
        }
        return facts.xmp.flatMap(metadata)
    }

    /// What metadata read from any bytes must be: texts within their length, a
    /// date (in any zone) one an archive takes.
    static func metadata(_ metadata: PhotoMetadata) -> String? {
        for text in [metadata.title, metadata.description].compactMap({ $0 })
        where text.count > PhotoMetadata.maxText || text.isEmpty {
            return "a text of \(text.count) characters kept"
        }
        for zone in ["UTC", "Pacific/Kiritimati", "Etc/GMT+12"] {
            guard let time = metadata.taken, let zone = TimeZone(identifier: zone) else { continue }
            let date = time.resolved(in: zone).date
            if !(abs(date.timeIntervalSinceReferenceDate) < ArchivedItem.dateLimit) {
                return "a date \(date.timeIntervalSince1970) no archive takes"
            }
        }
        return nil
    }
}

extension FuzzTarget {
    /// The container parser on any bytes: a primary image it accepts lies inside
    /// the file, within the limits, its grid covered by its tiles, its metadata
    /// items (the header's EXIF and XMP) at most 16 of at most 1 MB each.
    static func heif(_ bytes: UnsafeRawBufferPointer) -> String? {
        let maxPixels = 100_000_000
        guard
            case .success(let image) = Result(catching: { () throws(HEIFRefusal) in
                try HEIFContainer.described(bytes, maxPixels: maxPixels)
            })
        else { return nil }
        if image.metadata.count > HEIFMeta.maxMetadataItems
            || image.metadata.contains(where: { $0.bytes.count > HEIFMeta.maxItemBytes })
        {
            return
                "\(image.metadata.count) metadata items, the largest \(image.metadata.map(\.bytes.count).max() ?? 0) bytes"
        }
        if image.width * image.height > maxPixels { return "\(image.width) × \(image.height) over the limit" }
        if image.tiles.count != image.columns * image.rows || image.tiles.count > HEIFContainer.maxTiles {
            return "\(image.tiles.count) tiles for a \(image.columns) × \(image.rows) grid"
        }
        if image.columns * image.tileWidth < image.width || image.rows * image.tileHeight < image.height {
            return "tiles that do not cover \(image.width) × \(image.height)"
        }
        for extents in image.tiles {
            if extents.contains(where: { $0.lowerBound < 0 || $0.upperBound > bytes.count }) {
                return "a tile's bytes outside the file"
            }
            let picture = HEVCConfiguration.picture(
                bytes, extents: extents, lengthSize: image.lengthSize, parameterSets: image.parameterSets)
            let most = image.parameterSets.count + extents.reduce(0) { $0 + $1.count } * 5
            if let picture, picture.count > most { return "a picture of \(picture.count) bytes from \(most)" }
        }
        if !(1...8).contains(image.orientation) { return "orientation \(image.orientation)" }
        return nil
    }
}
