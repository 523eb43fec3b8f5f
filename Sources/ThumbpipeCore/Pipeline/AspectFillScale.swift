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
            return try fill(
                image, fullWidth: Double(image.width), fullHeight: Double(image.height), scale: 1,
                orientation: image.orientation, premultiplied: alpha)
        }
    }

    /// Scales, crops and orients a tap's block means (premultiplied RGBA of a
    /// `fullWidth × fullHeight` source shrunk `factor` times) into canvas-sized RGBA pixels.
    func apply(tapMeans means: VImage, fullWidth: Int, fullHeight: Int, factor: Int, orientation: Int, format: String)
        throws(ItemFailure) -> RGBABuffer
    {
        try guarded(format: format) {
            try fill(
                means, fullWidth: Double(fullWidth), fullHeight: Double(fullHeight), scale: Double(factor),
                orientation: orientation, premultiplied: true)
        }
    }

    private func guarded(format: String, _ body: () throws -> RGBABuffer) throws(ItemFailure) -> RGBABuffer {
        do {
            return try body()
        } catch let error as ItemFailure {
            throw error
        } catch let error as VipsError {
            throw Decode.failure(error, format: format, stage: .scale)
        } catch {
            throw ItemFailure(.scale, "\(error)")
        }
    }

    /// The aspect fill of `image`, whose pixels each stand for `scale × scale`
    /// pixels of a `fullWidth × fullHeight` source (in stored orientation).
    /// Works in stored coordinates, where the image is still lazy; the crop is
    /// placed where the upright centred crop lands, then the canvas-sized
    /// result is turned upright.
    private func fill(
        _ source: VImage, fullWidth w: Double, fullHeight h: Double, scale: Double, orientation: Int,
        premultiplied: Bool
    ) throws -> RGBABuffer {
        var image = source
        let swap = orientation >= 5
        let cropWidth = swap ? height : width
        let cropHeight = swap ? width : height
        let ratio = max(Double(cropWidth) / w, Double(cropHeight) / h)
        let targetWidth = max(cropWidth, Int((w * ratio).rounded()))
        let targetHeight = max(cropHeight, Int((h * ratio).rounded()))
        let hscale = Double(targetWidth) * scale / w
        let vscale = Double(targetHeight) * scale / h
        if abs(hscale - 1) > 1e-12 || abs(vscale - 1) > 1e-12 {
            image = try image.derive("resize") { CVipsShim_resize($0, $1, hscale, vscale) }
        }
        let (left, top) = Self.storedCropOrigin(
            orientation: orientation, storedWidth: targetWidth, storedHeight: targetHeight, width: width,
            height: height)
        image = try image.derive("crop") {
            CVipsShim_crop($0, $1, Int32(left), Int32(top), Int32(cropWidth), Int32(cropHeight))
        }
        if premultiplied {
            image = try image.derive("unpremultiply") { CVipsShim_unpremultiply($0, $1) }
        }
        if image.format != VIPS_FORMAT_UCHAR {
            image = try image.derive("cast") { CVipsShim_cast_uchar($0, $1, 0) }
        }
        if image.bands == 3 {
            image = try image.derive("bandjoin") { CVipsShim_bandjoin_const1($0, $1, 255) }
        }
        // The canvas-sized result is small: compute it once, then rotate in memory.
        image = try image.inMemory()
        if orientation != 1 {
            // Block means carry no metadata: say how the pixels are turned.
            vips_image_set_int(image.pointer, VIPS_META_ORIENTATION, Int32(orientation))
            image = try image.derive("autorot") { CVipsShim_autorot($0, $1) }
        }
        let pixels = try image.rgbaPixels()
        guard pixels.width == width, pixels.height == height else {
            throw ItemFailure(.scale, "scaled to \(pixels.width)×\(pixels.height), expected \(width)×\(height)")
        }
        return pixels
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
