import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// Every encoding libvips can hand over reaches sRGB the way `vips_thumbnail`
/// does: a float scRGB TIFF with an ICC profile (what HDR merges export) is not black.
@Suite("Encodings: float, linear, LAB, grey with alpha reach sRGB as vips_thumbnail renders them", .vipsStarted)
struct EncodingTests {
    static func mean(_ image: DecodedTestImage) -> Double {
        var sum = 0.0
        var count = 0
        let colour = image.bands >= 3 ? 3 : 1
        for (index, value) in image.pixels.enumerated() where index % image.bands < colour {
            sum += Double(value)
            count += 1
        }
        return sum / Double(max(count, 1))
    }

    @Test(
        "Each encoding's store and thumbnail match vips_thumbnail's rendering",
        arguments: [
            ("scrgb", false, "tif[profile=srgb]"), ("scrgb", false, "tif"), ("lab", false, "tif"),
            ("xyz", false, "tif"),
            ("rgb16", false, "tif[profile=srgb]"), ("grey16", false, "png"), ("b-w", true, "png"),
        ])
    func rendersAsVipsThumbnail(interpretation: String, alpha: Bool, suffix: String) throws {
        let folder = TestPaths.temporaryFolder("encoding")
        let small = folder + "/small.png"
        try makeTestImage(from: TestPaths.fixture("photos/Nikon-D3100.jpg"), to: small, width: 240, height: 160)
        let source = folder + "/source.\(suffix)"
        try convertTestImage(from: small, to: source, interpretation: interpretation, alpha: alpha)
        let path = source.split(separator: "[").first.map(String.init) ?? source
        // vips_thumbnail (what vipsthumbnail runs), to the store's size and the thumbnail's.
        let expectedStore = folder + "/expected-store.png"
        try makeTestImage(from: path, to: expectedStore, width: 240, height: 160)
        let expectedThumb = folder + "/expected-thumb.png"
        try makeTestImage(from: path, to: expectedThumb, width: 80, height: 80)
        let job = ItemJob(index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: true, hashSource: false)
        let outcome = ItemJobRunner(settings: PipelineSettings()).runHere(job)
        if let failure = outcome.failure { throw failure }
        let store = folder + "/store.jpg"
        try #require(outcome.store).write(to: URL(fileURLWithPath: store))
        let thumbnail = try DecodedTestImage.load(png: try #require(outcome.thumbnail))
        let storeMean = Self.mean(try DecodedTestImage.load(store))
        let expectedMean = Self.mean(try DecodedTestImage.load(expectedStore))
        #expect(expectedMean > 60, "the reference itself is not black: \(expectedMean)")
        #expect(abs(storeMean - expectedMean) < 4, "store mean \(storeMean), vips_thumbnail's \(expectedMean)")
        // The thumbnail's corners are clipped (transparent): compare its centre's mean.
        let centre = thumbnail.pixels.enumerated().filter { index, _ in
            let pixel = index / 4
            let (x, y) = (pixel % thumbnail.width, pixel / thumbnail.width)
            return index % 4 < 3 && (20..<60).contains(x) && (20..<60).contains(y)
        }.map { Double($0.element) }
        let expected = try DecodedTestImage.load(expectedThumb)
        let expectedCentre = expected.pixels.enumerated().filter { index, _ in
            let pixel = index / expected.bands
            let (x, y) = (pixel % expected.width, pixel / expected.width)
            return index % expected.bands < (expected.bands >= 3 ? 3 : 1) && (20..<60).contains(x)
                && (20..<60).contains(y)
        }.map { Double($0.element) }
        let thumbMean = centre.reduce(0, +) / Double(max(centre.count, 1))
        let expectedThumbMean = expectedCentre.reduce(0, +) / Double(max(expectedCentre.count, 1))
        #expect(
            abs(thumbMean - expectedThumbMean) < 6,
            "thumbnail centre \(thumbMean), vips_thumbnail's \(expectedThumbMean)")
    }
}
