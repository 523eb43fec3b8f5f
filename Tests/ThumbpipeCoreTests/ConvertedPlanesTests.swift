import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// JPEGs in an RGB matrix/TRC profile (Display P3, Adobe RGB, ProPhoto, a
/// profile named sRGB whose numbers are not) take the plane path too, decoded
/// a band at a time and converted to sRGB on the way: their stores must hold
/// what an lcms conversion of the source holds, as well as libvips's do.
@Suite("JPEG plane path, colour converted", .vipsStarted, .serialized)
struct ConvertedPlanesTests {
    /// `jpeg`'s bytes with `profile` embedded (an APP2 ICC_PROFILE marker after SOI).
    static func tagged(_ jpeg: [UInt8], with profile: [UInt8]) -> [UInt8] {
        let length = 2 + 12 + 2 + profile.count
        let marker: [UInt8] =
            [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + Array("ICC_PROFILE".utf8) + [0, 1, 1]
        return Array(jpeg[..<2]) + marker + profile + Array(jpeg[2...])
    }

    /// The profiled JPEGs: the fixtures with one, and camera photos (upright and
    /// turned) tagged with Display P3, ProPhoto and a P3 profile named "sRGB".
    static func sources() throws -> [(label: String, path: String)] {
        var sources = [
            ("Adobe RGB (a98 sample)", TestPaths.fixture("edge/icc-adobergb-a98_sample.jpg")),
            ("Adobe RGB (Canon EOS 7D)", TestPaths.fixture("edge/icc-adobergb-photo_Canon-EOS-7D.jpg")),
        ]
        let folder = TestPaths.temporaryFolder("profiled")
        let profiles = [
            ("Display P3", try ColourTests.profile(of: "edge/icc-display-p3_p3.png")),
            ("ProPhoto", try ColourTests.profile(of: "edge/icc-prophoto_prophoto.png")),
            ("sRGB-named P3", try CraftedProfiles.srgbNamedP3()),
        ]
        let photos = ["photos/Leica-T-Typ-701-small.jpg", "edge/orientation-6_Landscape_6.jpg"]
        for (name, profile) in profiles {
            for photo in photos {
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture(photo))))
                let path = folder + "/\(name.filter(\.isLetter))-\(sources.count).jpg"
                try Data(tagged(bytes, with: profile)).write(to: URL(fileURLWithPath: path))
                sources.append(("\(name), \(photo)", path))
            }
        }
        return sources
    }

    @Test("Every profiled JPEG: stored through the planes, converted, as close to lcms's conversion as libvips's store")
    func storesMatchLcms() throws {
        for (label, path) in try Self.sources() {
            let planes = try PlanePathTests.store(path, planes: true)
            let libvips = try PlanePathTests.store(path, planes: false)
            // A source too small to shrink on load is decoded once in memory, by libvips.
            let small = label.contains("a98")
            #expect(
                planes.path == (small ? .libvips : .planesConverted), "\(label): \(String(describing: planes.path))")
            #expect(libvips.path == .libvips, "\(label)")
            // The reference: the source converted by lcms (relative intent) and turned upright.
            let reference = try DecodedTestImage.load(path, autorotate: true, lcms: true)
            let ours = try PlanePathTests.decoded(planes.bytes)
            let theirs = try PlanePathTests.decoded(libvips.bytes)
            try #require(ours.width == reference.width && ours.height == reference.height, "\(label): upright alike")
            let (qa, qb) = (psnr(ours.pixels, reference.pixels), psnr(theirs.pixels, reference.pixels))
            // libjpeg decodes, the same tables convert, libjpeg encodes: libvips's pixels exactly.
            #expect(ours.pixels == theirs.pixels, "\(label): the store's pixels are libvips's")
            print(
                "converted\t\(label)\tplanes \(String(format: "%.2f", qa)) dB\tlibvips \(String(format: "%.2f", qb)) dB"
            )
            #expect(qa >= qb - 0.1, "\(label): planes \(qa) dB, libvips \(qb) dB against lcms's conversion")
            #expect(qa >= 30, "\(label): \(qa) dB against lcms's conversion")
            // The thumbnail comes from the same converted pixels: as libvips's within a level or two.
            let a = try DecodedTestImage.load(png: try #require(planes.thumbnail))
            let b = try DecodedTestImage.load(png: try #require(libvips.thumbnail))
            #expect(psnr(a.pixels, b.pixels) >= 40, "\(label): thumbnail \(psnr(a.pixels, b.pixels)) dB from libvips's")
        }
    }

    @Test("All 8 orientations on the converting path, odd sizes: the store's pixels are libvips's exactly")
    func orientations() throws {
        // A turned source's upright rows come from tiles transposed in registers
        // (4 × 4 pixels) with a pixel-at-a-time edge: every orientation, both edges.
        let p3 = try ColourTests.profile(of: "edge/icc-display-p3_p3.png")
        for orientation in 1...8 {
            let plain = try PlanePathTests.oriented(orientation, width: 1001, height: 667, quality: 80)
            let path = String(plain.dropLast(4)) + "-p3.jpg"
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
            try Data(Self.tagged(bytes, with: p3)).write(to: URL(fileURLWithPath: path))
            let planes = try PlanePathTests.store(path, planes: true)
            let libvips = try PlanePathTests.store(path, planes: false)
            #expect(planes.path == .planesConverted, "orientation \(orientation): \(String(describing: planes.path))")
            let ours = try PlanePathTests.decoded(planes.bytes)
            let theirs = try PlanePathTests.decoded(libvips.bytes)
            #expect(ours.width == theirs.width && ours.height == theirs.height, "orientation \(orientation)")
            let differing = zip(ours.pixels, theirs.pixels).count { $0 != $1 }
            #expect(differing == 0, "orientation \(orientation): \(differing) bytes differ from libvips's store")
        }
    }

    @Test(
        "Crafted Display P3 JPEGs on the converting path: never a crash; a refused one falls back to libvips, saying why; every store decodes"
    )
    func craftedSources() throws {
        let p3 = try ColourTests.profile(of: "edge/icc-display-p3_p3.png")
        let folder = TestPaths.temporaryFolder("crafted-converted")
        var routes: [String: Int] = [:]
        defer { print("crafted converted: \(routes.sorted { $0.key < $1.key })") }
        let source = [UInt8](try Data(contentsOf: URL(fileURLWithPath: PlanePathTests.sources.jpeg)))
        for (name, bytes) in PlanePathTests.crafted(source) {
            let path = folder + "/crafted.jpg"
            // The profile goes in after SOI, where a crafted variant keeps its first two bytes.
            guard bytes.count > 2 else { continue }
            try Data(Self.tagged(bytes, with: p3)).write(to: URL(fileURLWithPath: path))
            let job = ItemJob(
                index: 0, itemKey: "k", source: path, makeThumbnail: true, makeStore: true, hashSource: false)
            let outcome = ItemJobRunner(settings: PipelineSettings()).runHere(job)
            routes[outcome.storeRoute ?? (outcome.failure == nil ? "none" : "failed"), default: 0] += 1
            guard let store = outcome.store else { continue }
            // A file cut short warns (premature end): never a store made by the converting path.
            if name.hasPrefix("cut") { #expect(outcome.storePath != .planesConverted, "\(name)") }
            if outcome.storePath == .libvips, let reason = outcome.storeReason {
                #expect(!reason.isEmpty, "\(name): a fallback says why")
            }
            #expect((try? PlanePathTests.decoded(store)) != nil, "\(name): the store does not decode")
        }
        #expect((routes[StorePath.planesConverted.rawValue] ?? 0) > 0, "some variants still convert on the planes")
        #expect(routes.keys.contains { $0.hasPrefix("libvips: libjpeg refused it") }, "\(routes)")
    }

    @Test("What stays on libvips says why: CMYK, grey, a LUT profile, and the store's settings")
    func reasons() throws {
        let cases: [(String, String)] = [
            ("edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg", "CMYK"),
            ("edge/grey-jpeg_cd1.1.jpg", "grey"),
            ("edge/icc-xyb-jpegli_sample-xyb.jpg", "a profile that is not RGB matrix/TRC"),
        ]
        for (relative, why) in cases {
            let header = try Decode(limits: PipelineSettings().limits).header(of: TestPaths.fixture(relative))
            let plan = ItemPlan.make(
                header: header, makeStore: true, canvasWidth: 80, canvasHeight: 80, store: PipelineSettings.Store(),
                planes: true)
            #expect(plan.store == .libvips(why), "\(relative): \(plan.store)")
            #expect(!plan.thumbnailOnPlanes)
        }
    }
}
