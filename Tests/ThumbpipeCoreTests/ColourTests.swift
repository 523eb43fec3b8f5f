import CThumbKernels
import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// Matrix/TRC profiles (Display P3, Adobe RGB, ProPhoto…) are converted to sRGB
/// through tables (``ShaperConversion``) instead of lcms: the result must be
/// lcms's, within one level, for every colour there is.
@Suite struct ColourTests {
    /// The samples of an 8-bit image.
    static func bytes(_ image: VImage) throws -> [UInt8] {
        try image.withSamples { [UInt8]($0) }
    }

    /// How many samples of two equal-length buffers differ, and by how much at most
    /// (through pointers: element by element, unoptimized, 67 M samples take seconds).
    static func differences(_ a: [UInt8], _ b: [UInt8]) -> (count: Int, largest: Int) {
        precondition(a.count == b.count)
        return a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                var count = 0
                var largest: UInt8 = 0
                let p = a.baseAddress!, q = b.baseAddress!
                for i in 0..<a.count where p[i] != q[i] {
                    count += 1
                    largest = max(largest, p[i] > q[i] ? p[i] - q[i] : q[i] - p[i])
                }
                return (count, Int(largest))
            }
        }
    }

    /// The embedded profile of a fixture.
    static func profile(of relative: String) throws -> [UInt8] {
        try LibVips.start()
        var out: UnsafeMutablePointer<VipsImage>? = nil
        try Vips.check(CVipsShim_load(TestPaths.fixture(relative), 1, 1, 0, 0, &out), "load")
        let image = VImage(out!)
        return try #require(image.withProfile { [UInt8]($0) })
    }

    /// Every 8-bit RGB colour once (4096 × 4096), opaque, tagged with `profile`.
    static func everyColour(tagged profile: [UInt8]) throws -> VImage {
        // Written through a pointer: the tests are built unoptimized, where
        // 16.7 M subscripted stores into an array take seconds.
        let pixels = [UInt8](unsafeUninitializedCapacity: 4096 * 4096 * 4) { buffer, count in
            let p = buffer.baseAddress!
            for y in 0..<4096 {
                for x in 0..<4096 {
                    let q = p + (y * 4096 + x) * 4
                    q[0] = UInt8(x & 255)
                    q[1] = UInt8(y & 255)
                    q[2] = UInt8(x >> 8 | (y >> 8) << 4)
                    q[3] = 255
                }
            }
            count = buffer.count
        }
        let image = try VImage.fromPixels(RGBABuffer(width: 4096, height: 4096, pixels: pixels))
        image.pointer.pointee.Type = VIPS_INTERPRETATION_sRGB
        profile.withUnsafeBytes {
            vips_image_set_blob_copy(image.pointer, VIPS_META_ICC_NAME, $0.baseAddress, $0.count)
        }
        return image
    }

    static let profiled = [
        "edge/icc-display-p3_p3.png", "edge/icc-adobergb-a98_sample.jpg", "edge/icc-adobergb-photo_Canon-EOS-7D.jpg",
        "edge/icc-prophoto_prophoto.png",
    ]

    @Test(arguments: profiled)
    func tablesMatchLcmsForEveryColour(_ relative: String) throws {
        let profile = try Self.profile(of: relative)
        let shaper = profile.withUnsafeBytes { ShaperConversion(profile: $0) }
        #expect(shaper != nil, "a matrix/TRC profile takes the tables")
        let source = try Self.everyColour(tagged: profile)
        let ours = try Self.bytes(Decode(limits: PipelineSettings().limits).toSRGB(source, format: "test"))
        let theirs = try Self.bytes(source.derive("icc_transform") { CVipsShim_icc_to_srgb($0, $1, "srgb") })
        try #require(ours.count == theirs.count)
        let (differing, largest) = Self.differences(ours, theirs)
        #expect(largest <= 1, "\(relative): a sample differs from lcms's by \(largest)")
        #expect(Double(differing) / Double(ours.count) < 0.02, "\(relative): \(differing) samples differ from lcms's")
    }
}

extension ColourTests {
    /// The plane path's shaper (3-band rows, 4 pixels at a time and a tail) gives
    /// the libvips path's bytes for every colour, rows of every length mod 4.
    @Test func planeShaperIsTheTables() throws {
        let profile = try Self.profile(of: "edge/icc-display-p3_p3.png")
        let conversion = try #require(profile.withUnsafeBytes { ShaperConversion(profile: $0) })
        let source = try Self.everyColour(tagged: profile)
        let expected = try Self.bytes(Decode(limits: PipelineSettings().limits).toSRGB(source, format: "test"))
        let shaper = try #require(conversion.makeShaper())
        defer { CThumbKernels_shaper_free(shaper) }
        let rgb = try Self.bytes(source)
        try #require(rgb.count == expected.count)
        let pixels = 4096 * 4096, bands = rgb.count / pixels
        // The pixels as 3-band rows of 4093, 4094, 4095 and 4096 pixels (through
        // pointers: the tests are built unoptimized).
        var packed = [UInt8](repeating: 0, count: pixels * 3)
        let differing = packed.withUnsafeMutableBufferPointer { out in
            rgb.withUnsafeBufferPointer { from in
                expected.withUnsafeBufferPointer { want in
                    let q = out.baseAddress!, p = from.baseAddress!, e = want.baseAddress!
                    for i in 0..<pixels { for c in 0..<3 { q[i * 3 + c] = p[i * bands + c] } }
                    var at = 0, length = 4093
                    while at < pixels {
                        let n = min(length, pixels - at)
                        CThumbKernels_shaper_rgb(shaper, q + at * 3, n)
                        at += n
                        length = length == 4096 ? 4093 : length + 1
                    }
                    var differing = 0
                    for i in 0..<pixels { for c in 0..<3 where q[i * 3 + c] != e[i * bands + c] { differing += 1 } }
                    return differing
                }
            }
        }
        #expect(differing == 0, "\(differing) samples differ from the libvips path's tables")
    }

    /// The AVX-512 loop and the portable loop give the same bytes for every colour,
    /// in rows of every length mod 64, at every fixed-point shift a matrix can take
    /// (its largest entry 1.2 for 15 bits, 2.5 for 14, 5 for 13, 9 and 10 for 12),
    /// out-of-gamut sums clipped at both ends. On a CPU without AVX-512 BW and VBMI
    /// both calls would run the portable loop, so the test is skipped, and says so.
    @Test(
        .enabled(
            if: CThumbKernels_shaper_vector() != 0,
            "this CPU has no AVX-512 BW and VBMI: the vector loop cannot run here, so there is nothing to compare"),
        arguments: [1.2, 2.5, 5, 9, 10] as [Float])
    func vectorLoopIsThePortableOne(_ largest: Float) throws {
        let linear = (0..<3).flatMap { c in (0..<256).map { Float(pow(Double($0) / 255, 2.0 + 0.2 * Double(c))) } }
        let rest = (largest - 1) / 2
        let matrix: [Float] = [largest, -rest, -rest, -rest, largest, 1 - largest, 0.1, -rest, largest]
        let steps = Int(CTHUMBKERNELS_SHAPER_STEPS)
        let encode = (0..<steps).map { UInt8((Double($0) / Double(steps - 1) * 255).rounded()) }
        let shaper = try #require(CThumbKernels_shaper_new(linear, matrix, encode))
        defer { CThumbKernels_shaper_free(shaper) }
        let pixels = 1 << 24
        // Every colour once, through pointers (the tests are built unoptimized).
        var vector = [UInt8](unsafeUninitializedCapacity: pixels * 3) { buffer, count in
            let p = buffer.baseAddress!
            for i in 0..<pixels {
                p[i * 3] = UInt8(i & 255)
                p[i * 3 + 1] = UInt8(i >> 8 & 255)
                p[i * 3 + 2] = UInt8(i >> 16)
            }
            count = buffer.count
        }
        var portable = vector
        vector.withUnsafeMutableBufferPointer { v in
            portable.withUnsafeMutableBufferPointer { q in
                var at = 0, length = 4033
                while at < pixels {
                    let n = min(length, pixels - at)
                    CThumbKernels_shaper_rgb(shaper, v.baseAddress! + at * 3, n)
                    CThumbKernels_shaper_rgb_portable(shaper, q.baseAddress! + at * 3, n)
                    at += n
                    length = length == 4096 ? 4033 : length + 1
                }
            }
        }
        let same = vector.withUnsafeBytes { v in
            portable.withUnsafeBytes { memcmp(v.baseAddress!, $0.baseAddress!, v.count) }
        }
        #expect(same == 0, "largest entry \(largest): the two loops differ")
        // The sums reach past both ends of the table, so the clipping is exercised.
        let extremes = portable.withUnsafeBufferPointer { q in (q.min()!, q.max()!) }
        #expect(extremes == (0, 255))
    }

    /// Profiles lcms applies through lookup tables (here jpegli's XYB one), and
    /// anything not RGB, stay with lcms.
    @Test func lookupTableProfilesStayWithLcms() throws {
        let xyb = try Self.profile(of: "edge/icc-xyb-jpegli_sample-xyb.jpg")
        #expect(xyb.withUnsafeBytes { ShaperConversion(profile: $0) } == nil)
        let cmyk = try Self.profile(of: "edge/cmyk-swop-icc_Channel_digital_image_CMYK_color.jpg")
        #expect(cmyk.withUnsafeBytes { ShaperConversion(profile: $0) } == nil)
        let grey = try Self.profile(of: "edge/grey-jpeg-gamma22-icc_concert.jpg")
        #expect(grey.withUnsafeBytes { ShaperConversion(profile: $0) } == nil)
        // A cut profile (its tag table points past the end) is no matrix/TRC profile either.
        let p3 = try Self.profile(of: "edge/icc-display-p3_p3.png")
        #expect(Array(p3.prefix(300)).withUnsafeBytes { ShaperConversion(profile: $0) } == nil)
    }

    /// The parametric curve of sRGB and Display P3 (ICC type 3) at known points.
    @Test func parametricCurve() {
        let curve = ICCProfile.ToneCurve.parametric(type: 3, [2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045])
        #expect(curve(0) == 0)
        #expect(abs(curve(0.04) - 0.04 / 12.92) < 1e-12)
        #expect(abs(curve(0.5) - 0.214041) < 1e-6)
        #expect(curve(1) == 1)
        #expect(ICCProfile.ToneCurve.gamma(2.2)(2) == 1, "clipped to 0…1")
        #expect(abs(ICCProfile.ToneCurve.table([0, 65535])(0.25) - 0.25) < 1e-12)
    }
}

extension ColourTests {
    /// A crafted profile whose colorants are absurd (a thousand times Display P3's)
    /// is no matrix/TRC profile for the tables: lcms (or libvips's fallback) converts.
    @Test func absurdColorantsStayWithLcms() throws {
        var p3 = try Self.profile(of: "edge/icc-display-p3_p3.png")
        #expect(p3.withUnsafeBytes { ShaperConversion(profile: $0) } != nil)
        // Each colorant tag's X (s15Fixed16 at offset 8 of its 'XYZ ' data) set to 30000.
        let count = Int(p3[128]) << 24 | Int(p3[129]) << 16 | Int(p3[130]) << 8 | Int(p3[131])
        for i in 0..<count {
            let entry = 132 + i * 12
            let signature = String(decoding: p3[entry..<entry + 4], as: UTF8.self)
            guard ["rXYZ", "gXYZ", "bXYZ"].contains(signature) else { continue }
            let offset =
                Int(p3[entry + 4]) << 24 | Int(p3[entry + 5]) << 16 | Int(p3[entry + 6]) << 8 | Int(p3[entry + 7])
            p3.replaceSubrange((offset + 8)..<(offset + 12), with: [0x75, 0x30, 0, 0])
        }
        #expect(p3.withUnsafeBytes { ShaperConversion(profile: $0) } == nil)
        let source = try Self.everyColour(tagged: p3)
        let converted = try Decode(limits: PipelineSettings().limits).toSRGB(source, format: "test")
        #expect(converted.bands == 4 && converted.format == VIPS_FORMAT_UCHAR, "the image still converts")
    }
}

/// sRGB is decided by a profile's numbers, not its name.
@Suite("sRGB by the numbers")
struct SRGBByNumbersTests {
    static func isSRGB(_ profile: [UInt8]) -> Bool { profile.withUnsafeBytes { ICCProfile($0)?.isSRGB } ?? false }

    @Test("libvips's sRGB is sRGB; named sRGB with P3's primaries, or with a linear curve, is not")
    func numbersNotNames() throws {
        let srgb = try CraftedProfiles.srgb()
        #expect(Self.isSRGB(srgb))
        #expect(srgb.withUnsafeBytes { ICCProfile($0)?.description?.lowercased().contains("srgb") } == true)
        let p3Named = try CraftedProfiles.srgbNamedP3()
        #expect(!Self.isSRGB(p3Named), "other primaries, same name")
        #expect(p3Named.withUnsafeBytes { ShaperConversion(profile: $0) } != nil, "converted through the tables")
        #expect(!Self.isSRGB(try CraftedProfiles.linear(srgb)), "a linear curve, same name")
        // Within the stated tolerance: sRGB's red a rounding step off is still sRGB.
        let red = try #require(srgb.withUnsafeBytes { ICCProfile($0)?.colorant("rXYZ") })
        #expect(Self.isSRGB(try CraftedProfiles.setting("rXYZ", red.map { $0 + 0.0005 }, in: srgb)))
        #expect(!Self.isSRGB(try CraftedProfiles.setting("rXYZ", red.map { $0 + 0.01 }, in: srgb)))
    }

    @Test(
        "A photo tagged 'sRGB' with P3's primaries is converted (its colours change); one tagged with sRGB itself is not"
    )
    func taggedPhotos() throws {
        let srgb = try CraftedProfiles.srgb()
        let p3Named = try CraftedProfiles.srgbNamedP3()
        // Saturated colours: every 8-bit RGB colour, 4096 × 4096.
        let plain = try ColourTests.everyColour(tagged: srgb)
        let decode = Decode(limits: PipelineSettings().limits)
        let same = try ColourTests.bytes(try decode.toSRGB(plain, format: "test"))
        let source = try ColourTests.bytes(plain)
        #expect(
            same.count == source.count && ColourTests.differences(same, source).count == 0,
            "tagged sRGB: the pixels pass as they are")
        let p3 = try ColourTests.bytes(try decode.toSRGB(try ColourTests.everyColour(tagged: p3Named), format: "test"))
        let moved = ColourTests.differences(p3, source).count
        #expect(moved > source.count / 4, "named sRGB, P3's primaries: converted (\(moved) samples moved)")
    }
}

/// Colour truth on the libvips route: a float image read through its profile once.
@Suite("Float images with a profile")
struct FloatProfileTests {
    /// libvips's own reading of `path`'s floats as linear sRGB (scRGB), as 8-bit sRGB PNG bytes.
    static func scRGBReading(_ path: String) throws -> Data {
        var image: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_load(path, 1, 1, 0, 0, &image) == 0)
        defer { CVipsShim_unref(image) }
        var srgb: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_colourspace_srgb(image, &srgb) == 0)
        defer { CVipsShim_unref(srgb) }
        var cast: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_cast_uchar(srgb, &cast, 0) == 0)
        defer { CVipsShim_unref(cast) }
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        try #require(CVipsShim_pngsave_buffer(cast, &buffer, &length, 1) == 0)
        defer { g_free(buffer) }
        return Data(bytes: try #require(buffer), count: length)
    }

    @Test(
        "A float TIFF with a linear (gamma 1.0) ICC profile: store and thumbnail as the linear values read once, not washed out by the sRGB curve twice"
    )
    func linearProfile() throws {
        // The fixture's profile is linear with sRGB's primaries and white: read
        // through it, the floats are exactly what libvips reads scRGB as.
        let path = TestPaths.fixture("edge/float-linear-icc_nikon.tif")
        let png = try Self.scRGBReading(path)
        let reference = try DecodedTestImage.load(png: png)
        let made = try PlanePathTests.store(path, planes: false)
        let store = try PlanePathTests.decoded(made.bytes)
        try #require(store.pixels.count == reference.pixels.count)
        // As good as the store of that reading itself (the same PNG as a source);
        // before, 14 dB below it (the sRGB curve applied again through the profile).
        let referencePath = TestPaths.temporaryFolder("float-profile") + "/reference.png"
        try png.write(to: URL(fileURLWithPath: referencePath))
        let fromReference = try PlanePathTests.store(referencePath, planes: false)
        let best = psnr(try PlanePathTests.decoded(fromReference.bytes).pixels, reference.pixels)
        let value = psnr(store.pixels, reference.pixels)
        #expect(value >= best - 0.5, "\(value) dB, the reference's own store \(best) dB")
        // The thumbnail as that reading's own.
        let theirs = try DecodedTestImage.load(png: try #require(fromReference.thumbnail))
        let ours = try DecodedTestImage.load(png: try #require(made.thumbnail))
        #expect(psnr(ours.pixels, theirs.pixels) >= 35, "\(psnr(ours.pixels, theirs.pixels)) dB")
    }
}
