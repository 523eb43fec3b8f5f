import Foundation

/// The thumbnail path of the pipeline: decode → aspect-fill scale → rounded clip → PNG encode.
public struct Thumbnailer: Sendable {
    /// The decode stage.
    public var decode: Decode
    /// The aspect-fill scale stage.
    public var scale: AspectFillScale
    /// The rounded clip stage.
    public var clip: RoundedClip
    /// The PNG encode stage.
    public var encode: PNGEncode

    /// Builds the stages from pipeline settings.
    public init(settings: PipelineSettings) {
        decode = Decode(limits: settings.limits)
        scale = AspectFillScale(width: settings.thumbnail.pixelWidth, height: settings.thumbnail.pixelHeight)
        clip = RoundedClip(radius: settings.thumbnail.pixelRadius)
        encode = PNGEncode()
    }

    /// The thumbnail's pixels (before encoding) of a source,
    /// decoded with shrink-on-load for this canvas.
    func pixels(for source: SourceBytes, header: SourceHeader, spans: inout Spans) throws(ItemFailure) -> RGBABuffer {
        let decoded = try spans.measure(.decode) { () throws(ItemFailure) in
            try decode.forThumbnail(source, header: header, canvasWidth: scale.width, canvasHeight: scale.height)
        }
        return try pixels(from: decoded, spans: &spans)
    }

    /// The thumbnail's pixels of an already decoded image.
    func pixels(from decoded: DecodedImage, spans: inout Spans) throws(ItemFailure) -> RGBABuffer {
        // libvips is lazy: when the decode streams, its pixel work happens
        // while scaling pulls the pixels, inside the scale span.
        var buffer = try spans.measure(.scale) { () throws(ItemFailure) in try scale.apply(decoded) }
        spans.measure(.clip) { clip.apply(to: &buffer) }
        return buffer
    }

    /// The PNG thumbnail of the source at `path` (opened here: tests and tools outside a worker).
    /// - Throws: ``ItemFailure`` naming the stage that failed.
    public func thumbnail(for path: String, spans: inout Spans) throws(ItemFailure) -> Data {
        let source = try SourceBytes(path: path, limit: decode.limits.maxFileBytes)
        let header = try decode.header(of: source)
        let buffer = try pixels(for: source, header: header, spans: &spans)
        return try spans.measure(.encode) { () throws(ItemFailure) in try encode.apply(buffer) }
    }

    /// The thumbnail's pixels from a tap the store's pipeline (or a drain) has pulled every pixel through.
    func pixels(fromTap tap: ThumbnailTap, header: SourceHeader, spans: inout Spans) throws(ItemFailure) -> RGBABuffer {
        var buffer = try spans.measure(.scale) { () throws(ItemFailure) in
            try scale.apply(tap: tap, orientation: header.orientation, format: header.format)
        }
        spans.measure(.clip) { clip.apply(to: &buffer) }
        return buffer
    }
}
