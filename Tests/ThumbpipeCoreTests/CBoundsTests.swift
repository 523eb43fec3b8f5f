import CJpegPlanes
import CThumbKernels
import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// Bounds the C enforces itself, not only its Swift callers: each refuses or
/// clamps what it was not written for (found or feared by fuzzing, issue 38).
@Suite("C bounds: the kernels and the plane path check their own inputs", .vipsStarted)
struct CBoundsTests {
    @Test("The shaper clamps linear light outside 0…1 (a crafted curve: 20, -5, NaN) instead of overflowing")
    func shaperClamps() throws {
        var pixels = [UInt8](repeating: 255, count: 16 * 16 * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) { pixels[i] = UInt8(i / 4 % 256) }
        let image = try VImage.fromPixels(RGBABuffer(width: 16, height: 16, pixels: pixels))
        let rgb = try image.derive("extract_band") { CVipsShim_extract_bands($0, $1, 0, 3) }
        var linear = [Float](repeating: 20, count: 3 * 256)
        for v in 0..<256 where v % 3 == 1 { linear[v] = -5 }
        for v in 0..<256 where v % 3 == 2 { linear[256 + v] = .nan }
        let matrix: [Float] = [10, 10, 10, 10, 10, 10, 10, 10, 10]
        let encode = (0..<Int(CTHUMBKERNELS_SHAPER_STEPS)).map {
            UInt8($0 * 255 / (Int(CTHUMBKERNELS_SHAPER_STEPS) - 1))
        }
        let out = try rgb.derive("shaper") { CThumbKernels_shaper_to_srgb($0, $1, linear, matrix, encode) }
        let memory = try out.inMemory()
        let first = try memory.withSamples { Array($0.prefix(3)) }
        #expect(first.allSatisfy { $0 == 255 }, "clamped to 1, then clipped to white: \(first)")
    }

    @Test("The tap refuses plane rows narrower than its columns, never reading past them")
    func tapChecksWidths() throws {
        let tap = try AspectFillScale(width: 8, height: 8).tap(
            width: 64, height: 64, bands: 3, factor: 4, orientation: 1)
        var row = [UInt8](repeating: 128, count: 64)
        var half = [UInt8](repeating: 128, count: 32)
        let ok = row.withUnsafeMutableBufferPointer { y in
            half.withUnsafeMutableBufferPointer { c in
                var ys: [UnsafeMutablePointer<UInt8>?] = [y.baseAddress, y.baseAddress]
                var cs: [UnsafeMutablePointer<UInt8>?] = [c.baseAddress]
                let good = CThumbKernels_tap_add_ycbcr_rows(tap.pointer, 0, 2, &ys, &cs, &cs, 1, 1, 64, 32)
                let narrow = CThumbKernels_tap_add_ycbcr_rows(tap.pointer, 2, 2, &ys, &cs, &cs, 1, 1, 16, 8)
                return (good, narrow)
            }
        }
        #expect(ok.0 == 0, "rows as wide as the tap are taken")
        #expect(ok.1 == -1, "rows narrower than the tap's columns are refused")
        _ = Vips.takeError(operation: "tap")
    }

    @Test("CJpegPlanes refuses a size other than the job's, and a sampling it was not written for (4:1:1)")
    func planesRefuse() throws {
        let folder = TestPaths.temporaryFolder("c-bounds")
        let small = folder + "/small.png"
        try makeTestImage(from: TestPaths.fixture("photos/Nikon-D3100.jpg"), to: small, width: 48, height: 32)
        let ppm = folder + "/small.ppm"
        try makeTestImage(from: small, to: ppm, width: 48, height: 32)
        func transcode(_ bytes: Data, width: Int32, height: Int32) -> (Int32, String) {
            var job = CJpegPlanesJob(
                width: width, height: height, orientation: 1, quality: 50, optimize_coding: 0, tap: nil, shaper: nil,
                blocks: 1, tap_means: 0, hold_turned: 0)
            var result = CJpegPlanesResult()
            var error = [CChar](repeating: 0, count: 256)
            let status = bytes.withUnsafeBytes {
                CJpegPlanes_transcode(
                    $0.bindMemory(to: UInt8.self).baseAddress, $0.count, &job, &result, &error, error.count)
            }
            CJpegPlanes_free_buffer(result.jpeg)
            return (status, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        for (sample, takes) in [("2x2,1x1,1x1", true), ("1x1,1x1,1x1", true), ("4x1,1x1,1x1", false)] {
            let jpeg = folder + "/s-\(sample).jpg"
            let made = try runProcess("/usr/bin/cjpeg", ["-sample", sample, "-outfile", jpeg, ppm])
            try #require(made.status == 0, "cjpeg: \(made.stderr)")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: jpeg))
            let (status, message) = transcode(bytes, width: 48, height: 32)
            #expect((status == 0) == takes, "\(sample): \(message)")
            if takes {
                let (wrong, why) = transcode(bytes, width: 47, height: 32)
                #expect(wrong == -1 && !why.isEmpty, "a size other than the job's is refused: \(why)")
            }
        }
    }
}
