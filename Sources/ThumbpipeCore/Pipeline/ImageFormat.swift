import Foundation

/// The image formats libvips can load, as `limits.formats` names them.
///
/// Only the formats a photo collection holds are allowed by default; every
/// other loader (and everything libvips marks untrusted, ImageMagick first) is
/// blocked inside the worker, so a hostile file never reaches it unless a user
/// names its format.
public enum ImageFormat: String, Sendable, CaseIterable, Codable {
    case jpeg, png, webp, heif, tiff, gif
    case jp2k, jxl, svg, pdf, magick, openexr, fits, rad, ppm, analyze, mat, vips, csv, matrix, openslide

    /// The default allow-list: the photo formats (HEIF covers HEIC and AVIF).
    /// JPEG XL is one: phones and cameras write it, browsers show it, and its
    /// decoder, like every other, runs confined (``Sandbox``).
    public static let photoFormats: [ImageFormat] = [.jpeg, .png, .webp, .heif, .tiff, .gif, .jxl]

    /// The libvips class every loader of this format derives from.
    var loaderClass: String {
        switch self {
        case .gif: "VipsForeignLoadNsgif"
        case .jp2k: "VipsForeignLoadJp2k"
        case .openexr: "VipsForeignLoadOpenexr"
        default: "VipsForeignLoad" + rawValue.prefix(1).uppercased() + rawValue.dropFirst()
        }
    }

    /// A short name for messages (`JPEG`, `HEIF`…).
    public var displayName: String {
        switch self {
        case .jpeg: "JPEG"
        case .png: "PNG"
        case .webp: "WebP"
        case .heif: "HEIF"
        case .tiff: "TIFF"
        case .gif: "GIF"
        case .jp2k: "JPEG 2000"
        case .jxl: "JPEG XL"
        case .svg: "SVG"
        case .pdf: "PDF"
        case .magick: "ImageMagick"
        case .openexr: "OpenEXR"
        case .fits: "FITS"
        case .rad: "Radiance"
        case .ppm: "PPM"
        case .analyze: "Analyze"
        case .mat: "MATLAB"
        case .vips: "VIPS"
        case .csv: "CSV"
        case .matrix: "matrix"
        case .openslide: "OpenSlide"
        }
    }

    /// The format of a libvips loader (`VipsForeignLoadJpegFile` → `.jpeg`).
    init?(loader: String) {
        guard
            let format = Self.allCases.sorted(by: { $0.loaderClass.count > $1.loaderClass.count }).first(where: {
                loader.hasPrefix($0.loaderClass)
            })
        else { return nil }
        self = format
    }

    /// The brands of an ISO-BMFF file's `ftyp` box that mark HEIF and AVIF images.
    static let heifBrands: Set<String> = [
        "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1", "mif2", "avif", "avis",
    ]

    /// The major and compatible brands of an ISO-BMFF `ftyp` box (as far as `head` holds them).
    static func isoBrands(_ head: [UInt8]) -> Set<String> {
        guard head.count >= 12 else { return [] }
        let size = min(head.count, Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3]))
        var brands: Set<String> = [String(decoding: head[8..<12], as: UTF8.self)]
        var at = 16
        while at + 4 <= size {
            brands.insert(String(decoding: head[at..<at + 4], as: UTF8.self))
            at += 4
        }
        return brands
    }

    /// What a file that is no image looks like, in a few words, from its first
    /// bytes: `MP4 video`, `text`, … (what `scan` says it skipped).
    public static func describeOther(_ head: [UInt8]) -> String {
        if head.count >= 12, String(decoding: head[4..<8], as: UTF8.self) == "ftyp" {
            let brands = isoBrands(head)
            if brands.contains("qt  ") { return "QuickTime video" }
            if brands.contains("crx ") { return "Canon raw (CR3)" }
            return "MP4 video"
        }
        if head.starts(with: Array("ID3".utf8)) || (head.count > 1 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0) {
            return "MP3 audio"
        }
        if head.starts(with: [0x50, 0x4B, 0x03, 0x04]) { return "ZIP archive" }
        if head.isEmpty { return "empty file" }
        if head.prefix(64).allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            return "text file"
        }
        return "file of unknown type"
    }

    /// What a file's first bytes say it is, for naming a refused format; nil
    /// when they match no known signature. Reads no more than `head`.
    public static func sniff(_ head: [UInt8]) -> ImageFormat? {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        func ascii(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }
        // libvips's own JPEG check (jpeg2vips.c): the SOI marker alone, so a file whose
        // first marker after it is damaged is found as the manifest route finds it.
        if starts([0xFF, 0xD8]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47]) { return .png }
        if ascii("GIF8") { return .gif }
        if ascii("RIFF") && ascii("WEBP", at: 8) { return .webp }
        if ascii("ftyp", at: 4) {
            // ISO-BMFF: an image only when a brand says so (MP4 and QuickTime video,
            // Canon CR3 raws and the like share the box format).
            let brands = isoBrands(head)
            if brands.contains("jxl ") { return .jxl }
            if !brands.isDisjoint(with: heifBrands) { return .heif }
            return nil
        }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return .tiff }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) {
            return .jp2k
        }
        if starts([0xFF, 0x0A]) || starts([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return .jxl }
        if ascii("%PDF") { return .pdf }
        if starts([0x1F, 0x8B]) { return .svg }  // gzip: libvips's only gzip-wrapped loader is SVGZ
        if ascii("BM") || ascii("8BPS") || ascii("push graphic-context") || ascii("viewbox") { return .magick }
        if ascii("v/1\n") || ascii("#?RADIANCE") { return .rad }
        if ascii("SIMPLE") { return .fits }
        if starts([0x76, 0x2F, 0x31, 0x01]) { return .openexr }
        let text = String(decoding: head.prefix(512), as: UTF8.self).lowercased()
        if text.contains("<svg") { return .svg }
        if head.count >= 2, head[0] == 0x50, (0x31...0x37).contains(head[1]) { return .ppm }  // P1…P7
        return nil
    }
}

/// A set of formats, as `limits.formats` allows them: parsed once, when the
/// settings are read, and written (in files, fingerprints, messages) in one
/// order, ``ImageFormat``'s own, whatever order they were given in.
public struct ImageFormats: Sendable, Equatable, Codable, ExpressibleByArrayLiteral, Sequence {
    private var members: Set<ImageFormat>

    /// The formats of `formats`.
    public init(_ formats: some Sequence<ImageFormat>) { members = Set(formats) }

    public init(arrayLiteral elements: ImageFormat...) { self.init(elements) }

    /// Whether `format` is allowed.
    public func contains(_ format: ImageFormat) -> Bool { members.contains(format) }

    /// Whether no format is.
    public var isEmpty: Bool { members.isEmpty }

    /// The formats in ``ImageFormat``'s order.
    public var sorted: [ImageFormat] { ImageFormat.allCases.filter(members.contains) }

    /// The names, comma-separated: `jpeg,png`.
    public var names: String { sorted.map(\.rawValue).joined(separator: ",") }

    public func makeIterator() -> IndexingIterator<[ImageFormat]> { sorted.makeIterator() }

    public init(from decoder: any Decoder) throws {
        members = Set(try [ImageFormat](from: decoder))
    }

    public func encode(to encoder: any Encoder) throws { try sorted.encode(to: encoder) }
}
