import Foundation

/// Every route of one item, decided once from its header, the settings and the
/// build, before a pixel is decoded: how the source is decoded for the
/// thumbnail (``DecodePlan``), whether the thumbnail's tap reads a JPEG's
/// planes, and how the store file is made, with the reason a JPEG's store is
/// left to libvips. ``ItemJobRunner`` carries the plan out and decides nothing;
/// a plane attempt that libjpeg refuses is recorded as a change of plan.
struct ItemPlan: Sendable, Equatable {
    /// How the store file is made.
    enum Store: Sendable, Equatable {
        /// No store file is asked for.
        case none
        /// From the JPEG's planes, as they are (sRGB or untagged).
        case planes
        /// From the JPEG decoded a band at a time and converted to sRGB on the way.
        case planesConverted
        /// Through libvips; for a JPEG, why (nil for other formats).
        case libvips(String?)
    }

    /// How the source is decoded for the thumbnail.
    var decode: DecodePlan
    /// Whether the thumbnail's tap reads the JPEG's planes (or its converted bands):
    /// decided by the source alone, never the store's settings, so a thumbnail's
    /// bytes do not depend on them.
    var thumbnailOnPlanes: Bool
    /// How the store file is made.
    var store: Store
    /// Whether a JPEG in sRGB (or untagged) on the planes, upright or turned
    /// without moving its block grid (``turnKeepsBlocks``), has its store taken
    /// as coded when it is 4:2:0: requantized from the source's blocks, turned
    /// block by block, no forward DCT run (``StorePath/planesRequantized``).
    var blocks: Bool
    /// Whether the thumbnail's tap adds up the JPEG's blocks' means (each one's
    /// DC: no inverse DCT runs for the thumbnail) rather than its pixels: a JPEG
    /// in sRGB (or untagged) on the planes whose tap factor is at least
    /// ``meansFactor``. Its factor is then rounded down to a multiple of it
    /// (``planeTapFactor``), so that every component's blocks tile the tap's and
    /// their means are the pixels' means. Decided by the source alone, like
    /// ``thumbnailOnPlanes``.
    var tapMeans: Bool
    /// The tap's factor on the planes (0 when the thumbnail is not on them): the
    /// decode plan's, or with ``tapMeans`` that rounded down to a multiple of ``meansFactor``.
    var planeTapFactor: Int
    /// Whether a turned JPEG's store is held in less than its decoded pixels until
    /// the decode ends (the same store, byte for byte, either way):
    /// - one in sRGB (or untagged) whose turn moves its block grid (not
    ///   ``blocks``) and whose tap reads its blocks' means is held as coded, its
    ///   pixels decoded and turned band by band for the store, rather than held
    ///   whole as decoded planes (4:2:0 sources whose file promises packed blocks
    ///   smaller than the planes). A tap that reads pixels needs the planes.
    /// - one converted (``Store/planesConverted``) with even sides is held as the
    ///   store's own YCbCr, 1.5 bytes a pixel, rather than as its converted RGB (3).
    var holdTurned: Bool

    /// The smallest tap factor read from blocks' means, and what it is rounded to
    /// a multiple of: a 4:2:0 JPEG's chroma block covers 16 × 16 pixels. (The
    /// tap's Lanczos3 then shrinks by more than the 2× it leaves at least.)
    static let meansFactor = 16

    /// The plan for a source of `header` whose job asks for a store file
    /// (`makeStore`), on `canvasWidth × canvasHeight`, with `settings`' store,
    /// the plane path allowed by the build (`planes`, ``buildOptions``).
    static func make(
        header: SourceHeader, makeStore: Bool, canvasWidth: Int, canvasHeight: Int, store: PipelineSettings.Store,
        planes: Bool
    ) -> ItemPlan {
        let decode = DecodePlan.choose(for: header, canvasWidth: canvasWidth, canvasHeight: canvasHeight)
        let offPlanes = reasonOffPlanes(header, decode: decode, planes: planes)
        let storeRoute: Store
        if !makeStore {
            storeRoute = .none
        } else if let reason = offPlanes ?? reasonOffPlanes(store) {
            storeRoute = .libvips(header.jpegColour == nil ? nil : reason)
        } else {
            storeRoute = header.jpegColour == .matrix ? .planesConverted : .planes
        }
        // The coded routes need the source's own samples: a converted source's are not the store's,
        // and its tap reads its pixels (the conversion is not affine).
        let asCoded = offPlanes == nil && header.jpegColour == .sRGB
        let blocks =
            asCoded && turnKeepsBlocks(width: header.width, height: header.height, orientation: header.orientation)
        var tapMeans = false
        var planeTapFactor = 0
        if offPlanes == nil, case .tap(let factor) = decode {
            tapMeans = asCoded && factor >= meansFactor
            planeTapFactor = tapMeans ? factor - factor % meansFactor : factor
        }
        // A converted one is held as its store's YCbCr when its sides are even (2 × 2 blocks turn onto 2 × 2 blocks).
        let evenSides = header.width % 2 == 0 && header.height % 2 == 0
        let holdTurned =
            header.orientation != 1 && !blocks && (tapMeans || (storeRoute == .planesConverted && evenSides))
        return ItemPlan(
            decode: decode, thumbnailOnPlanes: offPlanes == nil, store: storeRoute, blocks: blocks, tapMeans: tapMeans,
            planeTapFactor: planeTapFactor, holdTurned: holdTurned)
    }

    /// Whether turning a 4:2:0 JPEG of `width × height` by EXIF `orientation`
    /// keeps its block grid: the stored edges that become the upright image's
    /// left and top must be whole 16-pixel MCUs (the right and bottom ones may
    /// be partial). A camera's 4032 × 3024 or 6000 × 4000 always is.
    static func turnKeepsBlocks(width: Int, height: Int, orientation: Int) -> Bool {
        let wide = width % 16 == 0, high = height % 16 == 0
        switch orientation {
        case 1, 5: return true
        case 2, 8: return wide
        case 4, 6: return high
        case 3, 7: return wide && high
        default: return false
        }
    }

    /// Why a source's pixels are not read through its planes, or nil when they are.
    private static func reasonOffPlanes(_ header: SourceHeader, decode: DecodePlan, planes: Bool) -> String? {
        switch header.jpegColour {
        case nil: return "not a JPEG"
        case .other(let what): return what
        case .sRGB, .matrix: break
        }
        if !planes { return "THUMBPIPE_JPEG_PLANES=off" }
        switch decode {
        case .tap: break
        case .once: return "too small to shrink on load"
        case .twice: return "a strip too large to hold"
        }
        // A turned source's planes are held whole (libvips streams): never for
        // sources the decode plan would not hold in memory either.
        if header.width * header.height > DecodePlan.inMemoryLimit { return "over 30 Mpx" }
        return nil
    }

    /// Why the store's settings need libvips, or nil when the planes serve them.
    private static func reasonOffPlanes(_ store: PipelineSettings.Store) -> String? {
        if store.orientation != .rotate { return "store.orientation tag" }
        // libvips's keeping rewrites the EXIF it copies.
        if store.keepMetadata { return "store.keepMetadata" }
        return nil
    }

    /// The switches of this build that change which route an item takes, in
    /// words ("" when none is set): part of every output's fingerprint
    /// (``OutputVersions/buildOptions``), so a route the build forces never
    /// changes bytes unseen.
    static var buildOptions: [String] { StorePath.disabled ? ["planes off"] : [] }
}
