import CJpegPlanes
import CThumbKernels
import CVips
import CVipsShim
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

    @Test(
        "All 8 orientations on the converting path, odd and even sizes: the store's pixels are libvips's exactly",
        arguments: [(1001, 667, false), (1000, 666, false), (1024, 672, false), (998, 1000, false), (1000, 666, true)])
    func orientations(width: Int, height: Int, noisy: Bool) throws {
        // A turned source's upright rows come from tiles transposed in registers
        // (4 × 4 pixels) with a pixel-at-a-time edge: every orientation, both edges.
        // Even sides are held as the store's YCbCr (the encoder's padding past the
        // right edge made from the last column: 1000 and 666 are not whole MCUs, 1024 and 672 are).
        let p3 = try ColourTests.profile(of: "edge/icc-display-p3_p3.png")
        for orientation in 1...8 {
            let plain =
                noisy
                ? try Self.noisy(orientation, width: width, height: height)
                : try PlanePathTests.oriented(orientation, width: width, height: height, quality: 80)
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

    /// A JPEG of pseudo-random colours, `width × height`, tagged with EXIF
    /// `orientation`: every chroma sample unlike its neighbours (a photo's chroma
    /// is smooth enough that two of its neighbouring rows swapped can leave the
    /// store's bytes as they were).
    static func noisy(_ orientation: Int, width: Int, height: Int) throws -> String {
        var state: UInt32 = 2_463_534_242
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for i in pixels.indices {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            pixels[i] = UInt8(truncatingIfNeeded: state >> 24)
        }
        let image = try #require(
            pixels.withUnsafeBytes {
                vips_image_new_from_memory_copy(
                    $0.baseAddress, $0.count, Int32(width), Int32(height), 3, VIPS_FORMAT_UCHAR)
            })
        defer { CVipsShim_unref(image) }
        return try PlanePathTests.saved(
            image, orientation: orientation, in: "noisy", as: "n\(orientation)-\(width)x\(height).jpg", quality: 90)
    }

    @Test("A turned source with even sides is held as its store's YCbCr: the same store as held as RGB, byte for byte")
    func heldAsYCbCr() throws {
        let p3 = try ColourTests.profile(of: "edge/icc-display-p3_p3.png")
        let conversion = try #require(p3.withUnsafeBytes { ShaperConversion(profile: $0) })
        let shaper = try #require(conversion.makeShaper())
        defer { CThumbKernels_shaper_free(shaper) }
        for (width, height) in [(1000, 666), (1001, 666), (1000, 667), (998, 1000)] {
            for orientation in 1...8 {
                let path = try Self.noisy(orientation, width: width, height: height)
                let source = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                var stores: [Data] = []
                var held: [Bool] = []
                for hold: Int32 in [0, 1] {
                    var job = CJpegPlanesJob(
                        width: Int32(width), height: Int32(height), orientation: Int32(orientation), quality: 50,
                        optimize_coding: 0, tap: nil, shaper: shaper, blocks: 0, tap_means: 0, hold_turned: hold)
                    var result = CJpegPlanesResult()
                    var error = [CChar](repeating: 0, count: 256)
                    let status = CJpegPlanes_transcode(source, source.count, &job, &result, &error, error.count)
                    defer { CJpegPlanes_free_buffer(result.jpeg) }
                    try #require(status == 0 && result.jpeg != nil, "\(width) × \(height), orientation \(orientation)")
                    stores.append(Data(bytes: result.jpeg, count: Int(result.size)))
                    held.append(result.held != 0)
                }
                let even = width % 2 == 0 && height % 2 == 0
                #expect(held == [false, even && orientation != 1], "\(width) × \(height), orientation \(orientation)")
                // A Bool: Data compared in #expect is diffed for the message (minutes for a megabyte).
                let same = stores[0] == stores[1]
                #expect(same, "\(width) × \(height), orientation \(orientation): the stores differ")
            }
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
            #expect(plan.onPlanes == nil)
        }
    }
}
