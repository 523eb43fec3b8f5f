import CJpegPlanes
import CThumbKernels
import Foundation

/// How an item's store file is made: the one decision, reported per item
/// (`path` in the report's slowest items and profile, and in the trace).
public enum StorePath: String, Sendable, Codable {
    /// Through the JPEG's Y, Cb, Cr planes (libjpeg-turbo): no chroma upsampled,
    /// no colour converted and back, the thumbnail's blocks read from the planes.
    case planes
    /// Through libvips: decode to sRGB pixels, turn upright, encode.
    case libvips

    /// The path for a source: planes for an 8-bit YCbCr JPEG in sRGB or untagged
    /// (any of libjpeg's 4:2:0, 4:2:2, 4:4:0 and 4:4:4 samplings), turned upright
    /// (`store.orientation` `rotate`), with no metadata kept (libvips's keeping
    /// rewrites the EXIF it copies), when the decode plan streams it (`.tap`);
    /// libvips for everything else. Either way any error on the plane path falls
    /// back to libvips for that item. `THUMBPIPE_JPEG_PLANES=off` keeps every
    /// item on libvips (to compare).
    static func choose(for header: SourceHeader, plan: DecodePlan, store: PipelineSettings.Store) -> StorePath {
        guard readsPlanes(header, plan: plan), store.orientation == .rotate, !store.keepMetadata
        else { return .libvips }
        return .planes
    }

    /// Whether a source's thumbnail is read from its planes: an 8-bit YCbCr JPEG
    /// in sRGB or untagged that the decode plan streams. Decided by the source
    /// alone, never the store's settings, so a thumbnail's bytes do not depend on them.
    static func readsPlanes(_ header: SourceHeader, plan: DecodePlan) -> Bool {
        guard case .tap = plan else { return false }
        // A turned source's planes are held whole (libvips streams): never for
        // sources the decode plan would not hold in memory either.
        return header.sRGBJPEG && header.width * header.height <= DecodePlan.inMemoryLimit
    }

    /// The largest file the plane path reads into memory; a larger one (a JPEG
    /// padded with megabytes after its image, say) is left to libvips, which streams it.
    static let maxFileBytes: Int64 = 64 << 20

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
    }

    /// Decodes a source's bytes through its planes, fills the tap `tap` makes
    /// (for the source's stored size), and with a `descriptor` writes there the
    /// store file, upright. Nil when the planes cannot be had (the caller takes
    /// the libvips path); nothing is written then.
    /// - Throws: ``ThumbpipeError`` (74) when the bytes cannot be written.
    func write(
        _ source: SourceBytes, header: SourceHeader, into descriptor: FileDescriptor?,
        tap: (Int, Int) throws -> ThumbnailTap?, spans: inout Spans
    ) throws -> Made? {
        guard Int64(source.count) <= StorePath.maxFileBytes else { return nil }
        let filled = try tap(header.width, header.height)
        var job = CJpegPlanesJob(
            width: Int32(header.width), height: Int32(header.height), orientation: Int32(header.orientation),
            quality: descriptor == nil ? 0 : Int32(store.settings.vipsQuality),
            optimize_coding: store.settings.optimizeCoding ? 1 : 0, tap: filled?.pointer)
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = spans.measure(.store) {
            source.withUnsafeBytes { raw in
                CJpegPlanes_transcode(
                    raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &job, &result, &error, error.count)
            }
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        guard status == 0 else { return nil }
        // Decoding and encoding interleave, band by band: timed apart in C.
        spans.split(lastOf: .store, into: [(.decode, result.decode_ns)])
        guard let descriptor else { return Made(tap: filled) }
        guard let jpeg = result.jpeg else { return nil }
        let output = UnsafeRawBufferPointer(start: jpeg, count: Int(result.size))
        try spans.measure(.store) {
            do { try descriptor.write(output) } catch {
                throw ThumbpipeError(.ioError, "store file: write failed: \(error)")
            }
        }
        return Made(tap: filled, wroteStore: true)
    }
}
