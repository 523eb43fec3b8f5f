import CThumbKernels
import CVips
import CVipsShim

/// The tap in the store's pixel stream (see ``DecodePlan/tap(factor:)``): an
/// image that passes its source's pixels through unchanged while adding each
/// one, once, to `factor × factor` block sums (only the blocks its thumbnail
/// reads). Once the store has pulled every pixel, its block means, resampled
/// over the thumbnail's crop, are the thumbnail's pixels.
final class ThumbnailTap {
    let pointer: OpaquePointer
    /// The stored size of the tapped image and the block size.
    let width: Int
    let height: Int
    let factor: Int
    /// The resample's output window: its size in pixels.
    let windowWidth: Int
    let windowHeight: Int

    /// A tap for `image` (8-bit, 3 or 4 bands) with `factor × factor` blocks,
    /// whose block means are to be resampled by `hscale × vscale` (relative to
    /// the image) over the window at (`left`, `top`) of `windowWidth × windowHeight`.
    convenience init(
        for image: VImage, factor: Int, hscale: Double, vscale: Double, left: Int, top: Int, windowWidth: Int,
        windowHeight: Int
    ) throws(VipsError) {
        try self.init(
            width: image.width, height: image.height, bands: image.bands, factor: factor, hscale: hscale,
            vscale: vscale, left: left, top: top, windowWidth: windowWidth, windowHeight: windowHeight)
    }

    /// A tap for a `width × height` image of `bands` (the size a JPEG's planes have).
    init(
        width: Int, height: Int, bands: Int, factor: Int, hscale: Double, vscale: Double, left: Int, top: Int,
        windowWidth: Int, windowHeight: Int
    ) throws(VipsError) {
        guard
            let tap = CThumbKernels_tap_new(
                Int32(width), Int32(height), Int32(bands), Int32(factor), hscale * Double(factor),
                vscale * Double(factor), Int32(left), Int32(top), Int32(windowWidth), Int32(windowHeight))
        else { throw VipsError(operation: "tap", message: "cannot tap a \(bands)-band image") }
        pointer = tap
        self.width = width
        self.height = height
        self.factor = factor
        self.windowWidth = windowWidth
        self.windowHeight = windowHeight
    }

    deinit { CThumbKernels_tap_unref(pointer) }

    /// `image`, pixel for pixel, with every computed pixel added to the sums
    /// (the returned image holds the tap as long as it lives).
    func tapping(_ image: VImage) throws -> VImage {
        try image.derive("tap") { CThumbKernels_tap($0, $1, pointer) }
    }

    /// The bytes the tap holds.
    var bytes: Int { CThumbKernels_tap_bytes(pointer) }

    /// The block means resampled with Lanczos3 over the window: premultiplied
    /// RGBA floats on 0…255, row by row.
    func resampled() throws -> [Float] {
        var out = [Float](repeating: 0, count: windowWidth * windowHeight * 4)
        let status = out.withUnsafeMutableBufferPointer { CThumbKernels_tap_resample(pointer, $0.baseAddress) }
        try Vips.check(status, "tap")
        return out
    }

    /// Pulls every pixel of `image` through, for a thumbnail without a store file.
    static func drain(_ image: VImage) throws {
        try Vips.check(CVipsShim_drain(image.pointer), "drain")
    }
}
