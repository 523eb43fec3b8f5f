import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("Thumbnails on real photos", .vipsStarted)
struct ThumbnailTests {
    /// The thumbnail of a fixture as a worker makes it, in this process: the
    /// decode plan a run picks (the tap for every photo larger than 4× the canvas).
    func thumbnail(_ relative: String, settings: PipelineSettings = PipelineSettings()) throws -> (
        png: Data, image: DecodedTestImage
    ) {
        let path = TestPaths.fixture(relative)
        let runner = ItemJobRunner(settings: settings)
        let job = ItemJob(
            index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: false, hashSource: false)
        let outcome = runner.runHere(job)
        if let failure = outcome.failure { throw failure }
        let png = try #require(outcome.thumbnail)
        return (png, try DecodedTestImage.load(png: png))
    }

    @Test("Photos larger than 4× the canvas take the tap, as in a run")
    func photosTakeTheTap() throws {
        let header = try Decode(limits: PipelineSettings().limits).header(
            of: TestPaths.fixture("photos/Nikon-D3100.jpg"))
        #expect(DecodePlan.choose(for: header, canvasWidth: 80, canvasHeight: 80) == .tap(factor: 19))
    }

    @Test(
        "80×80 RGBA with a rounded mask",
        arguments: [
            "photos/Nikon-D3100.jpg",  // landscape 4608×3072
            "photos/Canon-EOS-5D.jpg",  // portrait 2912×4368
            "photos/Kodak-PIXPRO-SP360-small.jpg",  // square 816×816
            "edge/wide-940x2_940x2.png",  // 470:1 panorama
            "edge/avif-wide-4096x800-multi-item_pitm.avif",  // 5:1
            "edge/tall-13x169_big-height.webp",  // tall and smaller than the canvas
            "edge/tiny-1x1-rgb_1x1.png",  // 1×1, scaled up to fill
            "photos/Apple-iPhone-13-Pro-Max.HEIC",
        ])
    func geometryAndMask(relative: String) throws {
        let (png, image) = try thumbnail(relative)
        #expect(try #require(PNGInfo.size(png)) == (80, 80))
        #expect(try #require(PNGInfo.format(png)) == (8, 6), "8-bit RGBA PNG")
        #expect(image.width == 80 && image.height == 80 && image.bands == 4)
        #expect(image[40, 40][3] == 255, "centre opaque")
        for (x, y) in [(0, 0), (79, 0), (0, 79), (79, 79)] {
            #expect(image[x, y][3] == 0, "corner (\(x),\(y)) transparent")
        }
        // A pixel on the arc of a 10 px radius is partly covered.
        let arc = image[2, 2][3]
        #expect(arc > 0 && arc < 255)
        // The mask's total coverage equals the rounded rectangle's area (sources are opaque).
        var alphaSum = 0.0
        for y in 0..<80 { for x in 0..<80 { alphaSum += Double(image[x, y][3]) / 255 } }
        let area = RoundedClip(radius: 10).area(width: 80, height: 80)
        #expect(abs(alphaSum - area) / area < 0.005, "coverage \(alphaSum) vs area \(area)")
        // The canvas is filled: no empty rows or columns inside the mask.
        #expect(image[40, 0][3] == 255 && image[0, 40][3] == 255 && image[79, 40][3] == 255 && image[40, 79][3] == 255)
    }

    @Test("EXIF orientation 6 gives an upright thumbnail")
    func orientationSix() throws {
        let upright = try thumbnail("edge/orientation-1_Landscape_1.jpg").image
        let rotated = try thumbnail("edge/orientation-6_Landscape_6.jpg").image
        #expect(psnr(upright.pixels, rotated.pixels) >= 30, "PSNR \(psnr(upright.pixels, rotated.pixels))")
        // And a camera portrait (Canon 1000D, stored 3888×2592, orientation 6) differs
        // from its unrotated self: the rotation was applied, not dropped.
        let header = try Decode(limits: PipelineSettings().limits).header(
            of: TestPaths.fixture("photos/Canon-EOS-1000D.jpg"))
        #expect(header.orientation == 6)
        #expect(header.uprightSize == (2592, 3888))
    }

    @Test("The nine orientation images of one scene agree pairwise (≥ 30 dB)")
    func allOrientations() throws {
        let thumbnails = try (0...8).map { try thumbnail("edge/orientation-\($0)_Landscape_\($0).jpg").image }
        for a in 0...8 {
            for b in a..<9 where b > a {
                let value = psnr(thumbnails[a].pixels, thumbnails[b].pixels)
                #expect(value >= 30, "orientations \(a) and \(b): PSNR \(value) dB")
            }
        }
    }

    @Test("Transparency survives inside the mask")
    func transparentPNG() throws {
        let (_, image) = try thumbnail("edge/png-palette-trns_paletted-transparent.png")
        var transparentInside = 0
        for y in 12..<68 { for x in 12..<68 where image[x, y][3] == 0 { transparentInside += 1 } }
        #expect(transparentInside > 0, "source transparency kept inside the mask")
    }

    @Test("The tap's Lanczos3: weights sum to one, centres aligned, only the window computed")
    func tapResample() throws {
        // A 960×640 ramp in red (0…255 across), flat green and blue, opaque;
        // tapped in 4×4 blocks (240×160 means), then resampled by 1/3 to 80 wide.
        let (w, h) = (960, 640)
        var pixels = [UInt8](repeating: 0, count: w * h * 4)
        for y in 0..<h {
            for x in 0..<w {
                let i = (y * w + x) * 4
                pixels[i] = UInt8((Double(x) * 255 / Double(w - 1)).rounded())
                (pixels[i + 1], pixels[i + 2], pixels[i + 3]) = (100, 200, 255)
            }
        }
        let image = try VImage.fromPixels(RGBABuffer(width: w, height: h, pixels: pixels))
        let scale = 80.0 / 240.0
        let (left, top, width, height) = (10, 20, 60, 20)
        let tap = try ThumbnailTap(
            for: image, factor: 4, hscale: scale / 4, vscale: scale / 4, left: left, top: top, windowWidth: width,
            windowHeight: height)
        try ThumbnailTap.drain(tap.tapping(image))
        let out = try tap.resampled()
        #expect(out.count == width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let pixel = Array(out[((y * width + x) * 4)..<((y * width + x) * 4 + 4)])
                // Flat channels stay flat: the weights are normalised.
                #expect(abs(pixel[1] - 100) < 1e-3 && abs(pixel[2] - 200) < 1e-3 && abs(pixel[3] - 255) < 1e-3)
                // The ramp is read at the output pixel's centre: source x (X + 0.5) × 12 − 0.5.
                let centre = (Double(left + x) + 0.5) * 12 - 0.5
                let expected = centre * 255 / Double(w - 1)
                #expect(abs(Double(pixel[0]) - expected) < 0.15, "x \(left + x): \(pixel[0]) vs \(expected)")
            }
        }
    }

    @Test("A region narrower than the image, pulled before the full drain, is counted once (8×8 of 100s, factor 4)")
    func tapCountsEachPixelOnce() throws {
        let image = try VImage.fromPixels(
            RGBABuffer(width: 8, height: 8, pixels: [UInt8](repeating: 100, count: 8 * 8 * 4)))
        // Blocks of 4×4 read back at scale 1 over the whole 2×2 grid: each output is a block mean.
        let tap = try ThumbnailTap(
            for: image, factor: 4, hscale: 0.25, vscale: 0.25, left: 0, top: 0, windowWidth: 2, windowHeight: 2)
        let tapped = try tap.tapping(image)
        // Part of the first rows, then every pixel.
        let part = try tapped.derive("crop") { CVipsShim_crop($0, $1, 0, 0, 3, 8) }
        try ThumbnailTap.drain(part)
        try ThumbnailTap.drain(tapped)
        let means = try tap.resampled()
        for i in 0..<4 {
            let pixel = Array(means[(i * 4)..<(i * 4 + 4)])
            // Premultiplied RGBA of an opaque 100: (100, 100, 100, 100 · 100 / 255 …) — all
            // channels as the fully opaque RGBA means: colour 100·a/255, alpha 100.
            #expect(abs(pixel[3] - 100) < 1e-3, "block \(i): alpha mean \(pixel[3]) (a double count gives more)")
            #expect(abs(pixel[0] - 100 * 100 / 255) < 1e-2, "block \(i): colour \(pixel[0])")
        }
    }

    @Test("A 65,000×330 strip's tap sums only the crop's blocks: a few MB, not hundreds")
    func tapSumsOnlyTheCrop() throws {
        let width = 65_000
        let height = 330
        let pixels = [UInt8](repeating: 128, count: width * height * 4)
        let image = try VImage.fromPixels(RGBABuffer(width: width, height: height, pixels: pixels))
        let scale = AspectFillScale(width: 80, height: 80)
        // The factor a run picks: the covering side (330 high for an 80 canvas) leaves ≥ 2×.
        let tap = try scale.tap(for: image, factor: 2, orientation: 1)
        #expect(tap.bytes < 4 << 20, "the tap holds \(tap.bytes) bytes")
        try ThumbnailTap.drain(tap.tapping(image))
        let rgba = try scale.apply(tap: tap, orientation: 1, format: "PNG")
        #expect(rgba.width == 80 && rgba.height == 80)
        // Flat grey in, flat grey out.
        #expect(rgba.pixels.allSatisfy { $0 == 128 || $0 == 255 }, "flat grey stays flat")
    }

    @Test("Same source, same bytes")
    func deterministic() throws {
        let a = try thumbnail("photos/Nikon-Coolpix-P7000.webp").png
        let b = try thumbnail("photos/Nikon-Coolpix-P7000.webp").png
        #expect(a == b)
    }

    @Test("Non-square canvas and scale 3")
    func otherGeometry() throws {
        var settings = PipelineSettings()
        settings.thumbnail.width = 60
        settings.thumbnail.height = 40
        settings.thumbnail.scale = 3
        let (png, image) = try thumbnail("photos/Canon-EOS-5D.jpg", settings: settings)
        #expect(try #require(PNGInfo.size(png)) == (180, 120))
        #expect(image[0, 0][3] == 0 && image[90, 60][3] == 255)
    }

    @Test("Sources over limits.maxPixels are refused from the header")
    func maxPixels() throws {
        var limits = PipelineSettings.Limits()
        limits.maxPixels = 1000
        #expect(throws: ItemFailure.self) {
            try Decode(limits: limits).header(of: TestPaths.fixture("photos/Nikon-D3100.jpg"))
        }
        do {
            _ = try Decode(limits: PipelineSettings.Limits()).header(
                of: TestPaths.fixture("bad/bomb-65536x65536_65536-uint32-limit.png"))
            Issue.record("the 65536×65536 PNG should be refused")
        } catch {
            #expect(error.message.contains("over limits.maxPixels"))
        }
    }
}
