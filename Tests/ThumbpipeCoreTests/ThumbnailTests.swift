import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("Thumbnails on real photos", .vipsStarted)
struct ThumbnailTests {
    let thumbnailer = Thumbnailer(settings: PipelineSettings())

    func thumbnail(_ relative: String) throws -> (png: Data, image: DecodedTestImage) {
        let path = TestPaths.fixture(relative)
        var spans = Spans()
        let header = try thumbnailer.decode.header(of: path)
        let png = try thumbnailer.thumbnail(for: path, header: header, spans: &spans)
        return (png, try DecodedTestImage.load(png: png))
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
        let header = try thumbnailer.decode.header(of: TestPaths.fixture("photos/Canon-EOS-1000D.jpg"))
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
        let tap = try ThumbnailTap(for: image, factor: 4)
        try withExtendedLifetime(tap) { try ThumbnailTap.drain(tap.tapping(image)) }
        let scale = 80.0 / 240.0
        let (left, top, width, height) = (10, 20, 60, 20)
        let out = try tap.resampled(hscale: scale, vscale: scale, left: left, top: top, width: width, height: height)
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
        let thumbnailer = Thumbnailer(settings: settings)
        let path = TestPaths.fixture("photos/Canon-EOS-5D.jpg")
        var spans = Spans()
        let png = try thumbnailer.thumbnail(
            for: path, header: try thumbnailer.decode.header(of: path), spans: &spans)
        #expect(try #require(PNGInfo.size(png)) == (180, 120))
        let image = try DecodedTestImage.load(png: png)
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
