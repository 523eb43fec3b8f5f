import CHevc
import CJpegPlanes
import Foundation
import Synchronization

/// The worker's HEVC decoder, kept from one image to the next whose parameter sets
/// are the same bytes (a phone's photos): its frame pools and tables stay allocated
/// (a decoder opened for each image faulted in some 20 MB of fresh pages each time,
/// 5,500 page faults an item). With other parameter sets a new one is opened, so that
/// no image decodes with a set only an earlier one defined; a decoder that refused a
/// picture is closed, never kept.
final class KeptDecoder: @unchecked Sendable {
    // @unchecked: a worker decodes one image at a time, and a decoder is held by one at a time.
    let pointer: OpaquePointer
    let parameterSets: [UInt8]
    /// A tile's Annex B, and its extents joined (kept with their capacity from tile to tile and image to image).
    var annexB: [UInt8] = []
    var joined: [UInt8] = []

    private init(_ pointer: OpaquePointer, parameterSets: [UInt8]) {
        self.pointer = pointer
        self.parameterSets = parameterSets
    }

    deinit { CHevc_close(pointer) }

    private static let kept = Mutex<KeptDecoder?>(nil)

    /// The kept decoder when it saw the same parameter sets, else a new one (nil without libavcodec).
    static func take(for parameterSets: [UInt8]) -> KeptDecoder? {
        let taken = kept.withLock { kept in
            defer { kept = nil }
            return kept
        }
        if let taken, taken.parameterSets == parameterSets { return taken }
        guard let opened = CHevc_open().map({ KeptDecoder($0, parameterSets: parameterSets) }) else { return nil }
        // The buffers outlive the decoder: their capacity serves the next image whatever its sets.
        if let taken { (opened.annexB, opened.joined) = (taken.annexB, taken.joined) }
        return opened
    }

    /// Keeps `decoder` for the next image.
    static func keep(_ decoder: KeptDecoder) {
        kept.withLock { $0 = decoder }
    }
}

/// A HEIC's primary image as 8-bit YCbCr planes with 4:2:0 chroma, its tiles
/// decoded one at a time and cropped to the image. The planes are one buffer,
/// taken from the worker's spare one and given back (``recycle()``), so a run of
/// phone photos does not fault 18 MB in for each. The planes hold the image's
/// whole grid, in rows aligned as libavcodec asks, and each tile is decoded
/// straight into its place (`CHevcTarget`): no frame pool for the decoder to fault
/// in, no copy (a turned image is then converted in place, in the same rows). A
/// grid much larger than its image, or of odd tiles, is laid out as the image,
/// rows of 16-byte multiples, and its tiles are copied there.
struct HEICPlanes {
    let width: Int
    let height: Int
    let lumaStride: Int
    let chromaStride: Int
    /// The rows of luma the buffer holds (the image's, or its grid's and a margin).
    let lumaRows: Int
    /// Tiles are decoded into place (the grid layout).
    let direct: Bool
    /// How many tiles were decoded into place (the others were copied there).
    private(set) var directTiles = 0
    private var storage: [UInt8]
    /// What the first picture's bitstream says of its matrix and range (H.273; 2 and -1 when unsaid).
    private(set) var pictureMatrix = 2
    private(set) var pictureFullRange: Int32 = -1

    /// The buffer the last image gave back (a worker runs one job at a time; tests run several).
    private static let spare = Mutex<[UInt8]>([])
    /// The most a spare buffer keeps (a 30 Mpx image's planes).
    private static let spareLimit = 48 << 20
    /// libavcodec's alignment of plane pointers and strides (STRIDE_ALIGN: 64 with AVX-512).
    static let alignment = 64

    /// The planes for `image`; `copying` takes the copying layout whatever the image (to compare).
    init(for image: HEIFImage, copying: Bool = false) {
        width = image.width
        height = image.height
        let gridWidth = image.columns * image.tileWidth, gridHeight = image.rows * image.tileHeight
        // The grid layout unless the grid is much more than the image (a crafted grid of
        // huge tiles around a small image is copied tile by tile instead).
        direct =
            !copying && image.tileWidth % 2 == 0 && image.tileHeight % 2 == 0
            && gridWidth.multipliedReportingOverflow(by: gridHeight).partialValue <= 2 * width * height
        if direct {
            // A margin past the grid for what the decoder may write past a tile (its size aligned).
            lumaStride =
                (gridWidth + 2 * Self.alignment - 1) / (2 * Self.alignment) * (2 * Self.alignment)
                + 2 * Self.alignment
            lumaRows = (gridHeight + 63) / 64 * 64 + 64
            chromaStride = lumaStride / 2
        } else {
            lumaStride = (width + 15) / 16 * 16
            lumaRows = height
            chromaStride = ((width + 1) / 2 + 15) / 16 * 16
        }
        let needed = Self.alignment + lumaStride * lumaRows + 2 * chromaStride * ((lumaRows + 1) / 2)
        let taken = Self.spare.withLock { spare in
            defer { spare = [] }
            return spare
        }
        // A new buffer is not zeroed (every byte the encoder reads is decoded first), and
        // is as large as a spare may be: its pages are only mapped where an image writes,
        // and every image up to that size then reuses the ones mapped before. (Made a
        // quarter larger than asked, a run of photos of growing sizes took a new buffer,
        // and faulted in its pages, several times a worker: 22,000 page faults over the
        // 16 benchmark HEICs.)
        storage = taken.count >= needed ? taken : Self.uninitialized(max(needed, Self.spareLimit))
    }

    /// `count` bytes, left as the allocator gives them (pages untouched until written).
    private static func uninitialized(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// Gives the buffer back for the next image.
    func recycle() {
        guard storage.count <= Self.spareLimit else { return }
        let storage = self.storage
        Self.spare.withLock { $0 = storage }
    }

    var chromaHeight: Int { (height + 1) / 2 }
    private var cbOffset: Int { lumaStride * lumaRows }
    private var crOffset: Int { cbOffset + chromaStride * ((lumaRows + 1) / 2) }

    /// Calls `body` with the planes' origin in the buffer (aligned as libavcodec asks).
    private mutating func withOrigin<T>(_ body: (UnsafeMutablePointer<UInt8>) -> T) -> T {
        storage.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            return body(base + (Self.alignment - Int(bitPattern: base) % Self.alignment) % Self.alignment)
        }
    }

    /// The planes' strides and offsets, as a value of its own (no buffer).
    var layout: Layout {
        Layout(
            lumaStride: lumaStride, chromaStride: chromaStride, lumaRows: lumaRows, cbOffset: cbOffset,
            crOffset: crOffset)
    }

    /// Where each plane is, from the planes' origin.
    struct Layout {
        let lumaStride, chromaStride, lumaRows, cbOffset, crOffset: Int

        /// Where the tile at (`x0`, `y0`) is decoded when the planes start at `origin`:
        /// its place in each plane and the room from there to the planes' end.
        func target(origin: UnsafeMutablePointer<UInt8>, x0: Int, y0: Int) -> CHevcTarget {
            let luma = y0 * lumaStride + x0, chroma = y0 / 2 * chromaStride + x0 / 2
            return CHevcTarget(
                plane: (origin + luma, origin + cbOffset + chroma, origin + crOffset + chroma),
                stride: (Int32(lumaStride), Int32(chromaStride), Int32(chromaStride)),
                width: Int32(lumaStride - x0), height: Int32(lumaRows - y0))
        }
    }

    /// Decodes every tile of `image` into place; the reason when one cannot be.
    mutating func decode(_ image: HEIFImage, from bytes: UnsafeRawBufferPointer) -> String? {
        guard let decoder = KeptDecoder.take(for: image.parameterSets) else { return "libavcodec has no HEVC decoder" }
        var refused: String? = nil
        defer { if refused == nil { KeptDecoder.keep(decoder) } }
        refused = decodeTiles(image, from: bytes, with: decoder)
        return refused
    }

    /// Decodes every tile of `image` into place with `decoder`; the reason when one cannot be.
    private mutating func decodeTiles(
        _ image: HEIFImage, from bytes: UnsafeRawBufferPointer, with decoder: KeptDecoder
    ) -> String? {
        var error = [CChar](repeating: 0, count: 160)
        for (index, extents) in image.tiles.enumerated() {
            guard
                HEVCConfiguration.picture(
                    bytes, extents: extents, lengthSize: image.lengthSize, parameterSets: image.parameterSets,
                    into: &decoder.annexB, joining: &decoder.joined)
            else { return "a tile's NAL lengths overrun its bytes" }
            var picture = CHevcPicture()
            let (column, row) = (index % image.columns, index / image.columns)
            let status = withTarget(x0: column * image.tileWidth, y0: row * image.tileHeight) { target in
                decoder.annexB.withUnsafeBufferPointer {
                    CHevc_decode(decoder.pointer, $0.baseAddress, $0.count, target, &picture, &error, error.count)
                }
            }
            guard status == 0 else { return String(cBuffer: error).numbersAsN }
            guard Int(picture.width) >= image.tileWidth, Int(picture.height) >= image.tileHeight else {
                return "a tile decoded smaller than its 'ispe'"
            }
            if index == 0 {
                pictureMatrix = Int(picture.matrix)
                pictureFullRange = picture.full_range
            }
            if picture.direct != 0 {
                directTiles += 1
            } else {
                place(picture, column: column, row: row, image: image)
            }
        }
        return nil
    }

    /// Calls `body` with where the tile at (`x0`, `y0`) may be decoded: its place in
    /// the planes and the room from there to their end (nil without the grid layout).
    private mutating func withTarget(x0: Int, y0: Int, _ body: (UnsafePointer<CHevcTarget>?) -> Int32) -> Int32 {
        guard direct else { return body(nil) }
        // The layout as a value: a copy of `self` in the closure would share the
        // buffer, and borrowing the buffer mutably would then copy it.
        let layout = self.layout
        return withOrigin { origin in
            var target = layout.target(origin: origin, x0: x0, y0: y0)
            return body(&target)
        }
    }

    /// Copies a decoded tile's visible part into the planes.
    private mutating func place(_ picture: CHevcPicture, column: Int, row: Int, image: HEIFImage) {
        let x0 = column * image.tileWidth, y0 = row * image.tileHeight
        let columns = min(image.tileWidth, width - x0), rows = min(image.tileHeight, height - y0)
        guard columns > 0, rows > 0 else { return }
        let (lumaStride, chromaStride, cbOffset, crOffset) = (self.lumaStride, self.chromaStride, cbOffset, crOffset)
        let cx0 = x0 / 2, cy0 = y0 / 2, chromaColumns = (columns + 1) / 2, chromaRows = (rows + 1) / 2
        withOrigin { out in
            for y in 0..<rows {
                (out + (y0 + y) * lumaStride + x0).update(
                    from: picture.plane.0! + Int(picture.stride.0) * y, count: columns)
            }
            for (offset, source, stride) in [
                (cbOffset, picture.plane.1!, picture.stride.1), (crOffset, picture.plane.2!, picture.stride.2),
            ] {
                for y in 0..<chromaRows {
                    (out + offset + (cy0 + y) * chromaStride + cx0).update(
                        from: source + Int(stride) * y, count: chromaColumns)
                }
            }
        }
    }

    /// The matrix's Kr and Kb and the range: the container's `nclx`, else the
    /// bitstream's, else BT.601 full range (libheif's default); nil for a matrix
    /// the route does not convert (identity, YCgCo, constant luminance…).
    func coefficients(_ image: HEIFImage) -> (kr: Double, kb: Double, fullRange: Bool)? {
        let matrix = image.matrix ?? pictureMatrix
        let fullRange = image.fullRange ?? (pictureFullRange != 0)
        switch matrix {
        case 1: return (0.2126, 0.0722, fullRange)
        case 2, 5, 6: return (0.299, 0.114, fullRange)
        case 9: return (0.2627, 0.0593, fullRange)
        default: return nil
        }
    }

    /// Calls `body` with the planes as the encoder takes them (and may overwrite:
    /// a turned image is converted in place).
    mutating func withPlanes<T>(kr: Double, kb: Double, fullRange: Bool, _ body: (inout CJpegPlanesYcc) -> T) -> T {
        let (lumaStride, chromaStride, cbOffset, crOffset) = (lumaStride, chromaStride, cbOffset, crOffset)
        return withOrigin { base in
            var ycc = CJpegPlanesYcc(
                y: base, cb: base + cbOffset, cr: base + crOffset, y_stride: lumaStride, c_stride: chromaStride,
                kr: kr, kb: kb, full_range: fullRange ? 1 : 0, writable: 1)
            return body(&ycc)
        }
    }
}
