/// A hash of what in a photo file makes its pixels, without what only describes
/// them: an edit that writes a title, a caption or a date into the file
/// (Lightroom's "save metadata to file", digiKam, exiftool) leaves it as it was,
/// so the item's thumbnail and store file stay good and only its metadata is read
/// again; any change to the image data, its tables, colour profile or orientation
/// moves it.
///
/// For a JPEG: every segment up to the first scan but APP1 (EXIF, XMP), APP13
/// (Photoshop's IPTC) and comments, then everything from the first scan to the
/// end of the file (entropy-coded data, later tables, any trailer), with the
/// EXIF orientation folded in. Other formats have none (an edit of one redoes
/// its item). Computed in the worker, over bytes it already holds.
enum ImageDataHash {
    /// The hash of a JPEG's image data, or nil when `bytes` is not a JPEG whose
    /// segments before its first scan can be walked to the end.
    static func jpeg(_ bytes: UnsafeRawBufferPointer, orientation: Int) -> String? {
        guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var hash = ContentHash.xxh64(UnsafeRawBufferPointer(rebasing: bytes[0..<2]), seed: UInt64(orientation))
        var position = 2
        while position + 1 < bytes.count {
            guard bytes[position] == 0xFF else { return nil }
            let marker = bytes[position + 1]
            // Fill bytes before a marker.
            if marker == 0xFF {
                position += 1
                continue
            }
            // Standalone markers (TEM, RSTn) carry no length.
            if marker == 0x01 || (0xD0...0xD7).contains(marker) {
                position += 2
                continue
            }
            if marker == 0xDA || marker == 0xD9 {
                return hex(ContentHash.xxh64(UnsafeRawBufferPointer(rebasing: bytes[position...]), seed: hash))
            }
            guard position + 3 < bytes.count else { return nil }
            let length = Int(bytes[position + 2]) << 8 | Int(bytes[position + 3])
            let end = position + 2 + length
            guard length >= 2, end <= bytes.count else { return nil }
            if !describesOnly(marker) {
                hash = ContentHash.xxh64(UnsafeRawBufferPointer(rebasing: bytes[position..<end]), seed: hash)
            }
            position = end
        }
        return nil
    }

    /// Segments that only describe the image: EXIF and XMP (APP1), IPTC (APP13), comments.
    private static func describesOnly(_ marker: UInt8) -> Bool { marker == 0xE1 || marker == 0xED || marker == 0xFE }

    private static func hex(_ value: UInt64) -> String { "jpeg:" + String(value, radix: 16).leftPadded(to: 16) }
}
