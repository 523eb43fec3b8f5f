extension HEIFMeta {
    /// What an item's properties say, as far as the route reads them.
    struct Described {
        var size: (width: Int, height: Int)?
        /// `irot` and `imir` composed in their order, as a 2 × 2 matrix on (x, y) (y down).
        var turn = [1, 0, 0, 1]
        var icc: [UInt8]?
        var nclx: (primaries: Int, transfer: Int, matrix: Int, fullRange: Bool)?
        var decoderConfiguration: Range<Int>?
    }

    /// Reads item `id`'s properties; refuses what the route cannot do as they say.
    func described(_ id: Int) throws(HEIFRefusal) -> Described {
        var described = Described()
        for property in try properties(of: id) {
            var reader = HEIFReader(bytes, from: property.range.lowerBound, to: property.range.upperBound)
            switch property.type {
            case "ispe":
                try reader.skip(4)
                described.size = (try reader.u32(), try reader.u32())
            case "irot":
                let quarterTurns = try reader.u8() & 3
                // Anticlockwise quarter turns.
                for _ in 0..<quarterTurns { described.turn = Self.compose(described.turn, then: [0, 1, -1, 0]) }
            case "imir":
                let axis = try reader.u8() & 1
                // Axis 0 is vertical: left and right swap.
                described.turn = Self.compose(described.turn, then: axis == 0 ? [-1, 0, 0, 1] : [1, 0, 0, -1])
            case "colr": try readColour(&reader, into: &described)
            case "pixi":
                try reader.skip(4)
                let channels = try reader.u8()
                for _ in 0..<channels where try reader.u8() != 8 { throw HEIFRefusal("not 8 bits a sample ('pixi')") }
            case "hvcC": described.decoderConfiguration = property.range
            case "clap": throw HEIFRefusal("a crop ('clap')")
            case "auxC", "rloc", "lsel", "a1lx", "a1op", "udes":
                if property.essential { throw HEIFRefusal("an essential '\(property.type)' property") }
            default:
                if property.essential { throw HEIFRefusal("an essential '\(property.type)' property") }
            }
        }
        return described
    }

    private func readColour(_ reader: inout HEIFReader, into described: inout Described) throws(HEIFRefusal) {
        switch try reader.fourCC() {
        case "prof", "rICC":
            let payload = reader.at..<reader.end
            guard payload.count <= 4 << 20 else { throw HEIFRefusal("an ICC profile over 4 MB") }
            described.icc = [UInt8](bytes[payload])
        case "nclx":
            let primaries = try reader.u16(), transfer = try reader.u16(), matrix = try reader.u16()
            described.nclx = (primaries, transfer, matrix, try reader.u8() & 0x80 != 0)
        default: break
        }
    }

    /// `first` then `second`: the matrix product second × first (row-major 2 × 2).
    static func compose(_ first: [Int], then second: [Int]) -> [Int] {
        [
            second[0] * first[0] + second[1] * first[2], second[0] * first[1] + second[1] * first[3],
            second[2] * first[0] + second[3] * first[2], second[2] * first[1] + second[3] * first[3],
        ]
    }

    /// The EXIF orientation (1–8) whose turn is `matrix` (from stored to upright).
    static func orientation(of matrix: [Int]) -> Int {
        let byOrientation: [[Int]] = [
            [1, 0, 0, 1], [-1, 0, 0, 1], [-1, 0, 0, -1], [1, 0, 0, -1], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, -1, 0],
            [0, 1, -1, 0],
        ]
        return (byOrientation.firstIndex(of: matrix) ?? 0) + 1
    }

    /// The items that describe image `id` (a `cdsc` reference to it), by item ID,
    /// as libheif lists an image's metadata: their type (`Exif`, `mime`) and bytes.
    /// Refused when one is of another type, encoded, over 1 MB, or refers to more
    /// than one image, or there are more than 16 (what libvips's HEIF loader reads).
    func metadata(of id: Int) throws(HEIFRefusal) -> [HEIFImage.Metadata] {
        var found: [HEIFImage.Metadata] = []
        for (item, targets) in (references["cdsc"] ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard targets.count == 1 else { throw HEIFRefusal("metadata that describes \(targets.count) images") }
            guard targets[0] == id else { continue }
            guard let type = types[item], type == "Exif" || type == "mime", !encodedItems.contains(item) else {
                throw HEIFRefusal("metadata of type '\(types[item] ?? "none")'")
            }
            found.append(HEIFImage.Metadata(type: type, bytes: try itemBytes(item)))
        }
        guard found.count <= Self.maxMetadataItems else { throw HEIFRefusal("\(found.count) metadata items") }
        return found
    }

    /// The primary image, its tiles and its colour, refused where the route cannot follow.
    func primaryImage(maxPixels: Int) throws(HEIFRefusal) -> HEIFImage {
        guard let id = primaryID, let type = types[id] else { throw HEIFRefusal("no primary item") }
        try refuseAlpha(of: id)
        let own = try described(id)
        guard let size = own.size, size.width > 0, size.height > 0 else { throw HEIFRefusal("no size ('ispe')") }
        // Each side may be up to 2^32 - 1: their product is checked, not computed blindly.
        let (pixels, overflow) = size.width.multipliedReportingOverflow(by: size.height)
        guard !overflow, pixels <= (maxPixels > 0 ? maxPixels : DecodePlan.inMemoryLimit) else {
            throw HEIFRefusal(
                "\(size.width) × \(size.height) is over \(maxPixels > 0 ? "limits.maxPixels" : "the route's 30 Mpx")")
        }
        var tileIDs = [id]
        var grid = (columns: 1, rows: 1, width: size.width, height: size.height)
        switch type {
        case "hvc1": break
        case "grid":
            grid = try gridLayout(id)
            tileIDs = references["dimg"]?[id] ?? []
            guard tileIDs.count == grid.columns * grid.rows else {
                throw HEIFRefusal("a grid of \(grid.columns) × \(grid.rows) with \(tileIDs.count) tiles")
            }
            guard grid.width == size.width, grid.height == size.height else {
                throw HEIFRefusal("a grid whose size is not its 'ispe'")
            }
        default: throw HEIFRefusal("a primary image of type '\(type)'")
        }
        return try image(of: tileIDs, grid: grid, own: own)
    }

    private func image(of tileIDs: [Int], grid: (columns: Int, rows: Int, width: Int, height: Int), own: Described)
        throws(HEIFRefusal) -> HEIFImage
    {
        guard tileIDs.count <= HEIFContainer.maxTiles else { throw HEIFRefusal("over \(HEIFContainer.maxTiles) tiles") }
        var tileSize: (width: Int, height: Int)?
        var configuration: [UInt8]?
        var tileColour: Described?
        var tiles: [[Range<Int>]] = []
        for tile in tileIDs {
            guard types[tile] == "hvc1" else { throw HEIFRefusal("a tile of type '\(types[tile] ?? "none")'") }
            let described = tileIDs.count == 1 && tile == primaryID ? own : try self.described(tile)
            guard let size = described.size, let range = described.decoderConfiguration else {
                throw HEIFRefusal("a tile without its size or decoder configuration")
            }
            guard described.turn == [1, 0, 0, 1] || tile == primaryID else { throw HEIFRefusal("a turned tile") }
            let bytes = [UInt8](self.bytes[range])
            if let tileSize, tileSize != size { throw HEIFRefusal("tiles of different sizes") }
            if let configuration, configuration != bytes { throw HEIFRefusal("tiles with different configurations") }
            tileSize = size
            configuration = bytes
            tileColour = tileColour ?? described
            tiles.append(try itemExtents(tile))
        }
        guard let tileSize, let configuration else { throw HEIFRefusal("no tiles") }
        // Tiles whose extents overlap (each naming the whole file, say) would have the
        // decoder copy and chew the same bytes a thousand times: a real file's do not.
        let total = tiles.reduce(0) { sum, extents in sum + extents.reduce(0) { $0 + $1.count } }
        guard total <= bytes.count else { throw HEIFRefusal("tiles whose bytes add up to more than the file") }
        try checkCoverage(grid: grid, tile: tileSize)
        let (sets, lengthSize) = try HEVCConfiguration.annexB(configuration)
        let nclx = own.nclx ?? tileColour?.nclx
        return HEIFImage(
            width: grid.width, height: grid.height, columns: grid.columns, rows: grid.rows, tileWidth: tileSize.width,
            tileHeight: tileSize.height, tiles: tiles, parameterSets: sets, lengthSize: lengthSize,
            orientation: Self.orientation(of: own.turn), icc: own.icc ?? tileColour?.icc, matrix: nclx?.matrix,
            fullRange: nclx?.fullRange, primaries: nclx?.primaries, transfer: nclx?.transfer)
    }

    /// The tiles must cover the image, and the last column and row reach into it.
    private func checkCoverage(
        grid: (columns: Int, rows: Int, width: Int, height: Int), tile: (width: Int, height: Int)
    )
        throws(HEIFRefusal)
    {
        guard tile.width > 0, tile.height > 0, tile.width <= 16384, tile.height <= 16384 else {
            throw HEIFRefusal("tiles of \(tile.width) × \(tile.height)")
        }
        guard grid.columns * tile.width >= grid.width, grid.rows * tile.height >= grid.height,
            (grid.columns - 1) * tile.width < grid.width, (grid.rows - 1) * tile.height < grid.height
        else { throw HEIFRefusal("tiles that do not cover the grid") }
        // 4:2:0 chroma lines up across tiles only on even tile sides.
        if grid.columns * grid.rows > 1 && (tile.width % 2 != 0 || tile.height % 2 != 0) {
            throw HEIFRefusal("tiles of odd sides")
        }
    }

    /// A grid item's layout (ISO/IEC 23008-12 6.6.2.3).
    private func gridLayout(_ id: Int) throws(HEIFRefusal) -> (columns: Int, rows: Int, width: Int, height: Int) {
        return try HEIFReader.reading(try itemBytes(id, limit: 64)) { reader throws(HEIFRefusal) in
            guard try reader.u8() == 0 else { throw HEIFRefusal("a grid of another version") }
            let wide = try reader.u8() & 1 == 1
            let rows = try reader.u8() + 1, columns = try reader.u8() + 1
            let width = try reader.uint(wide ? 4 : 2), height = try reader.uint(wide ? 4 : 2)
            guard width > 0, height > 0 else { throw HEIFRefusal("a grid of no size") }
            return (columns, rows, width, height)
        }
    }

    /// An alpha plane (an auxiliary image of the primary with an alpha URN) is
    /// refused: the route makes opaque pixels. Other auxiliary images (depth, the
    /// HDR gain map) are not the primary image and are left alone.
    private func refuseAlpha(of id: Int) throws(HEIFRefusal) {
        for (auxiliary, targets) in references["auxl"] ?? [:] where targets.contains(id) {
            for property in try properties(of: auxiliary) where property.type == "auxC" {
                var reader = HEIFReader(bytes, from: property.range.lowerBound, to: property.range.upperBound)
                try reader.skip(4)
                let urn = try reader.cString()
                if urn.hasSuffix(":alpha") || urn == "urn:mpeg:hevc:2015:auxid:1" { throw HEIFRefusal("alpha") }
            }
        }
    }
}

/// An `hvcC` box's parameter sets, for a decoder that reads Annex B.
enum HEVCConfiguration {
    /// The parameter sets as Annex B (a start code before each), and the size of
    /// the length field before each NAL unit of the item's bytes (1, 2 or 4).
    static func annexB(_ configuration: [UInt8]) throws(HEIFRefusal) -> ([UInt8], Int) {
        try HEIFReader.reading(configuration) { reader throws(HEIFRefusal) in
            try reader.skip(21)
            let lengthSize = (try reader.u8() & 3) + 1
            guard lengthSize != 3 else { throw HEIFRefusal("NAL lengths of 3 bytes") }
            let arrays = try reader.u8()
            var sets: [UInt8] = []
            for _ in 0..<arrays {
                try reader.skip(1)
                for _ in 0..<(try reader.u16()) {
                    let length = try reader.u16()
                    guard length <= reader.remaining else { throw HEIFRefusal("a parameter set overruns 'hvcC'") }
                    sets += [0, 0, 0, 1]
                    sets += reader.bytes[reader.at..<(reader.at + length)]
                    try reader.skip(length)
                }
            }
            return (sets, lengthSize)
        }
    }

    /// A picture's bytes (NAL units each after a `lengthSize`-byte length) as Annex B,
    /// after `parameterSets`; nil when a length overruns the bytes.
    static func picture(_ bytes: UnsafeRawBufferPointer, extents: [Range<Int>], lengthSize: Int, parameterSets: [UInt8])
        -> [UInt8]?
    {
        var out: [UInt8] = []
        var joined: [UInt8] = []
        return picture(
            bytes, extents: extents, lengthSize: lengthSize, parameterSets: parameterSets, into: &out, joining: &joined)
            ? out : nil
    }

    /// ``picture(_:extents:lengthSize:parameterSets:)`` into `out` (replaced, its
    /// capacity kept for the next tile; `joined` holds a picture of several extents
    /// joined); false when a length overruns the bytes.
    static func picture(
        _ bytes: UnsafeRawBufferPointer, extents: [Range<Int>], lengthSize: Int, parameterSets: [UInt8],
        into out: inout [UInt8], joining joined: inout [UInt8]
    ) -> Bool {
        out.removeAll(keepingCapacity: true)
        out += parameterSets
        out.reserveCapacity(parameterSets.count + extents.reduce(0) { $0 + $1.count } + 64)
        guard extents.count != 1 else {
            return annexB(UnsafeRawBufferPointer(rebasing: bytes[extents[0]]), lengthSize, &out)
        }
        joined.removeAll(keepingCapacity: true)
        for range in extents { joined += bytes[range] }
        return joined.withUnsafeBytes { annexB($0, lengthSize, &out) }
    }

    private static let startCode: [UInt8] = [0, 0, 0, 1]

    /// Appends the NAL units of `pending` (each after its length) to `out`, each after a start code.
    private static func annexB(_ pending: UnsafeRawBufferPointer, _ lengthSize: Int, _ out: inout [UInt8]) -> Bool {
        var at = 0
        while at < pending.count {
            guard at + lengthSize <= pending.count else { return false }
            var length = 0
            for i in 0..<lengthSize { length = length << 8 | Int(pending[at + i]) }
            at += lengthSize
            guard length > 0, length <= pending.count - at else { return false }
            out.append(contentsOf: startCode)
            out += UnsafeRawBufferPointer(rebasing: pending[at..<(at + length)])
            at += length
        }
        return true
    }
}
