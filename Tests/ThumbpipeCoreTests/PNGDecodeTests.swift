import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The command line's own PNG reader (`contact-sheet`) gives the pixels libvips
/// gives, on every PNG fixture it reads, and refuses the rest by name.
@Suite("PNG reader: libvips's pixels without a C image decoder", .vipsStarted)
struct PNGDecodeTests {
    /// libvips's decode of `path` as 8-bit RGBA (a 16-bit sample by its high byte).
    static func reference(_ path: String) throws -> [UInt8] {
        let image = try DecodedTestImage.load(path)
        var rgba: [UInt8] = []
        rgba.reserveCapacity(image.width * image.height * 4)
        for pixel in 0..<image.width * image.height {
            let p = Array(image.pixels[pixel * image.bands..<(pixel + 1) * image.bands])
            switch image.bands {
            case 1: rgba += [p[0], p[0], p[0], 255]
            case 2: rgba += [p[0], p[0], p[0], p[1]]
            case 3: rgba += p + [255]
            default: rgba += p
            }
        }
        return rgba
    }

    static let refused: [String: String] = [
        "edge/jpeg-named-png_wrongextension.png": "not a PNG",
        "bad/png-bad-signature_xs1n0g01.png": "not a PNG",
        "bad/png-crlf-mangled_xcrn0g04.png": "not a PNG",
        "bad/truncated-png_truncated.png": "cut short",
        "bad/bomb-65536x65536_65536-uint32-limit.png": "65536×65536 pixels, past 4096 a side",
    ]

    @Test("Every PNG fixture: libvips's pixels exactly, or refused by name")
    func fixtures() throws {
        var read = 0
        for folder in ["photos", "edge", "bad"] {
            for relative in TestPaths.fixtureFiles(folder) where relative.hasSuffix(".png") {
                let path = TestPaths.fixture(relative)
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                if let reason = Self.refused[relative] {
                    #expect(throws: PNGDecode.Refused(reason), "\(relative)") { try PNGDecode.rgba(data) }
                    continue
                }
                let decoded = try PNGDecode.rgba(data)
                let expected = try Self.reference(path)
                #expect(decoded.pixels.count == expected.count, "\(relative)")
                let differing = zip(decoded.pixels, expected).filter { $0 != $1 }.count
                #expect(differing == 0, "\(relative): \(differing) samples differ")
                read += 1
            }
        }
        #expect(read >= 12, "fixtures read (the three interlaced ones among them): \(read)")
    }

    @Test("A thumbnail thumbpipe encodes reads back as the pixels it was made of")
    func roundTrip() throws {
        var pixels = [UInt8](repeating: 0, count: 80 * 80 * 4)
        for i in pixels.indices { pixels[i] = UInt8(truncatingIfNeeded: (i * 37) ^ (i >> 5)) }
        let buffer = RGBABuffer(width: 80, height: 80, pixels: pixels)
        #expect(try PNGDecode.rgba(try PNGEncode().apply(buffer)) == buffer)
        #expect(try PNGDecode.rgba(try PNGEncode(compression: 0).apply(buffer)) == buffer)
    }

    /// Pixels that exercise the "up" filter's wrap-around (every sample value,
    /// rows differing both ways), alpha included.
    static func pattern(width: Int, height: Int) -> RGBABuffer {
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for i in pixels.indices { pixels[i] = UInt8(truncatingIfNeeded: (i * 37) ^ (i >> 5) ^ (i / (width * 4)) * 91) }
        return RGBABuffer(width: width, height: height, pixels: pixels)
    }

    @Test(
        "thumbpipe's PNGs read back as their pixels in libvips too (an independent reader), at every size and level",
        arguments: [(1, 1), (80, 80), (3, 17), (257, 5)] as [(Int, Int)], [0, 1, 6, 9] as [Int32])
    func encodedReadsBackInLibvips(_ size: (Int, Int), _ compression: Int32) throws {
        let buffer = Self.pattern(width: size.0, height: size.1)
        let png = try PNGEncode(compression: compression).apply(buffer)
        let decoded = try DecodedTestImage.load(png: png)
        #expect(decoded.width == size.0 && decoded.height == size.1 && decoded.bands == 4)
        #expect(decoded.pixels == buffer.pixels, "\(size), level \(compression)")
        #expect(try PNGDecode.rgba(png) == buffer)
        // No metadata: the signature, IHDR, one IDAT and IEND, so the same pixels give the same bytes.
        var chunks: [String] = []
        var at = 8
        while at + 8 <= png.count {
            let length = png[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            chunks.append(String(decoding: png[at + 4..<at + 8], as: UTF8.self))
            at += 12 + length
        }
        #expect(chunks == ["IHDR", "IDAT", "IEND"] && at == png.count, "\(chunks)")
        #expect(try PNGEncode(compression: compression).apply(buffer) == png)
    }

    @Test("An image past the whole-buffer limit goes to libvips, and reads back the same")
    func largeImageStreams() throws {
        let side = 1025  // 1025 × 1025 > 1 M pixels
        #expect(side * side > PNGEncode.wholeBufferPixels)
        let buffer = Self.pattern(width: side, height: side)
        let png = try PNGEncode().apply(buffer)
        #expect(try DecodedTestImage.load(png: png).pixels == buffer.pixels)
        #expect(throws: ItemFailure.self) { try PNGEncode().apply(RGBABuffer(width: 0, height: 5, pixels: [])) }
    }
}
