import CVips
import CVipsShim

/// The tap in the store's pixel stream (see ``DecodePlan/tap(factor:)``): an
/// image that passes its source's pixels through unchanged while adding each
/// one, once, to `factor × factor` block sums. Once the store has pulled every
/// pixel, its block means are the source box-shrunk, premultiplied, ready for
/// the final resize.
final class ThumbnailTap {
    private let pointer: OpaquePointer
    /// The stored size of the tapped image and the block size.
    let width: Int
    let height: Int
    let factor: Int

    /// A tap for `image` (8-bit, 3 or 4 bands) with `factor × factor` blocks.
    init(for image: VImage, factor: Int) throws(VipsError) {
        guard let tap = CVipsShim_tap_new(Int32(image.width), Int32(image.height), Int32(image.bands), Int32(factor))
        else { throw VipsError(operation: "tap", message: "cannot tap a \(image.bands)-band image") }
        pointer = tap
        width = image.width
        height = image.height
        self.factor = factor
    }

    deinit { CVipsShim_tap_free(pointer) }

    /// `image`, pixel for pixel, with every computed pixel added to the sums.
    /// The tap must outlive the returned image.
    func tapping(_ image: VImage) throws -> VImage {
        try image.derive("tap") { CVipsShim_tap($0, $1, pointer) }
    }

    /// The block means resampled with Lanczos3 by `hscale × vscale`, over the
    /// output window at (`left`, `top`) of `width × height`: premultiplied RGBA
    /// floats on 0…255, row by row.
    func resampled(hscale: Double, vscale: Double, left: Int, top: Int, width: Int, height: Int) throws -> [Float] {
        var out = [Float](repeating: 0, count: width * height * 4)
        let status = out.withUnsafeMutableBufferPointer {
            CVipsShim_tap_resample(
                pointer, hscale, vscale, Int32(left), Int32(top), Int32(width), Int32(height), $0.baseAddress)
        }
        try Vips.check(status, "tap")
        return out
    }

    /// Pulls every pixel of `image` through, for a thumbnail without a store file.
    static func drain(_ image: VImage) throws {
        try Vips.check(CVipsShim_drain(image.pointer), "drain")
    }
}
