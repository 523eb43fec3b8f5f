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

    /// The path for a source: planes for an 8-bit YCbCr JPEG in sRGB or untagged,
    /// turned upright (`store.orientation` `rotate`), with no metadata kept and no
    /// optimised Huffman tables (TurboJPEG 2.1 offers neither), when the decode
    /// plan streams it (`.tap`); libvips for everything else. Either way any
    /// error on the plane path falls back to libvips for that item.
    /// `THUMBPIPE_JPEG_PLANES=off` keeps every item on libvips (to compare).
    static func choose(for header: SourceHeader, plan: DecodePlan, store: PipelineSettings.Store) -> StorePath {
        guard readsPlanes(header, plan: plan), store.orientation == .rotate, !store.keepMetadata, !store.optimizeCoding
        else { return .libvips }
        return .planes
    }

    /// Whether a source's thumbnail is read from its planes: an 8-bit YCbCr JPEG
    /// in sRGB or untagged that the decode plan streams. Decided by the source
    /// alone, never the store's settings, so a thumbnail's bytes do not depend on them.
    static func readsPlanes(_ header: SourceHeader, plan: DecodePlan) -> Bool {
        guard case .tap = plan else { return false }
        // The planes are held whole (libvips streams): never for sources the decode
        // plan would not hold in memory either.
        return header.sRGBJPEG && header.width * header.height <= DecodePlan.inMemoryLimit
    }

    /// The largest file the plane path reads into memory; a larger one (a JPEG
    /// padded with megabytes after its image, say) is left to libvips, which streams it.
    static let maxFileBytes: Int64 = 64 << 20

    static let disabled = ProcessInfo.processInfo.environment["THUMBPIPE_JPEG_PLANES"] == "off"
}

/// The plane path: a JPEG's store file (and, from the same decode, its
/// thumbnail tap) made through its planes.
struct JpegPlaneStore {
    let store: ImageStore

    /// Decodes `path` into planes, fills `tap` (made by the caller for the
    /// source's stored size) from them, and, with a `temporaryPath`, turns them
    /// upright and writes the store file there. Nil when the planes cannot be had
    /// (the caller takes the libvips path); nothing is left behind then.
    /// - Throws: ``ThumbpipeError`` (74) when the file cannot be written.
    func write(
        _ path: String, header: SourceHeader, temporaryPath: String?, tap: (Int, Int) throws -> ThumbnailTap?,
        spans: inout Spans
    ) throws -> (file: TemporaryFile?, tap: ThumbnailTap?, sourceHash: String, storeHash: String?)? {
        var planes = CJpegPlanes()
        var error = [CChar](repeating: 0, count: 256)
        guard let bytes = FileInfo(path: path)?.size, bytes <= StorePath.maxFileBytes else { return nil }
        // The bytes decoded are the bytes hashed: the source is read once.
        var sourceHash = ""
        let decoded: Bool = spans.measure(.decode) {
            guard let bytes = FileManager.default.contents(atPath: path) else { return false }
            return bytes.withUnsafeBytes { raw in
                sourceHash = ContentHash.hex(bytes: raw)
                return CJpegPlanes_decode(
                    raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &planes, &error, error.count) == 0
            }
        }
        guard decoded else { return nil }
        defer { CJpegPlanes_free(&planes) }
        guard planes.width == header.width, planes.height == header.height else { return nil }
        let filled = try tap(Int(planes.width), Int(planes.height))
        if let filled {
            guard
                CThumbKernels_tap_add_ycbcr420(
                    filled.pointer, planes.y, planes.y_stride, planes.cb, planes.cr, planes.chroma_width) == 0
            else { return nil }
        }
        guard let temporaryPath else { return (nil, filled, sourceHash, nil) }
        var jpeg: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let encoded: Bool = spans.measure(.store) {
            guard CJpegPlanes_orient(&planes, Int32(header.orientation), &error, error.count) == 0 else { return false }
            return CJpegPlanes_encode(&planes, Int32(store.settings.vipsQuality), &jpeg, &size, &error, error.count)
                == 0
        }
        defer { CJpegPlanes_free_buffer(jpeg) }
        guard encoded, let jpeg else { return nil }
        let output = UnsafeRawBufferPointer(start: jpeg, count: Int(size))
        let file = try TemporaryFile(path: temporaryPath)
        do {
            try spans.measure(.store) { try file.write(output) }
        } catch {
            file.discard()
            throw error
        }
        // Hashed from the bytes written, not read back from the file.
        return (file, filled, sourceHash, ContentHash.hex(bytes: output))
    }
}
