import CZlib
import Foundation

/// Reads a PNG into 8-bit RGBA without a C image decoder: the chunks are walked
/// and checked here, the image data inflated by zlib (`uncompress`), the rows
/// unfiltered and expanded in Swift, whose every index is bounds-checked. It is
/// how the command line reads thumbnails out of an archive it did not write
/// (`contact-sheet`): no libpng or libspng runs on those bytes outside a worker.
///
/// It reads what PNG encoders write for thumbnails: every colour type at every
/// bit depth the format allows, palette and `tRNS` transparency, 16-bit samples
/// reduced to their high byte (as libvips's cast does), Adam7 interlacing;
/// nothing past `maxSide` pixels a side.
public enum PNGDecode {
    /// Why a PNG was not read.
    public struct Refused: Error, CustomStringConvertible, Equatable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The pixels of `data`, 8-bit RGBA.
    /// - Throws: ``Refused`` naming what it cannot read.
    public static func rgba(_ data: Data, maxSide: Int = 4096) throws(Refused) -> RGBABuffer {
        let bytes = [UInt8](data)
        let chunks: [PNGChunks.Chunk]
        switch bytes.withUnsafeBytes({ PNGChunks.read($0) }) {
        case .success(let walked): chunks = walked.chunks
        case .failure(.notPNG): throw Refused("not a PNG")
        case .failure(.badCRC): throw Refused("a chunk's CRC does not match")
        case .failure: throw Refused("cut short")
        }
        var header: Header?
        var palette: [UInt8] = []
        var transparency: [UInt8] = []
        var compressed: [UInt8] = []
        for chunk in chunks {
            let body = bytes[chunk.data]
            switch chunk.type {
            case PNGChunks.ihdr:
                guard header == nil, body.count == 13 else { throw Refused("IHDR out of place") }
                header = try Header(Array(body), maxSide: maxSide)
            case PNGChunks.plte:
                guard body.count % 3 == 0, body.count <= 768 else { throw Refused("a palette of \(body.count) bytes") }
                palette = Array(body)
            case PNGChunks.trns:
                transparency = Array(body)
            case PNGChunks.idat:
                guard header != nil else { throw Refused("image data before IHDR") }
                compressed += body
            case PNGChunks.iend:
                guard let header else { throw Refused("no IHDR") }
                return try header.pixels(inflating: compressed, palette: palette, transparency: transparency)
            default:
                guard header != nil, PNGChunks.isAncillary(chunk.type) else {
                    throw Refused("an unknown critical chunk")
                }
            }
        }
        // PNGChunks.read ends with IEND, so this is never reached.
        throw Refused("cut short")
    }

    /// What IHDR says, checked.
    struct Header {
        let width: Int
        let height: Int
        let depth: Int
        let colourType: Int
        let interlaced: Bool
        /// Samples a pixel: grey 1, RGB 3, palette 1, grey and alpha 2, RGBA 4.
        let channels: Int

        /// From IHDR's 13 bytes.
        init(_ chunk: [UInt8], maxSide: Int) throws(Refused) {
            let width = chunk[0..<4].reduce(0) { $0 << 8 | Int($1) }
            let height = chunk[4..<8].reduce(0) { $0 << 8 | Int($1) }
            guard (1...maxSide).contains(width), (1...maxSide).contains(height) else {
                throw Refused("\(width)×\(height) pixels, past \(maxSide) a side")
            }
            self.width = width
            self.height = height
            depth = Int(chunk[8])
            colourType = Int(chunk[9])
            let allowed: [Int: (channels: Int, depths: Set<Int>)] = [
                0: (1, [1, 2, 4, 8, 16]), 2: (3, [8, 16]), 3: (1, [1, 2, 4, 8]), 4: (2, [8, 16]), 6: (4, [8, 16]),
            ]
            guard let kind = allowed[colourType], kind.depths.contains(depth), chunk[10] == 0, chunk[11] == 0,
                chunk[12] <= 1
            else { throw Refused("colour type \(colourType) at \(depth) bits is not a PNG's") }
            interlaced = chunk[12] == 1
            channels = kind.channels
        }

        /// A pass of the image: where its pixels go (first column and row, steps) and its size.
        struct Pass {
            var x0: Int, y0: Int, dx: Int, dy: Int
            var width = 0, height = 0
        }

        /// The passes the image data holds, in order: the whole image, or Adam7's seven.
        var passes: [Pass] {
            let steps =
                interlaced
                ? [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
                : [(0, 0, 1, 1)]
            return steps.map { x0, y0, dx, dy in
                Pass(
                    x0: x0, y0: y0, dx: dx, dy: dy, width: width > x0 ? (width - x0 + dx - 1) / dx : 0,
                    height: height > y0 ? (height - y0 + dy - 1) / dy : 0)
            }.filter { $0.width > 0 && $0.height > 0 }
        }

        /// Bytes a row of `width` pixels holds, without its filter byte.
        func rowBytes(_ width: Int) -> Int { (width * channels * depth + 7) / 8 }

        /// Inflates, unfilters and expands the image data to RGBA.
        func pixels(inflating compressed: [UInt8], palette: [UInt8], transparency: [UInt8]) throws(Refused)
            -> RGBABuffer
        {
            let passes = passes
            let expected = passes.reduce(0) { $0 + (rowBytes($1.width) + 1) * $1.height }
            // One byte more than the image needs: a stream longer than the image fails, not truncates.
            var raw = [UInt8](repeating: 0, count: expected + 1)
            var produced = UInt(raw.count)
            let status = raw.withUnsafeMutableBufferPointer { out in
                compressed.withUnsafeBufferPointer { input in
                    uncompress(out.baseAddress, &produced, input.baseAddress, UInt(input.count))
                }
            }
            guard status == Z_OK, produced == UInt(expected) else {
                throw Refused("its image data does not inflate to \(width)×\(height) pixels")
            }
            if colourType == 3 && palette.isEmpty { throw Refused("a palette image without a palette") }
            var out = [UInt8](repeating: 255, count: width * height * 4)
            var offset = 0
            for pass in passes {
                let stride = rowBytes(pass.width) + 1
                try unfilter(&raw, at: offset, width: pass.width, height: pass.height)
                if !interlaced && depth == 8 && (colourType == 6 || (colourType == 2 && transparency.isEmpty)) {
                    copyRows(raw, &out)
                } else {
                    for y in 0..<pass.height {
                        let row = offset + y * stride + 1
                        for x in 0..<pass.width {
                            let o = ((pass.y0 + y * pass.dy) * width + pass.x0 + x * pass.dx) * 4
                            try expand(raw, row, x, into: &out, at: o, palette: palette, transparency: transparency)
                        }
                    }
                }
                offset += stride * pass.height
            }
            return RGBABuffer(width: width, height: height, pixels: out)
        }

        /// 8-bit RGBA (what thumbpipe and most encoders write) and RGB, row by row.
        func copyRows(_ raw: [UInt8], _ out: inout [UInt8]) {
            let stride = rowBytes(width) + 1
            out.withUnsafeMutableBufferPointer { target in
                raw.withUnsafeBufferPointer { source in
                    guard let from = source.baseAddress, let into = target.baseAddress else { return }
                    for y in 0..<height {
                        let row = from + y * stride + 1
                        let line = into + y * width * 4
                        if colourType == 6 {
                            line.update(from: row, count: width * 4)
                        } else {
                            for x in 0..<width {
                                line[4 * x] = row[3 * x]
                                line[4 * x + 1] = row[3 * x + 1]
                                line[4 * x + 2] = row[3 * x + 2]
                            }
                        }
                    }
                }
            }
        }

        /// Pixel `x` of the row at `row`, as RGBA at `o` of `out`.
        func expand(
            _ raw: [UInt8], _ row: Int, _ x: Int, into out: inout [UInt8], at o: Int, palette: [UInt8],
            transparency: [UInt8]
        ) throws(Refused) {
            func key(_ c: Int) -> Int { Int(transparency[2 * c]) << 8 | Int(transparency[2 * c + 1]) }
            switch colourType {
            case 0:
                let grey = sample(raw, row, x)
                let level = scaled(grey)
                (out[o], out[o + 1], out[o + 2]) = (level, level, level)
                if transparency.count >= 2, grey == key(0) { out[o + 3] = 0 }
            case 2:
                let (r, g, b) = (sample(raw, row, 3 * x), sample(raw, row, 3 * x + 1), sample(raw, row, 3 * x + 2))
                (out[o], out[o + 1], out[o + 2]) = (scaled(r), scaled(g), scaled(b))
                if transparency.count >= 6, r == key(0), g == key(1), b == key(2) { out[o + 3] = 0 }
            case 3:
                let index = sample(raw, row, x)
                guard index * 3 + 2 < palette.count else { throw Refused("a pixel past its palette") }
                (out[o], out[o + 1], out[o + 2]) = (palette[3 * index], palette[3 * index + 1], palette[3 * index + 2])
                if index < transparency.count { out[o + 3] = transparency[index] }
            case 4:
                let level = scaled(sample(raw, row, 2 * x))
                (out[o], out[o + 1], out[o + 2]) = (level, level, level)
                out[o + 3] = scaled(sample(raw, row, 2 * x + 1))
            default:
                for c in 0..<4 { out[o + c] = scaled(sample(raw, row, 4 * x + c)) }
            }
        }

        /// Sample `index` of the row starting at `row`, at the image's depth.
        func sample(_ raw: [UInt8], _ row: Int, _ index: Int) -> Int {
            switch depth {
            case 16: return Int(raw[row + 2 * index]) << 8 | Int(raw[row + 2 * index + 1])
            case 8: return Int(raw[row + index])
            default:
                let bit = index * depth
                let shift = 8 - depth - bit % 8
                return Int(raw[row + bit / 8] >> UInt8(shift)) & (1 << depth - 1)
            }
        }

        /// A sample as 8 bits: a 16-bit one by its high byte, a grey level of 1, 2 or 4 bits
        /// spread over 0…255 (a palette index is never scaled).
        func scaled(_ value: Int) -> UInt8 {
            switch depth {
            case 16: return UInt8(value >> 8)
            case 8: return UInt8(value)
            default: return UInt8(value * 255 / (1 << depth - 1))
            }
        }

        /// Undoes the filters of the `height` rows of `width` pixels at `offset` in
        /// place (PNG's five: none, sub, up, average, Paeth).
        func unfilter(_ raw: inout [UInt8], at offset: Int, width: Int, height: Int) throws(Refused) {
            let left = max(1, channels * depth / 8)
            let bytes = rowBytes(width)
            let stride = bytes + 1
            try raw.withUnsafeMutableBufferPointer { (all) throws(Refused) in
                for y in 0..<height {
                    let filter = all[offset + y * stride]
                    guard filter <= 4 else { throw Refused("row \(y) has filter \(filter)") }
                    guard let base = all.baseAddress else { throw Refused("no image data") }
                    let row = base + offset + y * stride + 1
                    // The row above (zeros above the first).
                    let above: UnsafeMutablePointer<UInt8>? = y > 0 ? row - stride : nil
                    switch filter {
                    case 1:
                        for i in left..<max(left, bytes) { row[i] = row[i] &+ row[i - left] }
                    case 2:
                        if let above { for i in 0..<bytes { row[i] = row[i] &+ above[i] } }
                    case 3:
                        for i in 0..<bytes {
                            let a = i >= left ? Int(row[i - left]) : 0
                            let b = above.map { Int($0[i]) } ?? 0
                            row[i] = row[i] &+ UInt8((a + b) / 2)
                        }
                    case 4:
                        for i in 0..<bytes {
                            let a = i >= left ? Int(row[i - left]) : 0
                            let b = above.map { Int($0[i]) } ?? 0
                            let c = i >= left ? above.map { Int($0[i - left]) } ?? 0 : 0
                            let p = a + b - c
                            let (pa, pb, pc) = (abs(p - a), abs(p - b), abs(p - c))
                            row[i] = row[i] &+ UInt8(pa <= pb && pa <= pc ? a : pb <= pc ? b : c)
                        }
                    default:
                        break
                    }
                }
            }
        }
    }
}
