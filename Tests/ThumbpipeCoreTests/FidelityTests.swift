import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// Premultiplied RGBA samples (0…255) of a thumbnail-sized image.
struct PremultipliedImage {
    var width: Int
    var height: Int
    var samples: [Double]

    /// From a straight-alpha 8-bit RGBA image.
    init(_ image: DecodedTestImage) {
        width = image.width
        height = image.height
        samples = [Double](repeating: 0, count: width * height * 4)
        for i in 0..<(width * height) {
            let a = Double(image.pixels[i * 4 + 3])
            for c in 0..<3 { samples[i * 4 + c] = Double(image.pixels[i * 4 + c]) * a / 255 }
            samples[i * 4 + 3] = a
        }
    }

    init(width: Int, height: Int, samples: [Double]) {
        self.width = width
        self.height = height
        self.samples = samples
    }

    /// The premultiplied RGB after a Gaussian blur of σ = 1 px (edges clamped).
    func blurredRGB() -> [Double] {
        let weights = (-3...3).map { exp(-Double($0 * $0) / 2) }
        let total = weights.reduce(0, +)
        func pass(_ input: [Double], horizontal: Bool) -> [Double] {
            var output = input
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<3 {
                        var sum = 0.0
                        for k in -3...3 {
                            let sx = horizontal ? min(max(x + k, 0), width - 1) : x
                            let sy = horizontal ? y : min(max(y + k, 0), height - 1)
                            sum += input[(sy * width + sx) * 4 + c] * weights[k + 3]
                        }
                        output[(y * width + x) * 4 + c] = sum / total
                    }
                }
            }
            return output
        }
        let blurred = pass(pass(samples, horizontal: true), horizontal: false)
        return (0..<(width * height)).flatMap { i in (0..<3).map { blurred[i * 4 + $0] } }
    }

    /// The variance of the 4-neighbour Laplacian of premultiplied luma over the inner region (8 px in from each edge).
    func laplacianVariance() -> Double {
        func luma(_ x: Int, _ y: Int) -> Double {
            let i = (y * width + x) * 4
            return 0.299 * samples[i] + 0.587 * samples[i + 1] + 0.114 * samples[i + 2]
        }
        var values: [Double] = []
        for y in 8..<(height - 8) {
            for x in 8..<(width - 8) {
                values.append(luma(x - 1, y) + luma(x + 1, y) + luma(x, y - 1) + luma(x, y + 1) - 4 * luma(x, y))
            }
        }
        let mean = values.reduce(0, +) / Double(values.count)
        return values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count)
    }
}

/// PSNR between two equal-length sample arrays on a 0…255 scale.
func psnr(_ a: [Double], _ b: [Double]) -> Double {
    var sum = 0.0
    for i in a.indices { sum += (a[i] - b[i]) * (a[i] - b[i]) }
    let mse = sum / Double(a.count)
    return mse < 1e-12 ? 99 : 10 * log10(255 * 255 / mse)
}

/// CIELAB (D50) of an 8-bit sRGB colour, through the Bradford-adapted sRGB matrix.
func lab(_ r: UInt8, _ g: UInt8, _ b: UInt8) -> (Double, Double, Double) {
    func linear(_ v: UInt8) -> Double {
        let c = Double(v) / 255
        return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
    }
    let (R, G, B) = (linear(r), linear(g), linear(b))
    let X = 0.436_074_7 * R + 0.385_064_9 * G + 0.143_080_4 * B
    let Y = 0.222_504_5 * R + 0.716_878_6 * G + 0.060_616_9 * B
    let Z = 0.013_932_2 * R + 0.097_104_5 * G + 0.714_173_3 * B
    func f(_ t: Double) -> Double { t > 216.0 / 24389 ? cbrt(t) : (24389.0 / 27 * t + 16) / 116 }
    let (fx, fy, fz) = (f(X / 0.96422), f(Y), f(Z / 0.82521))
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))
}

func deltaE(_ a: (Double, Double, Double), _ b: (Double, Double, Double)) -> Double {
    ((a.0 - b.0) * (a.0 - b.0) + (a.1 - b.1) * (a.1 - b.1) + (a.2 - b.2) * (a.2 - b.2)).squareRoot()
}

/// The fidelity check shared by the fixture suite and the opt-in corpus sweep:
/// the thumbnail a run makes, against an independent reference.
enum Fidelity {
    /// Every loader allowed: fidelity is about how a format decodes once a user allows it
    /// (the default allow-list is checked in the isolation tests).
    static let settings: PipelineSettings = {
        var settings = PipelineSettings()
        settings.limits.formats = ImageFormats(ImageFormat.allCases)
        return settings
    }()
    /// Files that must fail, and the words their failure must carry (by file name).
    static let expectedFailures = ["huge-20000x14000_giant-image.jpg": "over limits.maxPixels"]

    /// The thumbnail as a run makes it (through the decode plan a run picks),
    /// read back from the archive; a failed item throws its failure.
    static func thumbnail(_ path: String, settings: PipelineSettings = settings) throws -> DecodedTestImage {
        let item = ManifestItem(line: 1, itemName: "x", itemKey: "x", image: path, imagePath: path)
        let (output, result) = try runManifest([item], settings: settings, jobs: 1)
        if let failure = result.failures.first { throw ItemFailure(failure.stage, failure.message) }
        let png = try #require(try KeyedArchiveReader(path: output + "/items.archive").item(at: 0).thumbnailData)
        try? FileManager.default.removeItem(atPath: output)
        return try DecodedTestImage.load(png: png)
    }

    /// The reference (see `reference_thumbnail`, which shares no code with the
    /// product), then the same exact rounded-rectangle coverage.
    static func reference(_ path: String, settings: PipelineSettings = settings) throws -> PremultipliedImage {
        let width = settings.thumbnail.pixelWidth
        let height = settings.thumbnail.pixelHeight
        let samples = try referenceThumbnail(path, width: width, height: height)
        let coverage = RoundedClip(radius: settings.thumbnail.pixelRadius).coverage(width: width, height: height)
        var clipped = [Double](repeating: 0, count: width * height * 4)
        for i in 0..<(width * height) {
            for c in 0..<4 { clipped[i * 4 + c] = min(255, max(0, samples[i * 4 + c])) * coverage[i] }
        }
        return PremultipliedImage(width: width, height: height, samples: clipped)
    }

    /// PSNR ≥ 32 dB after a σ = 1 blur and ≥ 0.8× the reference's sharpness, or
    /// the expected failure.
    static func check(_ path: String) throws {
        let name = URL(fileURLWithPath: path).lastPathComponent
        if let words = expectedFailures[name] {
            do {
                _ = try thumbnail(path)
                Issue.record("\(name) should fail")
            } catch let failure as ItemFailure {
                #expect(failure.message.contains(words), "\(failure.message)")
            }
            return
        }
        let ours = PremultipliedImage(try thumbnail(path))
        let reference = try reference(path)
        let value = psnr(ours.blurredRGB(), reference.blurredRGB())
        #expect(value >= 32, "\(name): PSNR \(value) dB after σ=1 blur")
        let sharpness = ours.laplacianVariance()
        let referenceSharpness = reference.laplacianVariance()
        #expect(
            sharpness >= 0.8 * referenceSharpness - 1e-9,
            "\(name): Laplacian variance \(sharpness) vs reference \(referenceSharpness)")
        print(
            "fidelity\t\(name)\tPSNR \(String(format: "%.1f", value)) dB\tLaplacian variance \(String(format: "%.3g", sharpness)) vs \(String(format: "%.3g", referenceSharpness))"
        )
    }
}

@Suite("Image fidelity on the fixtures", .vipsStarted)
struct FidelityTests {
    static var fixtureFiles: [String] { TestPaths.fixtureFiles("edge") + TestPaths.fixtureFiles("photos") }

    func thumbnail(_ path: String, settings: PipelineSettings = Fidelity.settings) throws -> DecodedTestImage {
        try Fidelity.thumbnail(path, settings: settings)
    }

    func reference(_ path: String, settings: PipelineSettings = Fidelity.settings) throws -> PremultipliedImage {
        try Fidelity.reference(path, settings: settings)
    }

    @Test("The fixture set is present") func fixturesPresent() {
        #expect(Self.fixtureFiles.count >= 50, "\(TestPaths.fixtures.path) holds \(Self.fixtureFiles.count) images")
    }

    @Test("Thumbnails keep fidelity and sharpness", arguments: FidelityTests.fixtureFiles)
    func fidelity(relative: String) throws {
        try Fidelity.check(TestPaths.fixture(relative))
    }

    /// Small and upscaled sources, and JPEGs on either side of each shrink
    /// boundary (the covering side at 2×, 4×, 8× and 16× the 80 px canvas),
    /// made from a camera photo: name, width, height.
    static let generated: [(String, Int, Int)] =
        [
            ("strip-284x25.jpg[Q=90]", 284, 25), ("strip-25x284.jpg[Q=90]", 25, 284), ("strip-940x2.png", 940, 2),
            ("sub-canvas-40x30.png", 40, 30), ("sub-canvas-40x30-interlaced.png[interlace]", 40, 30),
            ("sub-canvas-60x45.jpg[Q=90]", 60, 45), ("small-120x90.png", 120, 90),
        ]
        + [159, 160, 161, 319, 320, 321, 639, 640, 641, 1279, 1280, 1281].map { side in
            ("boundary-\(side * 3 / 2)x\(side).jpg[Q=92]", side * 3 / 2, side)
        }

    static let generatedFolder = TestPaths.temporaryFolder("generated")

    @Test("Small, upscaled and shrink-boundary sources keep fidelity and sharpness", arguments: FidelityTests.generated)
    func generatedFidelity(name: String, width: Int, height: Int) throws {
        let path = Self.generatedFolder + "/" + String(name.prefix { $0 != "[" })
        try makeTestImage(
            from: TestPaths.fixture("photos/Nikon-D3100.jpg"), to: Self.generatedFolder + "/" + name, width: width,
            height: height)
        try Fidelity.check(path)
    }

    @Test("Display P3 red comes out as sRGB red (ΔE < 3)")
    func displayP3() throws {
        // Every pixel of this 8×8 PNG is a saturated P3 red outside sRGB's gamut;
        // through its profile it must land on sRGB's red primary.
        let image = try thumbnail(TestPaths.fixture("edge/icc-display-p3_p3.png"))
        let pixel = image[40, 40]
        let difference = deltaE(lab(pixel[0], pixel[1], pixel[2]), lab(255, 0, 0))
        #expect(difference < 3, "got \(pixel), ΔE \(difference)")
        print("fidelity\tP3 red\tΔE \(String(format: "%.2f", difference))")
    }

    @Test("A FOGRA39 CMYK red solid comes out as ISO 12647-2 red (ΔE < 3)")
    func cmykFogra() throws {
        // ISO 12647-2 (paper types 1–2, FOGRA39) gives the M+Y solid as L* 47, a* 68, b* 48
        // on paper L* 95, a* 0, b* −2; media-relative (relative intent), that is
        // L* 49.84, a* 71.06, b* 50.82.
        let image = try thumbnail(TestPaths.fixture("edge/tiff-cmyk-fogra39_fogra-0-100-100-0.tif"))
        let pixel = image[40, 40]
        let difference = deltaE(lab(pixel[0], pixel[1], pixel[2]), (49.84, 71.06, 50.82))
        #expect(difference < 3, "got \(pixel), ΔE \(difference)")
        print("fidelity\tFOGRA39 red\tΔE \(String(format: "%.2f", difference))")
    }

    @Test(
        "Geometry settings",
        arguments: [
            (40.0, 40.0, 1.0, 5.0), (40, 40, 2, 5), (40, 40, 3, 5), (60, 40, 2, 5), (40, 40, 2, 0), (40, 40, 2, 20),
            (60, 40, 2, 20),
        ])
    func geometry(width: Double, height: Double, scale: Double, radius: Double) throws {
        var settings = PipelineSettings()
        settings.thumbnail.width = width
        settings.thumbnail.height = height
        settings.thumbnail.scale = scale
        settings.thumbnail.cornerRadius = radius
        let path = TestPaths.fixture("photos/Nikon-D3100.jpg")
        let image = try thumbnail(path, settings: settings)
        let w = Int(width * scale)
        let h = Int(height * scale)
        #expect(image.width == w && image.height == h)
        // Alpha is the exact coverage of the rounded rectangle, to 8-bit rounding.
        let clip = RoundedClip(radius: settings.thumbnail.pixelRadius)
        let coverage = clip.coverage(width: w, height: h)
        var worst = 0.0
        var total = 0.0
        for i in 0..<(w * h) {
            let error = abs(Double(image.pixels[i * 4 + 3]) / 255 - coverage[i])
            worst = max(worst, error)
            total += error
        }
        #expect(worst <= 0.5 / 255 + 1e-9, "max mask error \(worst * 255)/255")
        #expect(total / Double(w * h) <= 2.0 / 255)
        if radius == 0 {
            #expect(image[0, 0][3] == 255, "square corners")
        } else {
            #expect(image[0, 0][3] == 0)
        }
        if radius * 2 >= min(width, height) {
            // A full half-side radius: the short sides are semicircles, touching the edge only at their middle.
            let short = min(w, h)
            #expect(image[w / 2, 0][3] > 0 && image[0, short / 2][3] > 0 && image[0, short / 4][3] == 0)
        }
        // Scaling fidelity holds for every geometry.
        let value = psnr(PremultipliedImage(image).blurredRGB(), try reference(path, settings: settings).blurredRGB())
        #expect(value >= 30, "PSNR \(value)")
    }
}

/// The corpus-wide sweep, opt-in: `THUMBPIPE_CORPUS=DIR` runs every file of
/// DIR/edge and DIR/photos. Set but missing or empty, it fails; it never runs
/// zero cases.
@Suite(
    "Image fidelity on the corpus (THUMBPIPE_CORPUS)", .vipsStarted,
    .enabled(if: TestPaths.corpusFolder != nil, "set THUMBPIPE_CORPUS=DIR to sweep a corpus"))
struct CorpusFidelityTests {
    static var files: [String] {
        get throws {
            let files = try TestPaths.corpusFiles(["edge", "photos"])
            print("corpus sweep: \(files.count) files from \(TestPaths.corpusFolder ?? "")")
            return files
        }
    }

    @Test("The corpus is there") func corpusPresent() throws {
        let files = try TestPaths.corpusFiles(["edge", "photos"])
        #expect(!files.isEmpty)
    }

    @Test("Every corpus file: fidelity and sharpness", arguments: try CorpusFidelityTests.files)
    func fidelity(path: String) throws {
        try Fidelity.check(path)
    }
}
