import CJpegPlanes
import CThumbKernels
import Foundation

/// How an item's store file was made (the route ``ItemPlan`` chose), reported per
/// item (`path` in the report's slowest items and profile, and in the trace).
public enum StorePath: String, Sendable, Codable {
    /// Through the JPEG's Y, Cb, Cr planes (libjpeg-turbo): no chroma upsampled,
    /// no colour converted and back, the thumbnail's blocks read from the planes.
    case planes
    /// A 4:2:0 JPEG's store taken as coded (``ItemPlan/blocks``): its blocks
    /// entropy-decoded, turned upright and requantized to the store's tables, no
    /// forward DCT run.
    case planesRequantized = "planes, requantized"
    /// Through libjpeg-turbo a band at a time, colour converted to sRGB on the way
    /// (a JPEG in an RGB matrix/TRC profile).
    case planesConverted = "planes, converted"
    /// A HEIC's tiles decoded by libavcodec into YCbCr planes (``HeicPlaneStore``),
    /// sRGB (or untagged): through RGB (another matrix or range, or turned), or
    /// encoded as decoded (upright, in JPEG's own YCbCr), or converted to sRGB band by band.
    case heicPlanes = "planes, HEIC"
    case heicPlanesAsDecoded = "planes, HEIC, as decoded"
    case heicPlanesConverted = "planes, HEIC, converted"
    /// Through libvips: decode to sRGB pixels, turn upright, encode.
    case libvips

    /// The largest file the plane path reads into memory; a larger one (a JPEG
    /// padded with megabytes after its image, say) is left to libvips, which streams it.
    static let maxFileBytes: Int64 = 64 << 20

    /// `THUMBPIPE_JPEG_PLANES=off` keeps every item on libvips (to compare).
    static let disabled = ProcessInfo.processInfo.environment["THUMBPIPE_JPEG_PLANES"] == "off"
}

/// The plane path: a JPEG's store file (and, from the same decode, its
/// thumbnail tap) made through its planes, band by band.
struct JpegPlaneStore {
    let store: ImageStore

    /// What the plane path made of a source.
    struct Made {
        /// The tap, filled from the planes (nil when none was asked for).
        var tap: ThumbnailTap?
        /// Whether the store file's bytes were written to the descriptor.
        var wroteStore = false
        /// The store's route when it was written (planes as decoded, converted or requantized).
        var path: StorePath?
        /// Why libjpeg refused the source (nothing was made then: the caller takes libvips).
        var refused: String?
    }

    /// Decodes a source's bytes through its planes (converted to sRGB a band at
    /// a time when the header carries a conversion), fills the tap `tap` makes
    /// (for the source's stored size), and with a `descriptor` writes there the
    /// store file, upright. When libjpeg refuses the source, nothing is written
    /// and ``Made/refused`` says why (the caller takes the libvips path); the
    /// attempt's time is in `spans` either way. `planes` says which coded routes
    /// the source may take (``ItemPlan/Planes/blocks``, ``ItemPlan/Planes/tapMeans``,
    /// ``ItemPlan/Planes/holdTurned``); libjpeg takes them where the sampling allows.
    /// - Throws: ``ThumbpipeError`` (74) when the bytes cannot be written.
    func write(
        _ source: SourceBytes, header: SourceHeader, into descriptor: FileDescriptor?, planes: ItemPlan.Planes,
        tap: (Int, Int) throws -> ThumbnailTap?, spans: inout Spans
    ) throws -> Made {
        // The plan took the source's size and the profile's range into account;
        // these hold what it decided should a caller not ask it.
        guard Int64(source.count) <= StorePath.maxFileBytes else { return Made(refused: "a file over 64 MB") }
        let shaper = header.conversion?.makeShaper()
        defer { CThumbKernels_shaper_free(shaper) }
        if header.conversion != nil && shaper == nil { return Made(refused: "a profile matrix out of range") }
        let filled = try tap(header.width, header.height)
        var job = CJpegPlanesJob(
            width: Int32(header.width), height: Int32(header.height), orientation: Int32(header.orientation),
            quality: descriptor == nil ? 0 : Int32(store.settings.vipsQuality),
            optimize_coding: store.settings.optimizeCoding ? 1 : 0, tap: filled?.pointer, shaper: shaper,
            blocks: planes.blocks ? 1 : 0, tap_means: planes.tapMeans ? 1 : 0, hold_turned: planes.holdTurned ? 1 : 0)
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = spans.measure(.store) {
            source.withUnsafeBytes { raw in
                CJpegPlanes_transcode(
                    raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &job, &result, &error, error.count)
            }
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        // Decoding, colour and encoding interleave, band by band: timed apart in C.
        spans.split(lastOf: .store, into: [(.decode, result.decode_ns), (.colour, result.colour_ns)])
        guard status == 0 else {
            return Made(refused: "libjpeg refused it (\(String(cBuffer: error).numbersAsN))")
        }
        guard let descriptor else { return Made(tap: filled) }
        guard let jpeg = result.jpeg else { return Made(refused: "no store bytes") }
        let output = UnsafeRawBufferPointer(start: jpeg, count: Int(result.size))
        try spans.measure(.store) {
            do { try descriptor.write(output) } catch {
                throw ThumbpipeError(.ioError, "store file: write failed: \(error)")
            }
        }
        let path: StorePath = shaper != nil ? .planesConverted : result.requantized != 0 ? .planesRequantized : .planes
        return Made(tap: filled, wroteStore: true, path: path)
    }
}
