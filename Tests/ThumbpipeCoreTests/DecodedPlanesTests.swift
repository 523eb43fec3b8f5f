import CJpegPlanes
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// `CJpegPlanes_encode_ycc` on decoded 4:2:0 planes (a HEIC's), at the sizes whose
/// edges a band loop can get wrong: planes in JPEG's own YCbCr are encoded as they
/// are, in place or from a copy, the same bytes either way and as close as the
/// route through RGB.
@Suite("Decoded planes to a store: as decoded, edges and odd sides", .vipsStarted)
struct DecodedPlanesTests {
    /// Planes of `width × height` with 16-byte strides: a gradient with some texture.
    static func planes(_ width: Int, _ height: Int) -> (bytes: [UInt8], ys: Int, cs: Int, ch: Int) {
        let ys = (width + 15) / 16 * 16, cw = (width + 1) / 2, cs = (cw + 15) / 16 * 16, ch = (height + 1) / 2
        var bytes = [UInt8](repeating: 0, count: ys * height + 2 * cs * ch)
        for y in 0..<height {
            for x in 0..<width { bytes[y * ys + x] = UInt8((x * 7 + y * 3 + (x * y) % 23) % 220 + 16) }
        }
        for y in 0..<ch {
            for x in 0..<cw {
                bytes[ys * height + y * cs + x] = UInt8(96 + (x * 5 + y) % 64)
                bytes[ys * height + cs * ch + y * cs + x] = UInt8(160 - (x + y * 3) % 64)
            }
        }
        return (bytes, ys, cs, ch)
    }

    /// The store encoded from `bytes` (kr 0.299 and kb 0.114 unless said), and whether it went as decoded.
    static func encode(
        _ bytes: inout [UInt8], width: Int, height: Int, ys: Int, cs: Int, ch: Int, writable: Bool, kr: Double = 0.299
    ) throws -> (jpeg: Data, asDecoded: Bool) {
        var job = CJpegPlanesJob(
            width: Int32(width), height: Int32(height), orientation: 1, quality: 90, optimize_coding: 0, tap: nil,
            shaper: nil, blocks: 0, tap_means: 0, hold_turned: 1)
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = try bytes.withUnsafeMutableBufferPointer { buffer in
            let base = try #require(buffer.baseAddress)
            var ycc = CJpegPlanesYcc(
                y: base, cb: base + ys * height, cr: base + ys * height + cs * ch, y_stride: ys, c_stride: cs, kr: kr,
                kb: 0.114, full_range: 1, writable: writable ? 1 : 0)
            return CJpegPlanes_encode_ycc(&ycc, &job, &result, &error, error.count)
        }
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        #expect(
            status == 0, "\(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        let jpeg = try #require(result.jpeg)
        return (Data(bytes: jpeg, count: Int(result.size)), result.jfif != 0)
    }

    @Test(
        "As decoded: in place and from a copy the same bytes, the visible samples untouched, as close as through RGB",
        arguments: [(1, 1), (2, 2), (3, 5), (17, 15), (16, 16), (33, 18), (64, 48), (129, 47)]
    )
    func asDecoded(size: (Int, Int)) throws {
        let (width, height) = size
        let original = Self.planes(width, height)
        var inPlace = original.bytes, copied = original.bytes, throughRGB = original.bytes
        let a = try Self.encode(
            &inPlace, width: width, height: height, ys: original.ys, cs: original.cs, ch: original.ch, writable: true)
        let b = try Self.encode(
            &copied, width: width, height: height, ys: original.ys, cs: original.cs, ch: original.ch, writable: false)
        // Not JPEG's matrix by a millionth: the route through RGB.
        let c = try Self.encode(
            &throughRGB, width: width, height: height, ys: original.ys, cs: original.cs, ch: original.ch,
            writable: true, kr: 0.299001)
        #expect(a.asDecoded && b.asDecoded && !c.asDecoded)
        #expect(a.jpeg == b.jpeg, "in place and copied differ at \(width)×\(height)")
        #expect(copied == original.bytes, "a copy leaves the planes as they were")
        for y in 0..<height {
            let row = y * original.ys
            #expect(inPlace[row..<(row + width)] == original.bytes[row..<(row + width)], "row \(y) changed")
        }
        let (da, dc) = (try PlanePathTests.decoded(a.jpeg), try PlanePathTests.decoded(c.jpeg))
        #expect(da.width == width && da.height == height)
        let close = psnr(da.pixels.map(Double.init), dc.pixels.map(Double.init))
        #expect(close >= 36, "as decoded against through RGB: \(close) dB at \(width)×\(height)")
    }
}
