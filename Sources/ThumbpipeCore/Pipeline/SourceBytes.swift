import CVips
import CVipsShim
import Foundation

/// A source's bytes, read whole from the descriptor the parent opened: a worker
/// never opens a source by name (its sandbox gives it no read access to the
/// user's files). libvips loads from them (a `VipsSource` over the blob), the
/// plane path reads them, and they go when the last image decoded from them does.
final class SourceBytes {
    private let blob: UnsafeMutablePointer<VipsBlob>

    /// Reads the file open as `descriptor` (from offset 0; the descriptor's own offset is left alone).
    /// - Throws: ``ItemFailure`` at `.decode` when it cannot be read or is over `limit` bytes (0: none).
    init(descriptor: FileDescriptor, limit: Int = 0) throws(ItemFailure) {
        var code: Int32 = 0
        guard let blob = CVipsShim_blob_read_fd(descriptor.rawValue, size_t(max(0, limit)), &code) else {
            switch code {
            case EISDIR: throw ItemFailure(.decode, "is a directory, not an image")
            case EFBIG: throw ItemFailure(.decode, "file is over limits.maxFileBytes (\(limit))")
            case EINVAL: throw ItemFailure(.decode, "not a regular file, or empty")
            default: throw ItemFailure(.decode, "cannot read: \(ThumbpipeError.errnoText(code))")
            }
        }
        self.blob = blob
    }

    /// Opens and reads the file at `path` (tests, the benchmark's store floor).
    convenience init(path: String, limit: Int = 0) throws(ItemFailure) {
        try Decode.checkReadableFile(path)
        try self.init(descriptor: try Self.open(path), limit: limit)
    }

    private static func open(_ path: String) throws(ItemFailure) -> FileDescriptor {
        do { return try FileDescriptor.open(path, O_RDONLY) } catch {
            throw ItemFailure(.decode, "cannot open: \(error)")
        }
    }

    deinit { CVipsShim_blob_release(blob) }

    /// The number of bytes.
    var count: Int {
        var length = 0
        _ = CVipsShim_blob_bytes(blob, &length)
        return length
    }

    /// Calls `body` with the bytes.
    func withUnsafeBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        var length = 0
        let start = CVipsShim_blob_bytes(blob, &length)
        return try body(UnsafeRawBufferPointer(start: start, count: length))
    }

    /// The first `count` bytes (fewer when the source is shorter).
    func head(_ count: Int = 512) -> [UInt8] {
        withUnsafeBytes { [UInt8]($0.prefix(count)) }
    }

    /// The loader libvips picks for these bytes, or nil.
    func loader() -> String? {
        CVipsShim_find_loader_blob(blob).map { String(cString: $0) }
    }

    /// Loads an image from these bytes (CVipsShim_load_blob's options).
    func load(shrink: Int32, scale: Double, failOn: Int32, sequential: Bool) -> UnsafeMutablePointer<VipsImage>? {
        var out: UnsafeMutablePointer<VipsImage>? = nil
        guard CVipsShim_load_blob(blob, shrink, scale, failOn, sequential ? 1 : 0, &out) == 0 else { return nil }
        return out
    }
}
