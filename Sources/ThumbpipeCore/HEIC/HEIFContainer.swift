/// A HEIC's primary image as the HEIC route decodes it, read from the HEIF
/// container (ISO/IEC 23008-12) by thumbpipe itself: which coded pictures make
/// it (a grid's tiles, or one image), where their bytes are, how to decode them
/// (`hvcC`), how large it is (`ispe`, the grid's output size), how it is turned
/// (`irot`, `imir`) and what its colour is (`colr`: an ICC profile, `nclx`).
/// Whatever the route does not handle is refused with a reason (then libvips
/// decodes the file): another codec or layout, more than 8 bits (`pixi`), alpha,
/// a crop (`clap`), an essential property it does not know. The HDR gain map
/// Apple stores as an auxiliary image is not part of the primary image and is
/// left alone, as libvips leaves it.
struct HEIFImage: Equatable {
    /// The image's size as stored (the grid's output size), before its turn.
    var width: Int
    var height: Int
    /// The grid: columns × rows of tiles of `tileWidth × tileHeight` (1 × 1 for a lone image).
    var columns = 1
    var rows = 1
    var tileWidth: Int
    var tileHeight: Int
    /// Each tile's coded bytes, row by row: its extents in the file.
    var tiles: [[Range<Int>]]
    /// The tiles' parameter sets (VPS, SPS, PPS, SEI) in Annex B form, and the
    /// size of the length before each NAL unit in their bytes.
    var parameterSets: [UInt8]
    var lengthSize: Int
    /// The turn `irot` and `imir` make, as the EXIF orientation (1–8) that makes it.
    var orientation = 1
    /// The ICC profile of its `colr` box, when it has one.
    var icc: [UInt8]?
    /// Its `nclx` (the primary's, else its tiles'): matrix and range; nil when none says.
    var matrix: Int?
    var fullRange: Bool?
    /// Its colour primaries and transfer by `nclx` (H.273), when said.
    var primaries: Int?
    var transfer: Int?
    /// The items that describe it (EXIF, XMP), as ``HEIFContainer/described(_:maxPixels:)`` reads them.
    var metadata: [Metadata] = []

    /// A metadata item: its type (`Exif`, `mime`) and its bytes.
    struct Metadata: Equatable {
        var type: String
        var bytes: [UInt8]
    }
}

enum HEIFContainer {
    /// The most tiles a grid may have (a 12 Mpx iPhone photo has 48; a 256 × 256 grid is the format's limit).
    static let maxTiles = 1024

    /// The primary image of the HEIF file `bytes`, checked against `maxPixels`
    /// (``PipelineSettings/Limits/maxPixels``, 0 for none) before anything is allocated.
    static func primary(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(HEIFRefusal) -> HEIFImage {
        try meta(bytes).primaryImage(maxPixels: maxPixels)
    }

    /// The primary image, as ``primary(_:maxPixels:)``, with its metadata items.
    static func described(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(HEIFRefusal) -> HEIFImage {
        let parts = try meta(bytes)
        var image = try parts.primaryImage(maxPixels: maxPixels)
        if let id = parts.primaryID { image.metadata = try parts.metadata(of: id) }
        return image
    }

    /// The file's `meta` box, read, after its brand is checked.
    private static func meta(_ bytes: UnsafeRawBufferPointer) throws(HEIFRefusal) -> HEIFMeta {
        let top = try HEIFReader(bytes).boxes()
        guard let ftyp = top.first, ftyp.type == "ftyp" else { throw HEIFRefusal("no 'ftyp' box first") }
        var brands = HEIFReader(bytes, from: ftyp.start, to: ftyp.end)
        let major = try brands.fourCC()
        guard ["heic", "heix", "mif1", "msf1", "heim", "heis"].contains(major) || brandsList(&brands).contains("heic")
        else { throw HEIFRefusal("brand '\(major)' is not HEIC") }
        guard let meta = top.first(where: { $0.type == "meta" }) else { throw HEIFRefusal("no 'meta' box") }
        return try HEIFMeta(bytes, start: meta.start, end: meta.end)
    }

    private static func brandsList(_ reader: inout HEIFReader) -> [String] {
        guard (try? reader.skip(4)) != nil else { return [] }
        var found: [String] = []
        while reader.remaining >= 4, let brand = try? reader.fourCC() { found.append(brand) }
        return found
    }
}
