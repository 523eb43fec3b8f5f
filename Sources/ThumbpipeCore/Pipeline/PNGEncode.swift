import CVips
import CVipsShim
import Foundation

/// The PNG encode stage: 8-bit RGBA PNG, no metadata, so the same pixels give the same bytes.
public struct PNGEncode: Sendable {
    /// zlib compression level, 0–9.
    public var compression: Int32

    /// Creates the stage; libvips's default compression is 6.
    public init(compression: Int32 = 6) { self.compression = compression }

    /// Encodes `buffer` as PNG (vips_pngsave_buffer).
    /// - Throws: ``ItemFailure`` at `.encode`.
    public func apply(_ buffer: RGBABuffer) throws(ItemFailure) -> Data {
        do {
            try Vips.start()
            let image = try VImage.fromPixels(buffer)
            var memory: UnsafeMutableRawPointer? = nil
            var length = 0
            try Vips.check(CVipsShim_pngsave_buffer(image.pointer, &memory, &length, compression), "pngsave")
            guard let memory else { throw VipsError(operation: "pngsave", message: "no buffer") }
            defer { CVipsShim_free(memory) }
            return Data(bytes: memory, count: length)
        } catch {
            throw ItemFailure(.encode, "PNG encode failed: \(error)")
        }
    }
}
