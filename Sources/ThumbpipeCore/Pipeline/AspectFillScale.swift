import CVips
import CVipsShim

/// The aspect-fill scale stage: scales the upright source by
/// `max(W/w, H/h)` so it covers the canvas, crops the overflow around the
/// centre, and applies the EXIF orientation.
///
/// Alpha is premultiplied before resampling, so transparent pixels do not
/// bleed dark fringes into opaque ones.
public struct AspectFillScale: Sendable {
    /// Canvas width in pixels.
    public var width: Int
    /// Canvas height in pixels.
    public var height: Int

    /// Creates the stage for a `width × height` pixel canvas.
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Scales, crops and orients a decoded image into canvas-sized RGBA pixels.
    func apply(_ decoded: DecodedImage) throws(ItemFailure) -> RGBABuffer {
        try guarded(format: decoded.header.format) {
            var image = decoded.image
            let alpha = image.bands == 4
            if alpha {
                image = try image.derive("premultiply") { CVipsShim_premultiply($0, $1) }
            }
            return try fill(image, orientation: image.orientation, premultiplied: alpha)
        }
    }

    /// A tap for `image` (stored orientation) with `factor × factor` blocks that
    /// sums only what this stage's crop of it reads.
    func tap(for image: VImage, factor: Int, orientation: Int) throws(VipsError) -> ThumbnailTap {
        try tap(width: image.width, height: image.height, bands: image.bands, factor: factor, orientation: orientation)
    }

    /// The same for a `width × height` image of `bands` not in libvips (a JPEG's planes).
    func tap(width: Int, height: Int, bands: Int, factor: Int, orientation: Int) throws(VipsError) -> ThumbnailTap {
        let geometry = crop(fullWidth: Double(width), fullHeight: Double(height), orientation: orientation)
        return try ThumbnailTap(
            width: width, height: height, bands: bands, factor: factor, hscale: geometry.hscale,
            vscale: geometry.vscale, left: geometry.left, top: geometry.top, windowWidth: geometry.width,
            windowHeight: geometry.height)
    }

    /// Scales, crops and orients what a tap (made by ``tap(for:factor:orientation:)``)
    /// gathered into canvas-sized RGBA pixels: its block means resampled with
    /// Lanczos3 over the crop alone, in the calling thread (a libvips resize
    /// of these few thousand pixels costs more in building and threads than in sums).
    func apply(tap: ThumbnailTap, orientation: Int, format: String) throws(ItemFailure) -> RGBABuffer {
        try guarded(format: format) {
            let means = try tap.resampled()
            let pixels = means.withUnsafeBytes { samples in
                Self.uprightRGBA(
                    samples, width: tap.windowWidth, height: tap.windowHeight, bands: 4, isFloat: true,
                    orientation: orientation, premultiplied: true)
            }
            return try checked(pixels)
        }
    }

    private func guarded(format: String, _ body: () throws -> RGBABuffer) throws(ItemFailure) -> RGBABuffer {
        do {
            return try body()
        } catch {
            throw ItemFailure(error, format: format, stage: .scale)
        }
    }

    /// The aspect fill's scale: what an upright `width × height` image is scaled by
    /// to cover a `canvasWidth × canvasHeight` canvas. The one place it is
    /// computed: the decode plan's tap factor, shrink-on-load and the crop all take it.
    static func coverRatio(canvasWidth: Int, canvasHeight: Int, width: Double, height: Double) -> Double {
        max(Double(canvasWidth) / width, Double(canvasHeight) / height)
    }

    /// Where the aspect fill of a `fullWidth × fullHeight` source (stored
    /// orientation) lands: the scale that covers the canvas (relative to the
    /// source) and, in the scaled image, the crop that the upright centred
    /// crop becomes.
    private func crop(fullWidth w: Double, fullHeight h: Double, orientation: Int)
        -> (hscale: Double, vscale: Double, left: Int, top: Int, width: Int, height: Int)
    {
        let swap = orientation >= 5
        let cropWidth = swap ? height : width
        let cropHeight = swap ? width : height
        let ratio = Self.coverRatio(canvasWidth: width, canvasHeight: height, width: swap ? h : w, height: swap ? w : h)
        let targetWidth = max(cropWidth, Int((w * ratio).rounded()))
        let targetHeight = max(cropHeight, Int((h * ratio).rounded()))
        let (left, top) = Self.storedCropOrigin(
            orientation: orientation, storedWidth: targetWidth, storedHeight: targetHeight, width: width,
            height: height)
        return (Double(targetWidth) / w, Double(targetHeight) / h, left, top, cropWidth, cropHeight)
    }

    /// The aspect fill of a decoded `image` (stored orientation). Works in
    /// stored coordinates, where the image is still lazy; the crop is placed
    /// where the upright centred crop lands, then the canvas-sized result is
    /// turned upright.
    private func fill(_ source: VImage, orientation: Int, premultiplied: Bool) throws -> RGBABuffer {
        var image = source
        let geometry = crop(fullWidth: Double(image.width), fullHeight: Double(image.height), orientation: orientation)
        if abs(geometry.hscale - 1) > 1e-12 || abs(geometry.vscale - 1) > 1e-12 {
            image = try image.derive("resize") { CVipsShim_resize($0, $1, geometry.hscale, geometry.vscale) }
        }
        image = try image.derive("crop") {
            CVipsShim_crop(
                $0, $1, Int32(geometry.left), Int32(geometry.top), Int32(geometry.width), Int32(geometry.height))
        }
        // The canvas-sized result is small: computed once, then unpremultiplied,
        // made 8-bit RGBA and turned upright here, in one pass (as libvips's
        // unpremultiply, cast, bandjoin and autorot would, without five more
        // operations to build for 6,400 pixels).
        return try checked(Self.uprightRGBA(image, orientation: orientation, premultiplied: premultiplied))
    }

    private func checked(_ pixels: RGBABuffer) throws -> RGBABuffer {
        guard pixels.width == width, pixels.height == height else {
            throw ItemFailure(.scale, "scaled to \(pixels.width)×\(pixels.height), expected \(width)×\(height)")
        }
        return pixels
    }

    /// `image` (3 or 4 bands, 8-bit or float, stored orientation) as upright
    /// 8-bit RGBA: premultiplied alpha undone as `vips_unpremultiply` does (a
    /// factor of 255 / alpha, none for alpha within ±0.01), samples cut to 0…255 as
    /// `vips_cast` does (truncated), the EXIF `orientation` applied.
    static func uprightRGBA(_ image: VImage, orientation: Int, premultiplied: Bool) throws -> RGBABuffer {
        let isFloat = image.format == VIPS_FORMAT_FLOAT
        guard image.bands == 3 || image.bands == 4, isFloat || image.format == VIPS_FORMAT_UCHAR else {
            throw VipsError(
                operation: "scale", message: "unexpected \(image.bands)-band image of format \(image.format)")
        }
        return try image.withSamples { memory in
            uprightRGBA(
                memory, width: image.width, height: image.height, bands: image.bands,
                isFloat: isFloat, orientation: orientation, premultiplied: premultiplied)
        }
    }

    /// The same, for `width × height` pixels of `bands` samples (8-bit or float) in memory.
    static func uprightRGBA(
        _ memory: UnsafeRawBufferPointer, width w: Int, height h: Int, bands: Int, isFloat: Bool, orientation: Int,
        premultiplied: Bool
    ) -> RGBABuffer {
        let swap = orientation >= 5
        let (uw, uh) = swap ? (h, w) : (w, h)
        var out = [UInt8](repeating: 255, count: uw * uh * 4)
        func byte(_ v: Float) -> UInt8 { v >= 255 ? 255 : v > 0 ? UInt8(v) : 0 }
        precondition(memory.count >= w * h * bands * (isFloat ? 4 : 1), "fewer samples than pixels")
        guard let base = memory.baseAddress else { return RGBABuffer(width: uw, height: uh, pixels: out) }
        let floats = base.assumingMemoryBound(to: Float.self)
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        for y in 0..<uh {
            for x in 0..<uw {
                let (sx, sy) = storedPixel(x, y, orientation: orientation, width: w, height: h)
                let from = (sy * w + sx) * bands
                let to = (y * uw + x) * 4
                guard isFloat else {
                    for c in 0..<bands { out[to + c] = bytes[from + c] }
                    continue
                }
                if premultiplied && bands == 4 {
                    let alpha = floats[from + 3]
                    // libvips leaves alpha within ±0.01 as no colour at all.
                    let factor = abs(Double(alpha)) < 0.01 ? 0 : Float(255.0 / Double(alpha))
                    for c in 0..<3 { out[to + c] = byte(factor * floats[from + c]) }
                    out[to + 3] = byte(alpha)
                } else {
                    for c in 0..<bands { out[to + c] = byte(floats[from + c]) }
                }
            }
        }
        return RGBABuffer(width: uw, height: uh, pixels: out)
    }

    /// The stored pixel shown at upright (`x`, `y`) for an EXIF orientation,
    /// in a stored image of `width × height`.
    static func storedPixel(_ x: Int, _ y: Int, orientation: Int, width w: Int, height h: Int) -> (Int, Int) {
        switch orientation {
        case 2: return (w - 1 - x, y)
        case 3: return (w - 1 - x, h - 1 - y)
        case 4: return (x, h - 1 - y)
        case 5: return (y, x)
        case 6: return (y, h - 1 - x)
        case 7: return (w - 1 - y, h - 1 - x)
        case 8: return (w - 1 - y, x)
        default: return (x, y)
        }
    }

    /// Where, in stored (unrotated) pixels, the upright image's centred
    /// `width × height` crop lies, for an EXIF orientation. The upright crop
    /// starts at ⌊(W − width) / 2⌋, ⌊(H − height) / 2⌋; orientations that
    /// mirror an axis move that rounding to the other side.
    static func storedCropOrigin(orientation: Int, storedWidth sw: Int, storedHeight sh: Int, width: Int, height: Int)
        -> (left: Int, top: Int)
    {
        let swap = orientation >= 5
        let uprightWidth = swap ? sh : sw
        let uprightHeight = swap ? sw : sh
        let l = (uprightWidth - width) / 2
        let t = (uprightHeight - height) / 2
        switch orientation {
        case 2: return (sw - l - width, t)
        case 3: return (sw - l - width, sh - t - height)
        case 4: return (l, sh - t - height)
        case 5: return (t, l)
        case 6: return (t, sh - l - width)
        case 7: return (sw - t - height, sh - l - width)
        case 8: return (sw - t - height, l)
        default: return (l, t)
        }
    }
}
