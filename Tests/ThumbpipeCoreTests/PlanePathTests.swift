import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The store of a JPEG through its planes: the same or a better store than
/// libvips's, turned upright alike, a baseline JPEG any decoder reads.
@Suite("JPEG plane path", .vipsStarted, .serialized)
struct PlanePathTests {
    /// The store file (and path) an item job makes of `source`, on the plane path or not.
    static func store(_ source: String, planes: Bool, settings: PipelineSettings = PipelineSettings()) throws -> (
        bytes: Data, path: StorePath?, thumbnail: Data?
    ) {
        var runner = ItemJobRunner(settings: settings)
        runner.planes = planes
        let job = ItemJob(
            index: 0, itemKey: "k", source: source, makeThumbnail: true, makeStore: true, hashSource: false)
        let outcome = runner.runHere(job)
        if let failure = outcome.failure { throw failure }
        return (try #require(outcome.store), outcome.storePath, outcome.thumbnail)
    }

    /// Whether a store was made from the source's planes unconverted (decoded or taken as coded).
    static func onPlanes(_ path: StorePath?) -> Bool { path == .planes || path == .planesRequantized }

    /// The fixture JPEGs the plane path takes (8-bit YCbCr, sRGB or untagged, large enough to stream).
    static var planeJPEGs: [String] {
        (TestPaths.fixtureFiles("photos") + TestPaths.fixtureFiles("edge")).filter {
            takesPlanes(TestPaths.fixture($0))
        }
    }

    static func decoded(_ bytes: Data) throws -> DecodedTestImage {
        let path = TestPaths.temporaryFolder("plane-decode") + "/x.jpg"
        try bytes.write(to: URL(fileURLWithPath: path))
        return try DecodedTestImage.load(path)
    }

    @Test(
        "Every fixture JPEG the plane path takes: its store is within 0.5 dB of libvips's against the source, or better"
    )
    func storeFidelity() throws {
        let files = Self.planeJPEGs
        let tookPlanes = try Self.checkStores(files.map { TestPaths.fixture($0) })
        #expect(tookPlanes == files.count && tookPlanes >= 8, "\(tookPlanes) of \(files)")
    }

    /// Whether `path` is a JPEG the plane path takes (by its header and settings).
    static func takesPlanes(_ path: String) -> Bool {
        let lower = path.lowercased()
        guard lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") else { return false }
        guard let header = try? Decode(limits: PipelineSettings().limits).header(of: path) else { return false }
        return ItemPlan.make(
            header: header, makeStore: true, canvasWidth: 80, canvasHeight: 80, store: PipelineSettings.Store(),
            planes: true
        ).store == .planes
    }

    /// For each source, the plane path's store against libvips's, both against the
    /// source upright: within 0.5 dB or better, upright alike, a baseline JPEG.
    /// Returns how many took the planes (a source the planes refuse takes libvips).
    static func checkStores(_ files: [String]) throws -> Int {
        var tookPlanes = 0
        for source in files {
            // A source no strict decoder reads (corrupt data) never takes the planes.
            guard let reference = try? DecodedTestImage.load(source, autorotate: true) else {
                if let made = try? Self.store(source, planes: true) { #expect(!Self.onPlanes(made.path), "\(source)") }
                continue
            }
            let planes = try Self.store(source, planes: true)
            let libvips = try Self.store(source, planes: false)
            #expect(libvips.path == .libvips, "\(source)")
            guard Self.onPlanes(planes.path) else {
                #expect(planes.path == .libvips, "\(source)")
                continue
            }
            tookPlanes += 1
            let a = try Self.decoded(planes.bytes)
            let b = try Self.decoded(libvips.bytes)
            #expect(a.width == reference.width && a.height == reference.height, "\(source): upright size")
            guard a.pixels.count == reference.pixels.count, b.pixels.count == reference.pixels.count else { continue }
            let (pa, pb) = (psnr(a.pixels, reference.pixels), psnr(b.pixels, reference.pixels))
            let name = URL(fileURLWithPath: source).lastPathComponent
            print("planes\t\(name)\t\(String(format: "%.2f", pa)) dB\tlibvips \(String(format: "%.2f", pb)) dB")
            #expect(pa >= pb - 0.5, "\(source): planes \(pa) dB, libvips \(pb) dB")
            #expect(samplingFactors(planes.bytes) == [0x22, 0x11, 0x11], "\(source): a baseline 4:2:0 store")
        }
        return tookPlanes
    }

    /// A 4:2:0 JPEG of `width × height` at `quality` (below 90) with EXIF orientation `orientation`.
    static func oriented(_ orientation: Int, width: Int, height: Int, quality: Int32) throws -> String {
        var source: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_load(TestPaths.fixture("photos/Nikon-D3100.jpg"), 1, 1, 0, 0, &source) == 0)
        var cropped: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_crop(source, &cropped, 1001, 701, Int32(width), Int32(height)) == 0)
        CVipsShim_unref(source)
        var copy: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_remove_metadata(cropped, &copy, 0) == 0)
        CVipsShim_unref(cropped)
        defer { CVipsShim_unref(copy) }
        return try saved(
            try #require(copy), orientation: orientation, in: "oriented",
            as: "o\(orientation)-\(width)x\(height)-q\(quality).jpg", quality: quality)
    }

    /// `image` saved as a JPEG at `quality`, tagged with EXIF `orientation`, as
    /// `name` in a fresh temporary folder labelled `label`.
    static func saved(
        _ image: UnsafeMutablePointer<VipsImage>, orientation: Int, in label: String, as name: String, quality: Int32
    ) throws -> String {
        vips_image_set_int(image, VIPS_META_ORIENTATION, Int32(orientation))
        let path = TestPaths.temporaryFolder(label) + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer { close(fd) }
        try #require(CVipsShim_jpegsave_fd(image, fd, quality, 0) == 0)
        return path
    }

    @Test(
        "All 8 orientations, odd and even sizes: the plane store is upright as libvips turns it",
        arguments: [(1001, 667, Int32(80)), (999, 701, Int32(80)), (1000, 700, Int32(85))])
    func orientations(size: (Int, Int, Int32)) throws {
        for orientation in 1...8 {
            let path = try Self.oriented(orientation, width: size.0, height: size.1, quality: size.2)
            try Self.expectPlanesAsGood(path, "orientation \(orientation), \(size)")
        }
    }

    /// The plane store of `path` against libvips's: it takes the planes, comes
    /// out upright (as libvips turns it: a wrong turn costs 15 dB or more), is
    /// within 0.15 dB of libvips's against the upright source or better, and the
    /// thumbnails agree (≥ 32 dB: the tap fed from the planes, turned the same
    /// way). Returns both stores decoded and the plane store's bytes, or nil
    /// when the sizes differ.
    @discardableResult
    static func expectPlanesAsGood(_ path: String, _ label: String) throws -> (
        planes: DecodedTestImage, libvips: DecodedTestImage, bytes: Data
    )? {
        let upright = try DecodedTestImage.load(path, autorotate: true)
        let planes = try store(path, planes: true)
        let libvips = try store(path, planes: false)
        #expect(Self.onPlanes(planes.path), "\(label)")
        let a = try decoded(planes.bytes)
        let b = try decoded(libvips.bytes)
        #expect(a.width == upright.width && a.height == upright.height, "\(label): \(a.width)×\(a.height)")
        guard a.pixels.count == upright.pixels.count, b.pixels.count == upright.pixels.count else { return nil }
        let (pa, pb) = (psnr(a.pixels, upright.pixels), psnr(b.pixels, upright.pixels))
        #expect(pa >= pb - 0.15, "\(label): planes \(pa) dB, libvips \(pb) dB")
        let ta = try DecodedTestImage.load(png: try #require(planes.thumbnail))
        let tb = try DecodedTestImage.load(png: try #require(libvips.thumbnail))
        #expect(psnr(ta.pixels, tb.pixels) >= 32, "\(label): thumbnail \(psnr(ta.pixels, tb.pixels)) dB")
        return (a, b, planes.bytes)
    }

    @Test("djpeg (libjpeg-turbo's own decoder) reads every plane store; what the plane path refuses takes libvips")
    func readableAndFallback() throws {
        let djpeg = try #require(
            ["/usr/bin/djpeg"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "djpeg is not installed (make test installs libjpeg-turbo-progs)")
        for relative in Self.planeJPEGs.prefix(6) {
            let store = try Self.store(TestPaths.fixture(relative), planes: true)
            let path = TestPaths.temporaryFolder("djpeg") + "/s.jpg"
            try store.bytes.write(to: URL(fileURLWithPath: path))
            let result = try runProcess(djpeg, ["-outfile", "/dev/null", path])
            #expect(result.status == 0 && result.stderr.isEmpty, "\(relative): \(result.stderr)")
        }
        // Arithmetic coding: libvips's path.
        let arithmetic = try Self.sampled(Self.sources.jpeg, sampling: "2x2", orientation: 1, options: ["-arithmetic"])
        #expect(try Self.store(arithmetic, planes: true).path == .libvips)
        // CMYK and an XYB (jpegli, a LUT profile): libvips's path, never planes; Adobe RGB converted on them.
        #expect(
            try Self.store(TestPaths.fixture("edge/icc-adobergb-photo_Canon-EOS-7D.jpg"), planes: true).path
                == .planesConverted)
        for relative in [
            "edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg", "edge/icc-xyb-jpegli_sample-xyb.jpg",
        ] {
            let store = try Self.store(TestPaths.fixture(relative), planes: true)
            #expect(store.path == .libvips, "\(relative)")
        }
        var settings = PipelineSettings()
        settings.store.orientation = .tag
        #expect(
            try Self.store(TestPaths.fixture("photos/Nikon-D3100.jpg"), planes: true, settings: settings).path
                == .libvips)
    }
}

extension PlanePathTests {
    /// The sources the sampling tests re-encode: a 999 × 701 crop (odd both
    /// ways) as a 4:4:4 JPEG at Q95, and its pixels as a PPM for cjpeg.
    static let sources: (jpeg: String, ppm: String) = {
        let jpeg = try! oriented(1, width: 999, height: 701, quality: 95)
        let ppm = TestPaths.temporaryFolder("sampled") + "/source.ppm"
        let made = try! runProcess("/usr/bin/djpeg", ["-pnm", "-outfile", ppm, jpeg])
        precondition(made.status == 0, made.stderr)
        return (jpeg, ppm)
    }()

    /// `cjpeg -sample H×V` (the luma's sampling factors: 1x1 is 4:4:4, 2x1 4:2:2,
    /// 1x2 4:4:0, 2x2 4:2:0) of the source, at Q90, with a hand-made EXIF
    /// segment holding `orientation` (1 to 8) after its start of image.
    /// `ppm` (by default `sources`' pixels) may be any other PPM; `name` tells the files apart.
    static func sampled(
        _ source: String, sampling: String, orientation: Int, options: [String] = [], ppm: String? = nil,
        name: String = "s"
    ) throws -> String {
        let path = TestPaths.temporaryFolder("sampled") + "/\(name)\(sampling)-o\(orientation).jpg"
        let made = try runProcess(
            "/usr/bin/cjpeg",
            ["-sample", sampling, "-quality", "90"] + options + ["-outfile", path, ppm ?? sources.ppm])
        try #require(made.status == 0, "\(made.stderr)")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // APP1 "Exif": a little-endian TIFF header and one IFD of one entry, Orientation (SHORT).
        let tiff: [UInt8] =
            [
                0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00,
                0x00,
            ]
            + [UInt8(orientation), 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        bytes.insert(contentsOf: [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload, at: 2)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The sampling factors (H << 4 | V) of a baseline JPEG's components, from its SOF0.
    static func samplingFactors(_ jpeg: Data) -> [UInt8] {
        let bytes = [UInt8](jpeg)
        var at = 2
        while at + 4 < bytes.count, bytes[at] == 0xFF {
            let marker = bytes[at + 1], length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            if marker == 0xC0, at + 10 < bytes.count {
                let count = Int(bytes[at + 9])
                return (0..<count).compactMap { at + 11 + $0 * 3 < bytes.count ? bytes[at + 11 + $0 * 3] : nil }
            }
            at += 2 + length
        }
        return []
    }

    @Test(
        "4:4:4, 4:2:2, 4:4:0 and 4:2:0 sources in all 8 orientations: a 4:2:0 store through the planes, as good as libvips's, and the same thumbnail",
        arguments: ["1x1", "2x1", "1x2", "2x2"])
    func samplings(sampling: String) throws {
        let reference = try DecodedTestImage.load(Self.sources.jpeg)
        for orientation in 1...8 {
            let path = try Self.sampled(
                Self.sources.jpeg, sampling: sampling, orientation: orientation,
                options: orientation == 3 ? ["-progressive"] : [])
            guard let made = try Self.expectPlanesAsGood(path, "\(sampling), orientation \(orientation)") else {
                continue
            }
            #expect(Self.samplingFactors(made.bytes) == [0x22, 0x11, 0x11], "\(sampling): a baseline 4:2:0 store")
            if orientation == 1 {
                // Upright, the stored pixels are the source's: against the 4:4:4 original too.
                let (qa, qb) = (psnr(made.planes.pixels, reference.pixels), psnr(made.libvips.pixels, reference.pixels))
                print(
                    "sampling \(sampling): planes \(String(format: "%.2f", qa)) dB, libvips \(String(format: "%.2f", qb)) dB"
                )
                #expect(qa >= qb - 0.5, "\(sampling): planes \(qa) dB, libvips \(qb) dB against the original")
            }
        }
    }

    @Test(
        "The planes are never held for what the decode plan would not hold: over 30 Mpx, or a file over 64 MB, takes libvips"
    )
    func boundedInput() throws {
        var header = try Decode(limits: PipelineSettings().limits).header(
            of: TestPaths.fixture("photos/Nikon-D3100.jpg"))
        func plan(bytes: Int = 0) -> ItemPlan {
            ItemPlan.make(
                header: header, sourceBytes: bytes, makeStore: true, canvasWidth: 80, canvasHeight: 80,
                store: PipelineSettings.Store(), planes: true)
        }
        #expect(plan().onPlanes != nil && plan().store == .planes)
        #expect(plan(bytes: 65 << 20).onPlanes == nil && plan(bytes: 65 << 20).store == .libvips("a file over 64 MB"))
        header.width = 8000
        header.height = 4000
        #expect(plan().onPlanes == nil && plan().store == .libvips("over 30 Mpx"), "32 Mpx")
        header.width = 200
        header.height = 200
        #expect(plan().decode == .once && plan().store == .libvips("too small to shrink on load"))
        // A JPEG followed by 65 MB of padding: the same pixels, on libvips.
        let padded = TestPaths.temporaryFolder("padded") + "/p.jpg"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg")))
        bytes.append(Data(count: 65 << 20))
        try bytes.write(to: URL(fileURLWithPath: padded))
        #expect(try Self.store(padded, planes: true).path == .libvips)
    }
}

extension PlanePathTests {
    /// Variants of a JPEG the plane path takes: cut short, bytes flipped in its
    /// entropy-coded data, its size or sampling factors rewritten.
    static func crafted(_ jpeg: [UInt8]) -> [(String, [UInt8])] {
        var variants: [(String, [UInt8])] = []
        for cut in stride(from: 0, to: jpeg.count, by: max(1, jpeg.count / 24)) {
            variants.append(("cut at \(cut)", Array(jpeg.prefix(cut))))
        }
        var random = SystemRandomNumberGenerator()
        let scan = (0..<(jpeg.count - 1)).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA } ?? 2
        for trial in 0..<40 {
            var bytes = jpeg
            for _ in 0...(trial % 4) {
                bytes[Int.random(in: (scan + 16)..<(jpeg.count - 2), using: &random)] ^= UInt8.random(
                    in: 1...255, using: &random)
            }
            variants.append(("flipped \(trial)", bytes))
        }
        if let sof = (0..<(jpeg.count - 1)).first(where: { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 }) {
            // SOF0: length (2), precision (1), height (2), width (2), components (1), then 3 bytes each.
            for (name, offset, value) in [
                ("taller", sof + 5, UInt8(0x7F)), ("narrower", sof + 8, UInt8(0x01)), ("Y 1x2", sof + 11, 0x12),
                ("Y 4x1", sof + 11, 0x41), ("Cb 2x2", sof + 14, 0x22), ("Cr 0x0", sof + 17, 0x00),
                ("12-bit", sof + 4, 12), ("two components", sof + 9, 2),
            ] where offset < jpeg.count {
                var bytes = jpeg
                bytes[offset] = value
                variants.append((name, bytes))
            }
        }
        return variants
    }

    @Test("Crafted JPEGs on the plane path: never a crash; what it makes of them decodes, the rest goes to libvips")
    func craftedSources() throws {
        let folder = TestPaths.temporaryFolder("crafted-planes")
        var paths: [String: Int] = [:]
        defer { print("crafted: \(paths.sorted { $0.key < $1.key })") }
        for source in [Self.sources.jpeg, try Self.sampled(Self.sources.jpeg, sampling: "2x2", orientation: 6)] {
            for (name, bytes) in Self.crafted([UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))) {
                let path = folder + "/crafted.jpg"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                guard let made = try? Self.store(path, planes: true) else {
                    paths["failed", default: 0] += 1
                    continue
                }
                paths[made.path?.rawValue ?? "none", default: 0] += 1
                // A file cut short warns (premature end): never the planes.
                if name.hasPrefix("cut") { #expect(!Self.onPlanes(made.path), "\(name)") }
                // Whatever path made a store, it is a JPEG that decodes.
                #expect((try? Self.decoded(made.bytes)) != nil, "\(name): the store does not decode")
            }
        }
    }
}

/// The plane path over the corpus, opt-in like the corpus sweep: every JPEG
/// there gets the fixtures' store check.
@Suite(
    "JPEG plane path on the corpus (THUMBPIPE_CORPUS)", .vipsStarted, .serialized,
    .enabled(if: TestPaths.corpusFolder != nil, "set THUMBPIPE_CORPUS=DIR to sweep a corpus"))
struct PlanePathCorpusTests {
    @Test("Every corpus JPEG the plane path takes: its store within 0.5 dB of libvips's, or better")
    func corpusStores() throws {
        let files = try TestPaths.corpusFiles(["photos", "edge", "bad"]).filter { PlanePathTests.takesPlanes($0) }
        let tookPlanes = try PlanePathTests.checkStores(files)
        print("corpus: \(tookPlanes) of \(files.count) JPEGs on the plane path")
        #expect(tookPlanes >= 1, "no corpus JPEG took the planes")
    }
}

extension PlanePathTests {
    @Test("The plane path reads a regular file whole and bounded: a FIFO, a folder or a file over 64 MB gives nothing")
    func boundedRead() throws {
        let folder = TestPaths.temporaryFolder("plane-read")
        func read(_ path: String) -> Data? {
            FileDescriptor.contents(ofRegularFile: path, limit: StorePath.maxFileBytes)
        }
        let photo = TestPaths.fixture("photos/Nikon-D3100.jpg")
        #expect(read(photo) == (try Data(contentsOf: URL(fileURLWithPath: photo))))
        let fifo = folder + "/fifo.jpg"
        try #require(mkfifo(fifo, 0o644) == 0)
        #expect(read(fifo) == nil, "a FIFO is refused at once, not waited on")
        #expect(read(folder) == nil)
        let large = folder + "/large.jpg"
        try #require(FileManager.default.createFile(atPath: large, contents: nil))
        try #require(truncate(large, off_t(StorePath.maxFileBytes + 1)) == 0)
        #expect(read(large) == nil)
        #expect(read(folder + "/missing.jpg") == nil)
    }
}
