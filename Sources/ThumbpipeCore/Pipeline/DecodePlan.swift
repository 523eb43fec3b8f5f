import Foundation

/// How one item's source is decoded, by its size against the canvas: tapped
/// while streaming, held once in memory, or decoded twice. Which decoder serves
/// a tap (a YCbCr JPEG's planes or libvips) and how the store is made are
/// ``ItemPlan``'s decisions, which hold this plan too.
///
/// Every plan decodes the source's own pixels for the thumbnail; none reads
/// the store file back, so a thumbnail depends on the source and the
/// thumbnail settings only, never on the store's.
public enum DecodePlan: Sendable, Equatable {
    /// One full decode: the store's pipeline pulls the pixels towards the JPEG
    /// encoder, and a tap on the way box-averages them by `factor` for the
    /// thumbnail (the largest whole factor that still leaves ≥ 2× for the final
    /// Lanczos3 resize, libvips's own rule for shrink-on-load); a YCbCr JPEG's
    /// tap reads the same blocks from its planes instead (``StorePath``).
    case tap(factor: Int)
    /// Sources too small to shrink (the covering side is under 4× the canvas):
    /// one full decode into memory feeds both outputs.
    case once
    /// Sources too small to shrink yet too large to hold in memory (extreme
    /// strips): a streaming decode for the store and a shrink-on-load one for the thumbnail.
    case twice

    /// Sources larger than this (in pixels) are never held in memory whole.
    public static let inMemoryLimit = 30_000_000

    /// The plan for a source of `header` on a `canvasWidth × canvasHeight` canvas.
    public static func choose(for header: SourceHeader, canvasWidth: Int, canvasHeight: Int) -> DecodePlan {
        let upright = header.uprightSize
        let ratio = AspectFillScale.coverRatio(
            canvasWidth: canvasWidth, canvasHeight: canvasHeight, width: Double(upright.width),
            height: Double(upright.height))
        let factor = Int((1 / ratio / 2).rounded(.down))
        if factor >= 2 { return .tap(factor: factor) }
        return header.width * header.height <= inMemoryLimit ? .once : .twice
    }
}
