import CHevc
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The HEIC route: thumbpipe's own HEIF container parser, libavcodec's HEVC
/// decode tile by tile, and the store and thumbnail from the same planes, as
/// good as libvips's route against an lcms-converted upright reference.
@Suite("HEIC route: container, tiles, colour and turn", .vipsStarted, .serialized)
struct HEICRouteTests {
    static let iPhone = TestPaths.fixture("photos/Apple-iPhone-13-Pro-Max.HEIC")
    static let small = TestPaths.fixture("edge/heic-small_image.heic")
    static let oddJFIF = TestPaths.fixture("photos/Oppo-R7-Plus-odd.heic")

    static func bytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    static func parse(_ bytes: [UInt8], maxPixels: Int = 100_000_000) -> Result<HEIFImage, HEIFRefusal> {
        bytes.withUnsafeBytes { raw in
            Result { () throws(HEIFRefusal) in try HEIFContainer.primary(raw, maxPixels: maxPixels) }
        }
    }

    @Test(
        "An iPhone HEIC: a grid of 8 × 6 tiles of 512, 4032 × 3024 as stored, turned by irot to orientation 6, Display P3"
    )
    func iPhoneContainer() throws {
        let image = try Self.parse(try Self.bytes(Self.iPhone)).get()
        #expect(image.width == 4032 && image.height == 3024)
        #expect(image.columns == 8 && image.rows == 6 && image.tileWidth == 512 && image.tileHeight == 512)
        #expect(image.tiles.count == 48)
        #expect(image.orientation == 6, "irot 3 (three quarter turns anticlockwise) is EXIF 6")
        #expect(image.lengthSize == 4 && image.parameterSets.starts(with: [0, 0, 0, 1]))
        let icc = try #require(image.icc)
        let profile = try #require(icc.withUnsafeBytes { ICCProfile($0) })
        #expect(!profile.isSRGB)
        // Its HDR gain map is an auxiliary image of the primary, not alpha: not refused.
    }

    @Test("irot and imir compose in their order into the EXIF orientation that makes the same turn")
    func turns() {
        let left: [Int] = [0, 1, -1, 0], mirror: [Int] = [-1, 0, 0, 1], flip: [Int] = [1, 0, 0, -1]
        func orientation(_ steps: [[Int]]) -> Int {
            HEIFMeta.orientation(of: steps.reduce([1, 0, 0, 1]) { HEIFMeta.compose($0, then: $1) })
        }
        #expect(orientation([]) == 1)
        #expect(orientation([left]) == 8)
        #expect(orientation([left, left]) == 3)
        #expect(orientation([left, left, left]) == 6)
        #expect(orientation([mirror]) == 2)
        #expect(orientation([flip]) == 4)
        #expect(orientation([left, mirror]) == 7)
        #expect(orientation([left, flip]) == 5)
    }

    @Test("Crafted containers are refused with a reason, before anything is allocated")
    func refusals() throws {
        let iPhone = try Self.bytes(Self.iPhone)
        // Cut in its image data: the box that holds it overruns the file.
        #expect(
            Self.parse(Array(iPhone.prefix(iPhone.count / 2)))
                == .failure(HEIFRefusal("a 'mdat' box overruns its parent")))
        // A size over limits.maxPixels.
        #expect(
            Self.parse(iPhone, maxPixels: 4032 * 3024 - 1)
                == .failure(HEIFRefusal("4032 × 3024 is over limits.maxPixels")))
        // Its primary's 'ispe' claiming 2^31 - 1 a side.
        var huge = iPhone
        let ispe = try #require(Self.find([0x69, 0x73, 0x70, 0x65, 0, 0, 0, 0, 0, 0, 0x0F, 0xC0], in: huge))
        huge.replaceSubrange((ispe + 8)..<(ispe + 12), with: [0x7F, 0xFF, 0xFF, 0xFF])
        #expect(throws: HEIFRefusal.self) { try Self.parse(huge).get() }
        // Both sides 2^32 - 1, whose product overflows (the fuzzer's first finding): refused, no trap.
        var overflowing = iPhone
        overflowing.replaceSubrange((ispe + 8)..<(ispe + 16), with: [UInt8](repeating: 0xFF, count: 8))
        #expect(throws: HEIFRefusal.self) { try Self.parse(overflowing).get() }
        #expect(throws: HEIFRefusal.self) { try Self.parse(overflowing, maxPixels: 0).get() }
        // Two tiles' extents each naming the whole file: their bytes add up to more than it.
        #expect(
            Self.parse(try Self.tilesNamingTheWholeFile(iPhone))
                == .failure(HEIFRefusal("tiles whose bytes add up to more than the file")))
        // Not HEIF at all, empty, a box that overruns.
        #expect(throws: HEIFRefusal.self) {
            try Self.parse(try Self.bytes(TestPaths.fixture("photos/Nikon-D3100.jpg"))).get()
        }
        #expect(throws: HEIFRefusal.self) { try Self.parse([]).get() }
        var overrun = iPhone
        overrun[0...3] = [0x7F, 0xFF, 0xFF, 0xFF]
        #expect(Self.parse(overrun) == .failure(HEIFRefusal("a 'ftyp' box overruns its parent")))
    }

    /// The iPhone file with its first two items' extents (two of its tiles) set to
    /// offset 0 and the file's length, in its `iloc` (version 1, 4-byte fields).
    static func tilesNamingTheWholeFile(_ file: [UInt8]) throws -> [UInt8] {
        var bytes = file
        let iloc = try #require(find(Array("iloc".utf8), in: bytes)) + 4
        func read(_ at: Int, _ size: Int) -> Int { (0..<size).reduce(0) { $0 << 8 | Int(bytes[at + $1]) } }
        try #require(bytes[iloc] == 1 && bytes[iloc + 4] == 0x44 && bytes[iloc + 5] == 0x00)
        var at = iloc + 8
        for _ in 0..<read(iloc + 6, 2) {
            let id = read(at, 2)
            at += 6
            let extents = read(at, 2)
            at += 2
            for _ in 0..<extents {
                if id == 1 || id == 2 {
                    bytes.replaceSubrange(at..<(at + 4), with: [0, 0, 0, 0])
                    let length = bytes.count
                    bytes.replaceSubrange(
                        (at + 4)..<(at + 8),
                        with: [
                            UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF),
                            UInt8(length & 0xFF),
                        ])
                }
                at += 8
            }
        }
        return bytes
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    static func store(_ path: String, heic: Bool) throws -> (bytes: Data, path: StorePath?, thumbnail: Data?) {
        var runner = ItemJobRunner(settings: PipelineSettings())
        runner.heicPlanes = heic
        let job = ItemJob(index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: true, hashSource: false)
        let outcome = runner.runHere(job)
        if let failure = outcome.failure { throw failure }
        return (try #require(outcome.store), outcome.storePath, outcome.thumbnail)
    }

    /// `path`'s store by the route and by libvips, against `reference`: the route's
    /// within 0.5 dB of libvips's, the thumbnails 32 dB apart or closer. Returns the
    /// route's decoded store (nil when a size differs from the reference's) and libvips's PSNR.
    static func againstLibvips(_ path: String, reference: DecodedTestImage) throws -> (
        route: StorePath?, libvips: StorePath?, decoded: DecodedTestImage, libvipsPSNR: Double?
    ) {
        let route = try store(path, heic: true)
        let libvips = try store(path, heic: false)
        let a = try PlanePathTests.decoded(route.bytes), b = try PlanePathTests.decoded(libvips.bytes)
        let ta = try DecodedTestImage.load(png: try #require(route.thumbnail))
        let tb = try DecodedTestImage.load(png: try #require(libvips.thumbnail))
        #expect(psnr(ta.pixels, tb.pixels) >= 32, "thumbnail \(psnr(ta.pixels, tb.pixels)) dB")
        guard a.pixels.count == reference.pixels.count, b.pixels.count == reference.pixels.count else {
            return (route.path, libvips.path, a, nil)
        }
        let (pa, pb) = (psnr(a.pixels, reference.pixels), psnr(b.pixels, reference.pixels))
        #expect(pa >= pb - 0.5, "route \(pa) dB, libvips \(pb) dB")
        return (route.path, libvips.path, a, pb)
    }

    @Test(
        "The iPhone HEIC on the route: upright, converted to sRGB, as close to lcms's upright reference as libvips's route"
    )
    func fidelity() throws {
        let reference = try DecodedTestImage.load(Self.iPhone, autorotate: true, lcms: true)
        let compared = try Self.againstLibvips(Self.iPhone, reference: reference)
        #expect(compared.route == .heicPlanesConverted)
        #expect(compared.libvips == .libvips)
        let a = compared.decoded
        #expect(a.width == reference.width && a.height == reference.height, "\(a.width)×\(a.height)")
    }

    @Test(
        "An upright sRGB HEIC in JPEG's YCbCr is encoded as decoded: odd sides cropped from its grid, as close to libheif's pixels as libvips's route"
    )
    func asDecoded() throws {
        let reference = try DecodedTestImage.load(Self.oddJFIF, autorotate: true, lcms: false)
        let compared = try Self.againstLibvips(Self.oddJFIF, reference: reference)
        #expect(compared.route == .heicPlanesAsDecoded)
        let a = compared.decoded
        #expect(a.width == 779 && a.height == 1037, "\(a.width)×\(a.height)")
        guard let pb = compared.libvipsPSNR else { return }
        // The last column and row (the edges the encoder repeats) as close as the rest.
        let edge =
            (0..<1037).flatMap { y in (0..<3).map { (y * 779 + 778) * 3 + $0 } }
            + (0..<779 * 3).map { 1036 * 779 * 3 + $0 }
        let edgePSNR = psnr(edge.map { a.pixels[$0] }, edge.map { reference.pixels[$0] })
        #expect(edgePSNR >= pb - 3, "edges \(edgePSNR) dB")
    }

    @Test("The worker's decoder, kept from image to image, leaves nothing of one image in the next")
    func keptDecoder() throws {
        let first = try Self.store(Self.iPhone, heic: true)
        // Another image's parameter sets (a new decoder), then damaged tiles under the same
        // sets as the first (the decoder that refused them is not kept), then the first again.
        _ = try Self.store(Self.oddJFIF, heic: true)
        var damaged = try Self.bytes(Self.iPhone)
        for offset in stride(from: damaged.count / 3, to: damaged.count / 3 + 6000, by: 5) { damaged[offset] ^= 0xA5 }
        _ = try Self.outcome(damaged, name: "damaged-kept.heic")
        let again = try Self.store(Self.iPhone, heic: true)
        let twice = try Self.store(Self.iPhone, heic: true)
        #expect(again.bytes == first.bytes && twice.bytes == first.bytes)
        #expect(again.thumbnail == first.thumbnail)
    }

    @Test(
        "Tiles are decoded straight into the planes (a turned grid's 48, a lone cropped picture): the same samples as copied"
    )
    func directTiles() throws {
        for (path, tiles) in [(Self.iPhone, 48), (Self.oddJFIF, 1)] {
            let bytes = try Self.bytes(path)
            let image = try Self.parse(bytes).get()
            var direct = HEICPlanes(for: image)
            var copied = HEICPlanes(for: image, copying: true)
            bytes.withUnsafeBytes { raw in
                #expect(direct.decode(image, from: raw) == nil)
                #expect(copied.decode(image, from: raw) == nil)
            }
            #expect(image.tiles.count == tiles && direct.directTiles == tiles, "\(path)")
            #expect(copied.directTiles == 0)
            #expect(Self.visible(&direct) == Self.visible(&copied), "\(path)")
            direct.recycle()
        }
    }

    @Test("Decoded into place, the tiles stay inside the planes: a guard page right before and right after them")
    func directTilesGuarded() throws {
        for path in [Self.iPhone, Self.oddJFIF] {
            let bytes = try Self.bytes(path)
            let image = try Self.parse(bytes).get()
            let layout = HEICPlanes(for: image)
            #expect(layout.direct)
            let chromaRows = (layout.lumaRows + 1) / 2
            let size = layout.lumaStride * layout.lumaRows + 2 * layout.chromaStride * chromaRows
            for atEnd in [false, true] {
                let tiles = try Self.decodeGuarded(image, bytes, layout: layout, size: size, atEnd: atEnd)
                #expect(tiles == image.tiles.count, "\(path): every tile decoded into place")
            }
        }
    }

    /// Decodes `image`'s tiles into `size` bytes laid out as `layout`, a PROT_NONE
    /// page right before them (or, `atEnd`, right after): a write past the planes
    /// stops the test process. Returns how many tiles were decoded into place.
    static func decodeGuarded(_ image: HEIFImage, _ bytes: [UInt8], layout: HEICPlanes, size: Int, atEnd: Bool) throws
        -> Int
    {
        let page = Int(sysconf(Int32(_SC_PAGESIZE))), span = (size + page - 1) / page * page
        let mapping = try #require(
            mmap(nil, span + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        defer { munmap(mapping, span + 2 * page) }
        #expect(mprotect(mapping, page, PROT_NONE) == 0 && mprotect(mapping + page + span, page, PROT_NONE) == 0)
        let origin = mapping.assumingMemoryBound(to: UInt8.self) + page + (atEnd ? span - size : 0)
        let decoder = try #require(CHevc_open())
        defer { CHevc_close(decoder) }
        var (annexB, joined, direct) = ([UInt8](), [UInt8](), 0)
        var error = [CChar](repeating: 0, count: 160)
        for (index, extents) in image.tiles.enumerated() {
            let ok = bytes.withUnsafeBytes {
                HEVCConfiguration.picture(
                    $0, extents: extents, lengthSize: image.lengthSize, parameterSets: image.parameterSets,
                    into: &annexB, joining: &joined)
            }
            #expect(ok)
            let x0 = index % image.columns * image.tileWidth, y0 = index / image.columns * image.tileHeight
            var target = layout.layout.target(origin: origin, x0: x0, y0: y0)
            var picture = CHevcPicture()
            let status = annexB.withUnsafeBufferPointer {
                CHevc_decode(decoder, $0.baseAddress, $0.count, &target, &picture, &error, error.count)
            }
            #expect(status == 0, "\(String(cBuffer: error))")
            direct += Int(picture.direct)
        }
        return direct
    }

    /// The image's samples in `planes`: its luma rows, then its Cb and Cr rows.
    static func visible(_ planes: inout HEICPlanes) -> [UInt8] {
        let (width, height) = (planes.width, planes.height)
        let (chromaWidth, chromaHeight) = ((width + 1) / 2, planes.chromaHeight)
        return planes.withPlanes(kr: 0.299, kb: 0.114, fullRange: true) { ycc in
            var out: [UInt8] = []
            for y in 0..<height { out += UnsafeBufferPointer(start: ycc.y + y * ycc.y_stride, count: width) }
            for plane in [ycc.cb, ycc.cr] {
                for y in 0..<chromaHeight {
                    out += UnsafeBufferPointer(start: plane! + y * ycc.c_stride, count: chromaWidth)
                }
            }
            return out
        }
    }

    @Test("A picture cropped at its top and left moves to the target's origin, rows and chroma in step")
    func movePlanes() {
        let stride = 32, rows = 12
        var luma = (0..<(stride * rows)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var cb = (0..<(stride * rows)).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        var cr = (0..<(stride * rows)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let (before, width, height) = ([luma, cb, cr], 10, 6)
        // Cropped 2 rows from the top and 4 columns from the left: chroma 1 and 2.
        luma.withUnsafeMutableBufferPointer { y in
            cb.withUnsafeMutableBufferPointer { u in
                cr.withUnsafeMutableBufferPointer { v in
                    let (y, u, v) = (y.baseAddress!, u.baseAddress!, v.baseAddress!)
                    var target = CHevcTarget(
                        plane: (y, u, v), stride: (Int32(stride), Int32(stride), Int32(stride)), width: 32, height: 12)
                    let from: [UnsafePointer<UInt8>?] = [
                        UnsafePointer(y + 2 * stride + 4), UnsafePointer(u + stride + 2), UnsafePointer(v + stride + 2),
                    ]
                    CHevc_move_planes(&target, from, Int32(width), Int32(height))
                }
            }
        }
        for (plane, (after, original)) in zip([luma, cb, cr], before).enumerated() {
            let (columns, lines, down, right) = plane == 0 ? (width, height, 2, 4) : (width / 2, height / 2, 1, 2)
            for y in 0..<lines {
                let moved = Array(after[(y * stride)..<(y * stride + columns)])
                let source = Array(original[((y + down) * stride + right)..<((y + down) * stride + right + columns)])
                #expect(moved == source, "plane \(plane), row \(y)")
            }
            #expect(after[(lines * stride)...] == original[(lines * stride)...], "rows below the picture untouched")
        }
    }

    static func outcome(_ bytes: [UInt8], name: String) throws -> ItemOutcome {
        let path = TestPaths.temporaryFolder("heic-hostile") + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var runner = ItemJobRunner(settings: PipelineSettings())
        runner.heicPlanes = true
        return runner.runHere(
            ItemJob(index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: true, hashSource: false))
    }

    @Test("A HEIC the route refuses goes to libvips; a truncated or damaged one costs only its item")
    func fallback() throws {
        // Too small for a tap: libvips, no attempt.
        #expect(try Self.store(Self.small, heic: true).path == .libvips)
        let iPhone = try Self.bytes(Self.iPhone)
        // Truncated: refused by the route, then libvips's failure, the item's alone.
        let truncated = try Self.outcome(Array(iPhone.prefix(iPhone.count * 3 / 4)), name: "truncated.heic")
        #expect(truncated.failure != nil, "\(truncated.storeReason ?? "-")")
        // Bytes of its tiles damaged: decoded (concealed) or refused, never a trap; an outcome either way.
        var damaged = iPhone
        for offset in stride(from: damaged.count / 2, to: damaged.count / 2 + 4000, by: 7) { damaged[offset] ^= 0x5A }
        let outcome = try Self.outcome(damaged, name: "damaged.heic")
        #expect(outcome.failure != nil || outcome.store != nil)
    }

    /// Every HEIC of the fixtures, and of the corpus when `THUMBPIPE_CORPUS` is set.
    static func heicFiles() throws -> [String] {
        let named = { (path: String) in HeicPlaneStore.namedLikeHEIC(path) }
        return
            (["photos", "edge", "bad"].flatMap(TestPaths.fixtureFiles).map(TestPaths.fixture)
            + (try TestPaths.corpusFiles(["photos", "edge", "bad"]))).filter(named)
    }

    @Test("A HEIC the route reads has the header libvips reads: size, orientation, format, alpha, EXIF and XMP")
    func ownHeader() throws {
        let limits = PipelineSettings().limits
        var own = 0
        for path in try Self.heicFiles() {
            let source = try SourceBytes(path: path)
            guard let header = HeicPlaneStore.header(of: source, limits: limits) else { continue }
            own += 1
            let libvips = try Decode(limits: limits).header(of: source)
            let name = URL(fileURLWithPath: path).lastPathComponent
            let sizes: [Int] = [header.width, header.height, header.orientation]
            #expect(sizes == [libvips.width, libvips.height, libvips.orientation], "\(name)")
            #expect(header.format == libvips.format && header.hasAlpha == libvips.hasAlpha, "\(name)")
            #expect(header.shrink == libvips.shrink, "\(name)")
            #expect(header.embedded == libvips.embedded, "\(name)")
        }
        // The phone photos are the route's: the comparison cannot pass on no file.
        #expect(own >= 2)
        let iPhone = try #require(HeicPlaneStore.header(of: try SourceBytes(path: Self.iPhone), limits: limits))
        #expect(iPhone.embedded.taken != nil, "its EXIF date, read from its own 'Exif' item")
    }

    @Test("A HEIC whose metadata is more than plain EXIF and XMP has its header from libvips")
    func ownHeaderRefusals() throws {
        let limits = PipelineSettings().limits
        let iPhone = try Self.bytes(Self.iPhone)
        // Its 'Exif' item retyped: metadata of a type only libheif reads.
        let at = try #require(Self.find(Array("Exif".utf8), in: iPhone))
        var retyped = iPhone
        retyped.replaceSubrange(at..<(at + 4), with: Array("iptc".utf8))
        let path = TestPaths.temporaryFolder("heic-header") + "/retyped.heic"
        try Data(retyped).write(to: URL(fileURLWithPath: path))
        #expect(HeicPlaneStore.header(of: try SourceBytes(path: path), limits: limits).map(\.width) == nil)
        // HEIF not allowed: libvips's header says so.
        var noHEIF = limits
        noHEIF.formats = ImageFormats(ImageFormat.photoFormats.filter { $0 != .heif })
        #expect(HeicPlaneStore.header(of: try SourceBytes(path: Self.iPhone), limits: noHEIF).map(\.width) == nil)
    }
}
