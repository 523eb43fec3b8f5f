// Here, not in HEIC/: in a whole-module build the first file (by path) to see
// libvips's headers through another module (CThumbKernels) would own their
// declarations, and files that import CVips alone would not find its constants.
// Pipeline/AspectFillScale.swift imports CVips first; HEIC/ holds no C imports.
import CHevc
import CJpegPlanes
import CThumbKernels
import Foundation
import Synchronization

/// The HEIC route: a HEIC's primary image decoded picture by picture by
/// libavcodec (``HEIFContainer`` finds them, `CHevc` decodes them), its tiles'
/// YCbCr planes assembled and cropped to the image, then converted, tapped for the
/// thumbnail and encoded for the store band by band as the JPEG converted route
/// does (`CJpegPlanes_encode_ycc`): its ICC profile (Display P3) to sRGB by the
/// same tables, turned upright by `irot`/`imir`. What the route does not handle
/// is refused with the reason, and libvips decodes the file instead.
struct HeicPlaneStore {
    let store: ImageStore
    /// The most pixels the planes may hold (``PipelineSettings/Limits/maxPixels``).
    let maxPixels: Int

    /// `THUMBPIPE_HEIC_PLANES=off` leaves every HEIC to libvips (to compare).
    static let disabled = ProcessInfo.processInfo.environment["THUMBPIPE_HEIC_PLANES"] == "off"

    /// Loads the HEVC decoder (libavcodec, by dlopen) when `formats` allow HEIF and the
    /// route is on: a worker that expects a HEIC calls it before it enters its sandbox.
    /// Without it the route loads it on its first HEIC (a HEIC named otherwise, in
    /// its worker's sandbox; tests that run items in process).
    static func prepare(formats: ImageFormats) {
        if formats.contains(.heif) && !disabled { _ = CHevc_load() }
    }

    /// Whether `path` is named like a HEIC.
    static func namedLikeHEIC(_ path: String) -> Bool {
        let dot = path.lastIndex(of: ".").map { path[path.index(after: $0)...].lowercased() }
        return dot == "heic" || dot == "heif" || dot == "hif"
    }

    /// Makes the thumbnail tap (`tap` gets the stored size and the orientation)
    /// and, with a `descriptor`, the store file; nothing and a reason when refused.
    /// - Parameter parsed: the container as the header read it, when it did (else it is read here).
    func write(
        _ source: SourceBytes, parsed container: HEIFImage? = nil, into descriptor: FileDescriptor?,
        tap: (Int, Int, Int) throws -> ThumbnailTap?, spans: inout Spans
    ) throws -> JpegPlaneStore.Made {
        guard Int64(source.count) <= StorePath.maxFileBytes else { return .init(refused: "a file over 64 MB") }
        let parsed =
            container.map { Result<HEIFImage, HEIFRefusal>.success($0) }
            ?? source.withUnsafeBytes { bytes in
                Result { () throws(HEIFRefusal) in try HEIFContainer.primary(bytes, maxPixels: maxPixels) }
            }
        let image: HEIFImage
        switch parsed {
        case .success(let found): image = found
        case .failure(let refusal): return .init(refused: refusal.reason)
        }
        let colour: (shaper: OpaquePointer?, refused: String?) = Self.shaper(for: image)
        defer { CThumbKernels_shaper_free(colour.shaper) }
        if let refused = colour.refused { return .init(refused: refused) }
        var planes = HEICPlanes(for: image)
        defer { planes.recycle() }
        if let refused = spans.measure(.decode, { source.withUnsafeBytes { planes.decode(image, from: $0) } }) {
            return .init(refused: refused)
        }
        guard let matrix = planes.coefficients(image) else {
            return .init(refused: "matrix coefficients \(image.matrix ?? planes.pictureMatrix)")
        }
        let filled = try tap(image.width, image.height, image.orientation)
        return try encode(
            &planes, matrix: matrix, image: image, shaper: colour.shaper, tap: filled, into: descriptor, spans: &spans)
    }

    private func encode(
        _ planes: inout HEICPlanes, matrix: (kr: Double, kb: Double, fullRange: Bool), image: HEIFImage,
        shaper: OpaquePointer?, tap: ThumbnailTap?, into descriptor: FileDescriptor?, spans: inout Spans
    ) throws -> JpegPlaneStore.Made {
        var job = CJpegPlanesJob(
            width: Int32(image.width), height: Int32(image.height), orientation: Int32(image.orientation),
            quality: descriptor == nil ? 0 : Int32(store.settings.vipsQuality),
            optimize_coding: store.settings.optimizeCoding ? 1 : 0, tap: tap?.pointer, shaper: shaper, blocks: 0,
            tap_means: 0, hold_turned: 1)
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = spans.measure(.store) {
            planes.withPlanes(kr: matrix.kr, kb: matrix.kb, fullRange: matrix.fullRange) { ycc in
                CJpegPlanes_encode_ycc(&ycc, &job, &result, &error, error.count)
            }
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        // Converting the planes to RGB counts as decoding, the profile as colour.
        spans.split(lastOf: .store, into: [(.decode, result.decode_ns), (.colour, result.colour_ns)])
        guard status == 0 else {
            return .init(refused: "the encoder refused it (\(String(cBuffer: error)))")
        }
        guard let descriptor else { return .init(tap: tap) }
        guard let jpeg = result.jpeg else { return .init(refused: "no store bytes") }
        try spans.measure(.store) {
            do { try descriptor.write(UnsafeRawBufferPointer(start: jpeg, count: Int(result.size))) } catch {
                throw ThumbpipeError(.ioError, "store file: write failed: \(error)")
            }
        }
        let path: StorePath =
            shaper != nil ? .heicPlanesConverted : result.jfif != 0 ? .heicPlanesAsDecoded : .heicPlanes
        return .init(tap: tap, wroteStore: true, path: path)
    }

    /// The conversion to sRGB the image's colour needs: none for sRGB (by its
    /// profile, or by `nclx` primaries BT.709 or unsaid without one), the tables of
    /// an RGB matrix/TRC profile (Display P3), else a refusal.
    static func shaper(for image: HEIFImage) -> (OpaquePointer?, String?) {
        guard let icc = image.icc else {
            guard [nil, 1, 2].contains(image.primaries) else {
                return (nil, "colour primaries \(image.primaries ?? 0) without a profile")
            }
            return (nil, nil)
        }
        return icc.withUnsafeBytes { bytes in
            guard let profile = ICCProfile(bytes) else { return (nil, "an unreadable profile") }
            if profile.isSRGB { return (nil, nil) }
            guard let conversion = ShaperConversion(profile: profile) else {
                return (nil, "a profile that is not RGB matrix/TRC")
            }
            guard let shaper = conversion.makeShaper() else { return (nil, "a profile matrix out of range") }
            return (shaper, nil)
        }
    }
}

extension HeicPlaneStore {
    /// The header of a HEIC the route reads, from the route's own parse of the
    /// container, not libheif's (which copies every item of the file, its tiles
    /// included, to find an image's metadata: the header stage took 1.9–2.7 ms an
    /// item against 1.2–1.4, and 5,000 more page faults over 16 phone photos; and
    /// libheif's parser is kept to files the route refuses): the size as libheif
    /// gives it (turned, no orientation left), the EXIF and XMP set on an image the
    /// way libvips's HEIF loader sets them, from the same items in the same order,
    /// and read as every header's are. Nil when the route would not take the file,
    /// or its metadata is of a kind only libheif reads: the caller then asks libvips.
    static func header(of source: SourceBytes, limits: PipelineSettings.Limits) -> SourceHeader? {
        guard !disabled, limits.formats.contains(.heif),
            limits.maxFileBytes <= 0 || source.count <= limits.maxFileBytes,
            ImageFormat.sniff(source.head()) == .heif, (try? Vips.start()) != nil,
            // The loader libvips would read it with (its signature check only): its name and shrink.
            let loader = source.loader(), ImageFormat(loader: loader) == .heif,
            let image = source.withUnsafeBytes({ try? HEIFContainer.described($0, maxPixels: limits.maxPixels) }),
            let embedded = embedded(image.metadata)
        else { return nil }
        let turned = image.orientation >= 5
        return SourceHeader(
            width: turned ? image.height : image.width, height: turned ? image.width : image.height, orientation: 1,
            format: Decode.formatName(loader: loader), embedded: embedded, hasAlpha: false,
            shrink: loader.withCString { LoadShrink(loader: $0) }, jpegColour: nil, heif: image)
    }

    /// What the photo says of itself from its metadata items, as libvips's HEIF
    /// loader reads them: each EXIF item past its 4-byte offset, and each `mime`
    /// item that is an XMP packet, set on an image in turn (a later one replacing
    /// an earlier), then the EXIF orientation removed (`irot` and `imir` turn a
    /// HEIC). Nil for an EXIF item of 4 bytes or fewer (libvips keeps it whole).
    private static func embedded(_ items: [HEIFImage.Metadata]) -> PhotoMetadata? {
        guard let pointer = vips_image_new() else { return nil }
        let image = VImage(pointer)
        for item in items where !item.bytes.isEmpty {
            let name: String
            var bytes = item.bytes[...]
            if item.type == "Exif" {
                guard bytes.count > 4 else { return nil }
                bytes = bytes.dropFirst(4)
                name = "exif-data"
            } else if bytes.count > 10 && bytes.starts(with: "<x:xmpmeta".utf8) {
                name = "xmp-data"
            } else {
                continue
            }
            // Setting "exif-data" has libvips parse it into its exif-ifd fields.
            bytes.withUnsafeBytes { vips_image_set_blob_copy(pointer, name, $0.baseAddress, $0.count) }
        }
        vips_autorot_remove_angle(pointer)
        return PhotoMetadata.read(image)
    }
}
