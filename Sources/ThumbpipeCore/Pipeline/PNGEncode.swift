import CDeflate
import CVipsShim
import Foundation

/// The PNG encode stage: 8-bit RGBA PNG, no metadata, so the same pixels give the same bytes.
///
/// An image of up to ``wholeBufferPixels`` (every thumbnail) is written here,
/// not by libvips: a thumbnail is 80 × 80 pixels, and `vips_pngsave_buffer`
/// spent about 1 ms on each (a pipeline, libpng, zlib at level 6), all of it in
/// a run's parent, on the cores its workers use. This takes 0.16–0.18 ms
/// (libdeflate at the same level), and filtering every row but the first "up"
/// makes a photo's thumbnail about 13 % smaller than libvips's unfiltered rows.
/// libdeflate compresses whole buffers only, so a larger image (a contact
/// sheet, up to 64 Mpx) is left to libvips, which streams it.
public struct PNGEncode: Sendable {
    /// Deflate compression level, 0 (stored) to 9, as zlib's.
    public var compression: Int32

    /// Creates the stage at `compression` (6, zlib's and libvips's default).
    public init(compression: Int32 = 6) { self.compression = compression }

    /// The most pixels encoded in one buffer here (filtered rows and the
    /// compressed stream each about 4 bytes a pixel): 1 M, a 1024 × 1024 image.
    public static let wholeBufferPixels = 1 << 20

    /// Encodes `buffer` as PNG. Up to ``wholeBufferPixels``: IHDR (8-bit RGBA,
    /// not interlaced), one IDAT, IEND; larger, by `vips_pngsave_buffer`.
    /// - Throws: ``ItemFailure`` at `.encode` for an empty image, or when libvips fails.
    public func apply(_ buffer: RGBABuffer) throws(ItemFailure) -> Data {
        let (width, height) = (buffer.width, buffer.height)
        guard width > 0, height > 0 else {
            throw ItemFailure(.encode, "PNG encode failed: a \(width)×\(height) image cannot be a PNG")
        }
        guard width * height <= Self.wholeBufferPixels else { return try streamed(buffer) }
        let filtered = Self.filteredRows(buffer)
        let level = min(max(compression, 0), 9)
        let compressed = try Self.compress(filtered, level: level)
        var png = Data(capacity: compressed.count + 57)
        png.append(contentsOf: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var header = [UInt8]()
        Self.append(UInt32(width), to: &header)
        Self.append(UInt32(height), to: &header)
        header += [8, 6, 0, 0, 0]  // 8 bits a sample, RGBA, deflate, adaptive filters, not interlaced
        Self.chunk("IHDR", header, to: &png)
        Self.chunk("IDAT", compressed, to: &png)
        Self.chunk("IEND", [], to: &png)
        return png
    }

    /// A large image through libvips (vips_pngsave_buffer, no metadata), row by row.
    private func streamed(_ buffer: RGBABuffer) throws(ItemFailure) -> Data {
        do {
            try Vips.start()
            let image = try VImage.fromPixels(buffer)
            var memory: UnsafeMutableRawPointer? = nil
            var length = 0
            try Vips.check(CVipsShim_pngsave_buffer(image.pointer, &memory, &length, compression), "pngsave")
            guard let memory else { throw VipsError(operation: "pngsave", message: "no buffer") }
            defer { CVipsShim_free(memory) }
            return Data(bytes: memory, count: length)
        } catch {
            throw ItemFailure(.encode, "PNG encode failed: \(error)")
        }
    }

    /// The image data before deflate: each row its filter byte and its bytes,
    /// the first unfiltered (0), every other "up" (2: less the row above, mod 256).
    static func filteredRows(_ buffer: RGBABuffer) -> [UInt8] {
        let stride = buffer.width * 4
        return [UInt8](unsafeUninitializedCapacity: buffer.height * (stride + 1)) { out, count in
            buffer.pixels.withUnsafeBufferPointer { pixels in
                // An image without pixels (a side of 0) has no rows to filter.
                guard let p = pixels.baseAddress, let q = out.baseAddress else { return }
                for y in 0..<buffer.height {
                    let row = q + y * (stride + 1), from = p + y * stride
                    row[0] = y == 0 ? 0 : 2
                    if y == 0 {
                        (row + 1).update(from: from, count: stride)
                    } else {
                        let above = from - stride
                        for x in 0..<stride { row[1 + x] = from[x] &- above[x] }
                    }
                }
            }
            count = buffer.pixels.isEmpty ? 0 : buffer.height * (stride + 1)
        }
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// Appends a chunk: its length, type, data and the CRC-32 of type and data
    /// (the data written once, straight into `png`, its CRC run on from the type's).
    private static func chunk(_ type: String, _ data: [UInt8], to png: inout Data) {
        var head = [UInt8]()
        append(UInt32(data.count), to: &head)
        let name = Array(type.utf8)
        head += name
        // libdeflate_crc32 answers 0 for a NULL buffer, which an empty array may give: IEND's data is skipped.
        var crc = name.withUnsafeBytes { libdeflate_crc32(0, $0.baseAddress, $0.count) }
        if !data.isEmpty { crc = data.withUnsafeBytes { libdeflate_crc32(crc, $0.baseAddress, $0.count) } }
        var tail = [UInt8]()
        append(UInt32(crc), to: &tail)
        png.append(contentsOf: head)
        png.append(contentsOf: data)
        png.append(contentsOf: tail)
    }

    /// `input` as a zlib stream, by libdeflate at `level`. A compressor is made
    /// for each call: its tables take 656 KB at level 6, yet making one each time
    /// measured no slower than keeping one (0.148–0.158 ms a thumbnail either way,
    /// 1,000 calls, three rounds), as malloc keeps the memory once freed.
    private static func compress(_ input: [UInt8], level: Int32) throws(ItemFailure) -> [UInt8] {
        guard let compressor = libdeflate_alloc_compressor(level) else {
            throw ItemFailure(.encode, "PNG encode failed: out of memory for the compressor")
        }
        defer { libdeflate_free_compressor(compressor) }
        let bound = libdeflate_zlib_compress_bound(compressor, input.count)
        var output = [UInt8](repeating: 0, count: bound)
        let written = input.withUnsafeBytes { from in
            output.withUnsafeMutableBytes { to in
                libdeflate_zlib_compress(compressor, from.baseAddress, from.count, to.baseAddress, to.count)
            }
        }
        // The bound is libdeflate's own worst case: 0 (no room) cannot happen, but is refused, not written.
        guard written > 0 else { throw ItemFailure(.encode, "PNG encode failed: the image data did not fit") }
        output.removeSubrange(written...)
        return output
    }
}
