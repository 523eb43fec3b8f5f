import CVips
import CVipsShim
import Foundation
import Synchronization

/// What a source's header says, read without decoding pixels.
public struct SourceHeader: Sendable, Codable {
    /// Stored width and height in pixels (before orientation).
    public var width: Int
    public var height: Int
    /// The EXIF orientation, 1–8.
    public var orientation: Int
    /// A short format name for messages (`JPEG`, `PNG`, `HEIF`…).
    public var format: String
    /// What the photo says of itself: title, description, date taken (MWG-reconciled).
    public var embedded = PhotoMetadata()
    /// What its sidecars say (a Google Takeout JSON, an XMP sidecar): ``SidecarReader``.
    public var sidecars = SidecarFacts()
    /// The hash of its image data without its metadata (``ImageDataHash``), when
    /// the worker was asked for it and the format has one.
    public var imageHash: String?
    /// Whether the source has an alpha channel (or palette transparency).
    public var hasAlpha: Bool
    /// How the loader can shrink at load time.
    var shrink: LoadShrink
    /// A JPEG's colour, as the plane path sees it (nil for other formats).
    var jpegColour: JPEGColour?
    /// The conversion of a JPEG in an RGB matrix/TRC profile to sRGB: the worker's
    /// own, never sent (a reply's header carries ``jpegColour`` only).
    var conversion: ShaperConversion?
    /// The image the header was read from, not yet decoded: the full-size decode
    /// takes it (once) rather than asking libvips to find the loader and open the
    /// source again. The worker's own, never sent.
    var loaded: LoadedImage?
    /// A HEIC's container as the route's own header read it (``HeicPlaneStore/header(of:limits:)``):
    /// the route decodes from it rather than parse the file again. The worker's own, never sent.
    var heif: HEIFImage?

    enum CodingKeys: String, CodingKey {
        case width, height, orientation, format, embedded, sidecars, imageHash, hasAlpha, shrink, jpegColour
    }

    /// Width and height as the image displays (orientations 5–8 swap them).
    public var uprightSize: (width: Int, height: Int) {
        orientation >= 5 ? (height, width) : (width, height)
    }
}

/// How a loader can shrink an image while it loads it.
enum LoadShrink: Int32, Sendable, Codable {
    /// It cannot: the image is decoded at full size.
    case none = 0
    /// By an integer factor (`shrink`: JPEG's DCT scaling, 1, 2, 4 or 8).
    case integer = 1
    /// By any factor (`scale`: WebP, SVG, PDF render at the size asked).
    case scale = 2

    /// What libvips says of a loader (`CVipsShim_loader_shrink_kind`).
    init(loader: UnsafePointer<CChar>) {
        self = LoadShrink(rawValue: CVipsShim_loader_shrink_kind(loader)) ?? .none
    }
}

/// A decoded source: 8-bit sRGB with 3 or 4 bands, orientation still pending
/// (it is applied after scaling, where it is cheap).
struct DecodedImage {
    var image: VImage
    var header: SourceHeader
    /// Whether the pixels are already computed in memory (random access is free).
    var inMemory = false
}

/// The decode stage: opens a source through libvips, refuses what the limits
/// forbid, shrinks at load time, and converts to 8-bit sRGB through the embedded
/// ICC profile (CMYK and 16-bit included).
public struct Decode: Sendable {
    /// The limits that apply to every source.
    public var limits: PipelineSettings.Limits

    /// Creates the stage with `limits`.
    public init(limits: PipelineSettings.Limits) { self.limits = limits }

    /// Reads the header of the source at `path` (opened here: tests and tools
    /// outside a worker) and checks it against the limits.
    /// - Throws: ``ItemFailure`` at `.decode` for a missing, unreadable, unknown or over-limit source.
    public func header(of path: String) throws(ItemFailure) -> SourceHeader {
        let bytes = try Self.checkReadableFile(path)
        if limits.maxFileBytes > 0 && bytes > limits.maxFileBytes {
            throw ItemFailure(.decode, "file is \(bytes) bytes, over limits.maxFileBytes (\(limits.maxFileBytes))")
        }
        return try header(of: try SourceBytes(path: path))
    }

    /// Reads a source's header from its bytes and checks it against the limits.
    /// - Throws: ``ItemFailure`` at `.decode` for an unknown, refused or over-limit source.
    func header(of source: SourceBytes) throws(ItemFailure) -> SourceHeader {
        if limits.maxFileBytes > 0 && source.count > limits.maxFileBytes {
            throw ItemFailure(
                .decode, "file is \(source.count) bytes, over limits.maxFileBytes (\(limits.maxFileBytes))")
        }
        try startVips()
        let allowed = limits.formats
        // thumbpipe's own signature check first: a format it knows and the
        // limits refuse is never shown to a libvips loader, not even to ask
        // whether it recognises the file (a loader's own check can be slow or unsafe).
        if let sniffed = ImageFormat.sniff(source.head()), !allowed.contains(sniffed) {
            throw Self.notAllowed(sniffed)
        }
        guard let loaderName = source.loader() else {
            _ = Vips.takeError(operation: "find_load")
            throw ItemFailure(.decode, "not a supported image (\(Self.sniff(source.head(16))))")
        }
        if let loaded = ImageFormat(loader: loaderName), !allowed.contains(loaded) { throw Self.notAllowed(loaded) }
        let format = Self.formatName(loader: loaderName)
        let image = try load(source, shrink: 1, scale: 1, format: format)
        var header = SourceHeader(
            width: image.width, height: image.height, orientation: image.orientation, format: format,
            embedded: PhotoMetadata.read(image), hasAlpha: image.hasAlpha,
            shrink: loaderName.withCString { LoadShrink(loader: $0) },
            jpegColour: nil)
        if format == "JPEG" { (header.jpegColour, header.conversion) = JPEGColour.of(image) }
        header.loaded = LoadedImage(image)
        let pixels = header.width.multipliedReportingOverflow(by: header.height)
        if pixels.overflow || pixels.partialValue > limits.maxPixels {
            throw ItemFailure(
                .decode,
                "image is \(header.width)×\(header.height), over limits.maxPixels (\(limits.maxPixels) pixels)")
        }
        return header
    }

    /// Decodes a source for a canvas of `canvasWidth × canvasHeight` pixels,
    /// shrinking at load time as far as still leaves a factor of two for the
    /// final resize (libvips's own rule, which keeps the result sharp).
    func forThumbnail(_ source: SourceBytes, header: SourceHeader, canvasWidth: Int, canvasHeight: Int)
        throws(ItemFailure) -> DecodedImage
    {
        let upright = header.uprightSize
        let ratio = AspectFillScale.coverRatio(
            canvasWidth: canvasWidth, canvasHeight: canvasHeight, width: Double(upright.width),
            height: Double(upright.height))
        let shrink = 1 / ratio
        var jpegShrink: Int32 = 1
        var scale = 1.0
        switch header.shrink {
        case .integer:
            jpegShrink = shrink >= 16 ? 8 : shrink >= 8 ? 4 : shrink >= 4 ? 2 : 1
        case .scale:
            scale = min(1, 2 * ratio)
        case .none:
            break
        }
        let image = try load(source, shrink: jpegShrink, scale: scale, format: header.format)
        return DecodedImage(image: try toSRGB(image, format: header.format), header: header)
    }

    /// Decodes a source at full size, for the store; streaming (lazy), unless
    /// `inMemory`, when every pixel is decoded into memory at once so that the
    /// store and the thumbnail can share one decode.
    func fullSize(_ source: SourceBytes, header: SourceHeader, inMemory: Bool = false, clocks: PipelineClocks? = nil)
        throws(ItemFailure) -> DecodedImage
    {
        // The header's image is this very load (full size, sequential): taken, not made again.
        var loaded: VImage
        if let opened = header.loaded?.take() {
            loaded = opened
        } else {
            loaded = try load(source, shrink: 1, scale: 1, format: header.format)
        }
        if let clocks { loaded = try clocks.time(loaded, .decoding, format: header.format) }
        var image = try toSRGB(loaded, format: header.format)
        if let clocks { image = try clocks.time(image, .colouring, format: header.format) }
        guard inMemory else { return DecodedImage(image: image, header: header) }
        do {
            return DecodedImage(image: try image.inMemory(), header: header, inMemory: true)
        } catch {
            throw ItemFailure(error, format: header.format, stage: .decode)
        }
    }

    private func startVips() throws(ItemFailure) {
        do { try Vips.start() } catch { throw ItemFailure(.decode, "libvips did not start: \(error)") }
    }

    private func load(_ source: SourceBytes, shrink: Int32, scale: Double, format: String) throws(ItemFailure)
        -> VImage
    {
        guard let out = source.load(shrink: shrink, scale: scale, failOn: limits.failOn.vipsValue, sequential: true)
        else {
            throw ItemFailure(Vips.takeError(operation: "load"), format: format, stage: .decode)
        }
        return VImage(out)
    }

    /// The interpretations that are not a device's encoding: converted by libvips, never through a profile.
    static let colorimetric: Set<VipsInterpretation> = [
        VIPS_INTERPRETATION_scRGB, VIPS_INTERPRETATION_XYZ, VIPS_INTERPRETATION_LAB, VIPS_INTERPRETATION_LABQ,
        VIPS_INTERPRETATION_LABS, VIPS_INTERPRETATION_LCH, VIPS_INTERPRETATION_CMC, VIPS_INTERPRETATION_YXY,
        VIPS_INTERPRETATION_HSV,
    ]

    /// The interpretations float RGB device values come with (libvips tags a
    /// float RGB TIFF scRGB whatever its profile says).
    static let deviceRGB: Set<VipsInterpretation> = [
        VIPS_INTERPRETATION_scRGB, VIPS_INTERPRETATION_sRGB, VIPS_INTERPRETATION_RGB16, VIPS_INTERPRETATION_MULTIBAND,
    ]

    /// A float or colorimetric image made ready for the profile step: float RGB
    /// with a linear profile (HDR merges, scientific tools) as 16-bit device values
    /// for lcms to read through that profile (floats are linear light: a
    /// gamma-encoded profile on them, such as the sRGB one libvips tags scRGB with,
    /// is not believed, as vips_thumbnail does not); colorimetric encodings (scRGB,
    /// XYZ, LAB…) and other floats to sRGB by libvips's own conversion, as
    /// vips_thumbnail does. Any other image as it is.
    /// - Returns: the image, and whether it is sRGB already by libvips's conversion
    ///   (its embedded profile then no longer describes it: through it, the sRGB
    ///   curve would be applied a second time).
    static func fromFloatOrColorimetric(_ image: VImage) throws -> (image: VImage, converted: Bool) {
        let float = image.format == VIPS_FORMAT_FLOAT || image.format == VIPS_FORMAT_DOUBLE
        if float && (image.bands == 3 || image.bands == 4) && deviceRGB.contains(image.interpretation)
            && image.withProfile(ICCProfile.init)?.isLinearMatrixShaper == true
        {
            return (try image.derive("float_to_rgb16") { CVipsShim_float_to_rgb16($0, $1) }, false)
        }
        if colorimetric.contains(image.interpretation) || float {
            return (try image.derive("colourspace") { CVipsShim_colourspace_srgb($0, $1) }, true)
        }
        return (image, false)
    }

    /// Converts any decoded image to 8-bit sRGB with 3 bands, or 4 with alpha.
    func toSRGB(_ input: VImage, format: String) throws(ItemFailure) -> VImage {
        do {
            let ready = try Self.fromFloatOrColorimetric(input)
            var image = ready.image
            let converted = ready.converted
            let cmyk = image.interpretation == VIPS_INTERPRETATION_CMYK
            // Camera JPEGs often embed sRGB itself: converting sRGB to sRGB
            // costs a full-image pass through lcms for nothing.
            let uchar = !cmyk && image.format == VIPS_FORMAT_UCHAR && image.interpretation == VIPS_INTERPRETATION_sRGB
            let profile = image.withProfile(ICCProfile.init)
            let alreadySRGB = uchar && profile?.isSRGB == true
            let rgb8 = uchar && (image.bands == 3 || image.bands == 4)
            if rgb8 && !alreadySRGB, let profile, let shaper = ShaperConversion(profile: profile),
                let converted = try? shaper.apply(image)
            {
                // A matrix/TRC profile (Display P3, Adobe RGB…): the same
                // conversion as lcms's, through tables.
                image = converted
            } else if (image.has(VIPS_META_ICC_NAME) || cmyk) && !alreadySRGB && !converted {
                do {
                    image = try image.derive("icc_transform") { CVipsShim_icc_to_srgb($0, $1, cmyk ? "cmyk" : "srgb") }
                } catch {
                    // A broken or unusable embedded profile: fall back to libvips's
                    // built-in conversion rather than losing the image.
                    image = try image.derive("colourspace") { CVipsShim_colourspace_srgb($0, $1) }
                }
            } else if image.interpretation != VIPS_INTERPRETATION_sRGB || image.bands < 3 {
                image = try image.derive("colourspace") { CVipsShim_colourspace_srgb($0, $1) }
            }
            if image.format != VIPS_FORMAT_UCHAR {
                let shift: Int32 = image.format == VIPS_FORMAT_USHORT ? 1 : 0
                image = try image.derive("cast") { CVipsShim_cast_uchar($0, $1, shift) }
            }
            if image.bands > 4 {
                image = try image.derive("extract_band") { CVipsShim_extract_bands($0, $1, 0, 4) }
            } else if image.bands == 2 || image.bands == 1 {
                image = try image.derive("colourspace") { CVipsShim_colourspace_srgb($0, $1) }
            }
            return image
        } catch {
            throw ItemFailure(error, format: format, stage: .decode)
        }
    }

    /// Checks the source is a readable, non-empty regular file.
    /// - Returns: its size in bytes.
    @discardableResult
    static func checkReadableFile(_ path: String) throws(ItemFailure) -> Int {
        guard let info = FileInfo(path: path) else {
            let error = Errno.current
            throw ItemFailure(.decode, error == .noEntry ? "file not found" : "cannot open: \(error)")
        }
        if info.kind == .directory { throw ItemFailure(.decode, "is a directory, not an image") }
        if info.kind != .regular { throw ItemFailure(.decode, "not a regular file") }
        if info.size == 0 { throw ItemFailure(.decode, "empty file (0 bytes)") }
        do { try FileDescriptor.open(path, O_RDONLY).close() } catch {
            throw ItemFailure(.decode, "cannot open: \(error)")
        }
        return Int(info.size)
    }

    static func notAllowed(_ format: ImageFormat) -> ItemFailure {
        ItemFailure(.decode, "format \(format.displayName) is not allowed (limits.formats)")
    }

    /// The first `count` bytes of a file (fewer when it is shorter or unreadable).
    static func head(_ path: String, count: Int = 512) -> [UInt8] {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY) else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = (try? file.read(into: &bytes, at: 0)) ?? 0
        return Array(bytes[..<n])
    }

    /// A few words on what an unloadable file looks like, from its first bytes.
    static func sniff(_ head: [UInt8]) -> String {
        // Only readable, non-empty files get here: no bytes means it could not be read.
        guard !head.isEmpty else { return "unreadable" }
        if head.starts(with: [0xFF, 0xD8]) { return "JPEG signature but unreadable header" }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "PNG signature but damaged" }
        if head.count >= 4,
            head.prefix(4).allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 })
        {
            return "looks like text"
        }
        return "unknown signature"
    }

    /// The format named in messages (ImageMagick loads many formats: "image").
    static func formatName(loader: String) -> String {
        guard let format = ImageFormat(loader: loader), format != .magick else { return "image" }
        return format.displayName
    }
}

/// A JPEG's colour, as the plane path sees it: sRGB (or untagged) pixels are
/// stored from its planes as they are; an RGB matrix/TRC profile (Display P3,
/// Adobe RGB, ProPhoto, an "sRGB" whose numbers are not) is converted on the
/// way; anything else is libvips's, for the reason given.
enum JPEGColour: Sendable, Codable, Equatable {
    case sRGB
    case matrix
    case other(String)

    /// What `image` (a JPEG's header, as libvips reads it) is, and the
    /// conversion a matrix/TRC profile takes.
    static func of(_ image: VImage) -> (JPEGColour, ShaperConversion?) {
        if image.interpretation == VIPS_INTERPRETATION_CMYK { return (.other("CMYK"), nil) }
        guard image.format == VIPS_FORMAT_UCHAR else { return (.other("more than 8 bits"), nil) }
        guard image.bands == 3, image.interpretation == VIPS_INTERPRETATION_sRGB else {
            return (.other(image.bands == 1 ? "grey" : "\(image.bands) bands"), nil)
        }
        guard image.has(VIPS_META_ICC_NAME) else { return (.sRGB, nil) }
        let found: (JPEGColour, ShaperConversion?)? = image.withProfile { bytes in
            guard let profile = ICCProfile(bytes) else { return (.other("an unreadable profile"), nil) }
            if profile.isSRGB { return (.sRGB, nil) }
            guard let conversion = ShaperConversion(profile: profile) else {
                return (.other("a profile that is not RGB matrix/TRC"), nil)
            }
            return (.matrix, conversion)
        }
        return found ?? (.other("an unreadable profile"), nil)
    }
}

/// A loaded image that one decode may take, once: a sequential image's pixels
/// can be read by one pipeline only.
final class LoadedImage: Sendable {
    private let image: Mutex<VImage?>

    init(_ image: VImage) { self.image = Mutex(image) }

    /// The image the first time; nil after (the caller loads its own).
    func take() -> VImage? {
        image.withLock { taken in
            defer { taken = nil }; return taken
        }
    }
}
