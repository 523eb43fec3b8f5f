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

    /// The thumbnail's pixels (before encoding), timing each stage into `timings`.
    public func pixels(for path: String, header: SourceHeader, timings: inout [Stage: Double]) throws(ItemFailure)
        -> RGBABuffer
    {
        var clock = StageClock()
        let decoded = try decode.forThumbnail(
            path, header: header, canvasWidth: scale.width, canvasHeight: scale.height)
        timings[.decode, default: 0] += clock.lap()
        // libvips is lazy: the pixels are decoded while scaling pulls them, so
        // the scale span includes the decode's pixel work.
        var buffer = try scale.apply(decoded)
        timings[.scale, default: 0] += clock.lap()
        clip.apply(to: &buffer)
        timings[.clip, default: 0] += clock.lap()
        return buffer
    }

    /// The PNG thumbnail of the source at `path`, timing each stage into `timings`.
    /// - Throws: ``ItemFailure`` naming the stage that failed.
    public func thumbnail(for path: String, header: SourceHeader, timings: inout [Stage: Double]) throws(ItemFailure)
        -> Data
    {
        let buffer = try pixels(for: path, header: header, timings: &timings)
        var clock = StageClock()
        let png = try encode.apply(buffer)
        timings[.encode, default: 0] += clock.lap()
        return png
    }
}

/// Measures consecutive spans of wall time.
struct StageClock {
    private var last = DispatchTime.now().uptimeNanoseconds

    /// Seconds since the last lap (or creation).
    mutating func lap() -> Double {
        let now = DispatchTime.now().uptimeNanoseconds
        defer { last = now }
        return Double(now - last) / 1e9
    }
}
