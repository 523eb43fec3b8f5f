import Foundation

/// Every route of one item, decided once from its header, the source's size,
/// the settings and the build, before a pixel is decoded: each case carries
/// exactly what its route needs. ``ItemJobRunner`` switches over it and decides
/// nothing; a plane attempt that libjpeg itself refuses is recorded as a change
/// of plan (libvips for both outputs, by the `factor` the case keeps for it).
enum ItemPlan: Sendable, Equatable {
    /// The thumbnail read from a JPEG's planes (or its bands converted to sRGB),
    /// and the store from them too unless its settings need libvips.
    case planes(Planes)
    /// A HEIC's primary image decoded by libavcodec tile by tile into planes
    /// (``HeicPlaneStore``): the thumbnail tapped from them, the store encoded from
    /// them (its profile converted), unless the container asks for what the route
    /// does not do; then libvips, by the tap `factor` the planes keep.
    case heic(Planes)
    /// One streaming libvips decode, tapped by `factor` for the thumbnail; the
    /// store (or a drain) pulls every pixel past the tap.
    case tap(factor: Int, store: Store)
    /// Decoded once at full size, in memory; both outputs from it.
    case once(store: Store)
    /// A shrink-on-load decode for the thumbnail, a full one for the store.
    case twice(store: Store)

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

    /// What the plane route needs.
    struct Planes: Sendable, Equatable {
        /// The libvips tap's factor, taken if libjpeg refuses the source.
        var factor: Int
        /// The tap's factor on the planes: `factor`, or with ``tapMeans`` that
        /// rounded down to a multiple of ``ItemPlan/meansFactor``, so that every
        /// component's blocks tile the tap's and their means are the pixels' means.
        var tapFactor: Int
        /// Whether the tap adds up the blocks' means (each one's DC: no inverse DCT
        /// runs for the thumbnail) rather than their pixels: a JPEG in sRGB (or
        /// untagged) whose tap factor is at least ``ItemPlan/meansFactor``.
        var tapMeans: Bool
        /// Whether a 4:2:0 JPEG in sRGB (or untagged), upright or turned without
        /// moving its block grid (``ItemPlan/turnKeepsBlocks(width:height:orientation:)``),
        /// has its store taken as coded: requantized from its blocks, turned block
        /// by block, no forward DCT run (``StorePath/planesRequantized``). libjpeg
        /// takes it where the sampling is 4:2:0.
        var blocks: Bool
        /// Whether a turned JPEG's store is held in less than its decoded pixels until
        /// the decode ends (the same store, byte for byte, either way): one in sRGB
        /// whose turn moves its block grid and whose tap reads its blocks' means is
        /// held as coded; one converted with even sides as the store's own YCbCr.
        var holdTurned: Bool
        /// How the store is made: from the planes, converted, or (its settings
        /// need it) by libvips from a full decode; or not at all.
        var store: Store
    }

    /// How the source is decoded for the thumbnail.
    var decode: DecodePlan {
        switch self {
        case .planes(let planes), .heic(let planes): .tap(factor: planes.factor)
        case .tap(let factor, _): .tap(factor: factor)
        case .once: .once
        case .twice: .twice
        }
    }

    /// How the store file is made.
    var store: Store {
        switch self {
        case .planes(let planes), .heic(let planes): planes.store
        case .tap(_, let store), .once(let store), .twice(let store): store
        }
    }

    /// The plane route's needs, when the item takes it.
    var onPlanes: Planes? {
        if case .planes(let planes) = self { return planes }
        return nil
    }

    /// The HEIC route's needs, when the item takes it.
    var onHEIC: Planes? {
        if case .heic(let planes) = self { return planes }
        return nil
    }

    /// The smallest tap factor read from blocks' means, and what it is rounded to
    /// a multiple of: a 4:2:0 JPEG's chroma block covers 16 × 16 pixels. (The
    /// tap's Lanczos3 then shrinks by more than the 2× it leaves at least.)
    static let meansFactor = 16

    /// The plan for a source of `header` (`sourceBytes` long) whose job asks for a
    /// store file (`makeStore`), on `canvasWidth × canvasHeight`, with `settings`'
    /// store, the plane path allowed by the build (`planes`, ``buildOptions``).
    /// - Parameter sampling: a JPEG's components' sampling factors (`H << 4 | V`, from
    ///   its frame header, ``frameSampling(_:)``); its store is taken as coded only
    ///   when they are 4:2:0's (`[0x22, 0x11, 0x11]`). Nil when not known: then as if 4:2:0
    ///   (the plane code takes blocks only where the sampling allows).
    static func make(
        header: SourceHeader, sourceBytes: Int = 0, sampling: [UInt8]? = nil, makeStore: Bool, canvasWidth: Int,
        canvasHeight: Int, store: PipelineSettings.Store, planes: Bool, heicPlanes: Bool = !HeicPlaneStore.disabled
    ) -> ItemPlan {
        let decode = DecodePlan.choose(for: header, canvasWidth: canvasWidth, canvasHeight: canvasHeight)
        if heicPlanes,
            let heic = heic(header, sourceBytes: sourceBytes, decode: decode, makeStore: makeStore, store: store)
        {
            return heic
        }
        let offPlanes = reasonOffPlanes(header, sourceBytes: sourceBytes, decode: decode, planes: planes)
        let storeRoute: Store
        if !makeStore {
            storeRoute = .none
        } else if let reason = offPlanes ?? reasonOffPlanes(store) {
            storeRoute = .libvips(header.jpegColour == nil ? nil : reason)
        } else {
            storeRoute = header.jpegColour == .matrix ? .planesConverted : .planes
        }
        guard offPlanes == nil, case .tap(let factor) = decode else {
            switch decode {
            case .tap(let factor): return .tap(factor: factor, store: storeRoute)
            case .once: return .once(store: storeRoute)
            case .twice: return .twice(store: storeRoute)
            }
        }
        // The coded routes need the source's own samples: a converted source's are not the store's,
        // and its tap reads its pixels (the conversion is not affine).
        let asCoded = header.jpegColour == .sRGB
        let is420 = sampling.map { $0 == [0x22, 0x11, 0x11] } ?? true
        let blocks =
            asCoded && is420
            && turnKeepsBlocks(width: header.width, height: header.height, orientation: header.orientation)
        let tapMeans = asCoded && factor >= meansFactor
        // A converted one is held as its store's YCbCr when its sides are even (2 × 2 blocks turn onto 2 × 2 blocks).
        let evenSides = header.width % 2 == 0 && header.height % 2 == 0
        let holdTurned =
            header.orientation != 1 && !blocks && (tapMeans || (storeRoute == .planesConverted && evenSides))
        return .planes(
            Planes(
                factor: factor, tapFactor: tapMeans ? factor - factor % meansFactor : factor, tapMeans: tapMeans,
                blocks: blocks, holdTurned: holdTurned, store: storeRoute))
    }

    /// A baseline or progressive JPEG's components' sampling factors (`H << 4 | V`), from
    /// its first frame header; nil when the markers before it are not well formed.
    static func frameSampling(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        var at = 2
        while at + 4 <= bytes.count, bytes[at] == 0xFF {
            let marker = bytes[at + 1]
            if marker == 0xFF {
                at += 1
                continue
            }
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            guard length >= 2, at + 2 + length <= bytes.count else { return nil }
            if (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC {
                guard length >= 8 else { return nil }
                let components = Int(bytes[at + 9])
                guard length >= 8 + 3 * components else { return nil }
                return (0..<components).map { bytes[at + 11 + 3 * $0] }
            }
            at += 2 + length
        }
        return nil
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

    /// The HEIC route's plan for a HEIF source, or nil when libvips decodes it (it
    /// has alpha, or a size or decode the route does not take). Store settings the
    /// route cannot serve send the store to libvips, never the thumbnail.
    private static func heic(
        _ header: SourceHeader, sourceBytes: Int, decode: DecodePlan, makeStore: Bool, store: PipelineSettings.Store
    ) -> ItemPlan? {
        guard header.format == ImageFormat.heif.displayName, !header.hasAlpha,
            Int64(sourceBytes) <= StorePath.maxFileBytes, header.width * header.height <= DecodePlan.inMemoryLimit,
            case .tap(let factor) = decode
        else { return nil }
        let storeRoute: Store = !makeStore ? .none : reasonOffPlanes(store).map { .libvips($0) } ?? .planesConverted
        return .heic(
            Planes(
                factor: factor, tapFactor: factor, tapMeans: false, blocks: false, holdTurned: true,
                store: storeRoute))
    }

    /// Why a source's pixels are not read through its planes, or nil when they are.
    private static func reasonOffPlanes(_ header: SourceHeader, sourceBytes: Int, decode: DecodePlan, planes: Bool)
        -> String?
    {
        switch header.jpegColour {
        case nil: return "not a JPEG"
        case .other(let what): return what
        case .sRGB, .matrix: break
        }
        if !planes { return "THUMBPIPE_JPEG_PLANES=off" }
        // The plane code reads the whole file into one buffer.
        if Int64(sourceBytes) > StorePath.maxFileBytes { return "a file over 64 MB" }
        if let conversion = header.conversion, !conversion.fitsShaper { return "a profile matrix out of range" }
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
    static var buildOptions: [String] {
        (StorePath.disabled ? ["planes off"] : []) + (HeicPlaneStore.disabled ? ["HEIC planes off"] : [])
    }
}
