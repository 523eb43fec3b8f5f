import Foundation

/// How one item's source is decoded: the one place that decides it.
public enum DecodePlan: String, Sendable, Codable {
    /// One streaming full decode makes the store file; the thumbnail is then
    /// made from that file with shrink-on-load. Its Q=50 JPEG is a fraction of
    /// the source's size, so the second, 1/8-scale decode is cheap, and the
    /// file is already sRGB and upright.
    case fromStore
    /// One full decode into memory feeds both the store and the thumbnail.
    case once
    /// A streaming full decode for the store, and a separate shrink-on-load
    /// decode of the source for the thumbnail.
    case twice

    /// Sources larger than this (in pixels) are never held in memory whole.
    public static let inMemoryLimit = 30_000_000

    /// The plan `THUMBPIPE_DECODE` forces, read once rather than per item.
    private static let forcedPlan = ProcessInfo.processInfo.environment["THUMBPIPE_DECODE"].flatMap(DecodePlan.init)

    /// The plan that measured fastest for a source (see the README): from the
    /// store file for opaque sources, which needs one full decode and no
    /// in-memory copy; one in-memory decode for sources with alpha (the store
    /// JPEG has none to give) up to ``inMemoryLimit``; two streaming decodes
    /// otherwise. The store must be at least Q=50 to feed a thumbnail.
    /// `THUMBPIPE_DECODE=fromStore|once|twice` forces a plan where it is possible, for measuring.
    public static func choose(for header: SourceHeader, store: PipelineSettings.Store) -> DecodePlan {
        let fits = header.width * header.height <= inMemoryLimit
        let storeCanFeed = !header.hasAlpha && store.quality >= 0.5
        if let forced = forcedPlan {
            switch forced {
            case .fromStore where storeCanFeed, .twice: return forced
            case .once where fits: return forced
            default: break
            }
        }
        if storeCanFeed { return .fromStore }
        return fits ? .once : .twice
    }
}
