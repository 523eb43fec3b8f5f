import Foundation

/// The parent's structural check of a store file a worker made: a baseline JPEG
/// (SOF0, 8-bit, 1 or 3 components) of exactly the expected size, every marker
/// segment well formed and of a kind thumbpipe's encoders write, one or more
/// scans, and nothing after the end-of-image marker. Metadata segments (EXIF
/// beyond the orientation, XMP, ICC, IPTC, comments) only when the store keeps
/// metadata. It does not decode: it checks what a viewer would trip over or
/// what could smuggle bytes, not the pixels.
enum StoreCheck {
    /// Nil when `bytes` pass, else what is wrong, in a few words.
    static func problem(_ bytes: UnsafeRawBufferPointer, width: Int, height: Int, metadata: Bool) -> String? {
        let count = bytes.count
        guard count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return "is not a JPEG (no SOI marker)" }
        var at = 2
        var frame = false
        var scans = 0
        while at < count {
            guard bytes[at] == 0xFF else { return "has bytes outside a segment at offset \(at)" }
            // Fill bytes (0xFF) may stand before a marker.
            var next = at + 1
            while next < count && bytes[next] == 0xFF { next += 1 }
            guard next < count else { return "ends inside a marker" }
            let marker = bytes[next]
            at = next + 1
            if marker == 0xD9 {
                guard frame, scans > 0 else { return "ends before its image" }
                return at == count ? nil : "has \(count - at) bytes after its end"
            }
            guard at + 2 <= count else { return "ends inside a segment" }
            let length = Int(bytes[at]) << 8 | Int(bytes[at + 1])
            guard length >= 2, at + length <= count else { return "has a segment longer than the file" }
            if marker == 0xDA {
                guard frame else { return "has a scan before its frame" }
                scans += 1
                at = endOfScan(bytes, from: at + length)
                if at + 1 >= count { return "has no end-of-image marker (it ends inside a scan)" }
                continue
            }
            let body = UnsafeRawBufferPointer(rebasing: bytes[(at + 2)..<(at + length)])
            if let problem = segmentProblem(
                marker, body, width: width, height: height, metadata: metadata, frame: &frame)
            {
                return problem
            }
            at += length
        }
        return "has no end-of-image marker"
    }

    /// What is wrong with one marker segment that is not a scan (nil when nothing);
    /// a frame marks `frame`.
    private static func segmentProblem(
        _ marker: UInt8, _ body: UnsafeRawBufferPointer, width: Int, height: Int, metadata: Bool, frame: inout Bool
    ) -> String? {
        switch marker {
        case 0xC0:
            guard !frame else { return "has two frames" }
            guard body.count >= 6, body[0] == 8 else { return "is not an 8-bit baseline frame" }
            let h = Int(body[1]) << 8 | Int(body[2])
            let w = Int(body[3]) << 8 | Int(body[4])
            let components = Int(body[5])
            guard components == 1 || components == 3, body.count == 6 + 3 * components else {
                return "has a frame of \(components) components"
            }
            guard w == width, h == height else { return "is \(w)×\(h), not \(width)×\(height)" }
            frame = true
        case 0xC1...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
            return "is not baseline (SOF\(marker - 0xC0))"
        case 0xC4, 0xDB, 0xDD, 0xE0:
            break  // Huffman tables, quantisation tables, restart interval, JFIF
        case 0xE1:
            // EXIF (the orientation tag, and everything when metadata is kept) or XMP.
            let exif = body.starts(with: Array("Exif\0\0".utf8))
            guard exif || (metadata && body.starts(with: Array("http://ns.adobe.com/xap/1.0/\0".utf8))) else {
                return "has an APP1 segment that is neither EXIF nor XMP"
            }
        case 0xE2, 0xED, 0xFE:
            // ICC profile, IPTC, comment: only where the store keeps metadata.
            guard metadata else {
                return String(format: "has a segment thumbpipe does not write (marker 0x%02X)", marker)
            }
        default:
            return String(format: "has a segment thumbpipe does not write (marker 0x%02X)", marker)
        }
        return nil
    }

    /// Where a scan's entropy-coded data that starts at `start` ends: at the next
    /// marker that is not a restart or a stuffed byte (`bytes.count - 1` when none).
    private static func endOfScan(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        let count = bytes.count
        guard let base = bytes.baseAddress else { return count - 1 }
        var at = start
        while at + 1 < count {
            // memchr finds each 0xFF: a byte at a time, this loop was 0.7–1 % of a run's CPU under perf.
            guard let found = memchr(base + at, 0xFF, count - 1 - at) else { return count - 1 }
            at = base.distance(to: UnsafeRawPointer(found))
            let next = bytes[at + 1]
            if next == 0x00 || (0xD0...0xD7).contains(next) {
                at += 2
            } else if next == 0xFF {
                at += 1
            } else {
                return at
            }
        }
        return at
    }
}
