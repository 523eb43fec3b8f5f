/// The `meta` box of a HEIF file, read: items, where their bytes are, their
/// references and properties. Every count is bounded by the bytes that hold it.
struct HEIFMeta {
    let bytes: UnsafeRawBufferPointer
    var primaryID: Int?
    /// Item type by item ID (`hvc1`, `grid`, `Exif`, `mime`…).
    var types: [Int: String] = [:]
    /// Where each item's bytes are: (construction method, extents).
    var locations: [Int: (method: Int, extents: [Range<Int>])] = [:]
    /// References by type: from item → to items (`dimg`, `thmb`, `auxl`, `cdsc`).
    var references: [String: [Int: [Int]]] = [:]
    /// The `ipco` properties, in order (1-based in `ipma`): type and payload.
    var properties: [(type: String, start: Int, end: Int)] = []
    /// Each item's properties: (index into `properties`, essential).
    var associations: [Int: [(index: Int, essential: Bool)]] = [:]
    /// The `idat` box's payload.
    var idat: Range<Int>?
    /// `mime` items whose bytes are encoded (a `content_encoding` such as deflate).
    var encodedItems: Set<Int> = []

    /// The most bytes an item read whole may have (libvips's limit for EXIF).
    static let maxItemBytes = 1 << 20
    /// The most metadata items an image may have (what libvips's HEIF loader reads).
    static let maxMetadataItems = 16

    init(_ bytes: UnsafeRawBufferPointer, start: Int, end: Int) throws(HEIFRefusal) {
        self.bytes = bytes
        // A full box: version and flags first.
        for box in try HEIFReader(bytes, from: start + 4, to: end).boxes() {
            var reader = HEIFReader(bytes, from: box.start, to: box.end)
            switch box.type {
            case "hdlr":
                try reader.skip(8)
                guard try reader.fourCC() == "pict" else { throw HEIFRefusal("not a picture ('hdlr')") }
            case "pitm":
                let version = try reader.u8()
                try reader.skip(3)
                primaryID = try reader.uint(version == 0 ? 2 : 4)
            case "iinf": try readItemInfo(&reader)
            case "iloc": try readLocations(&reader)
            case "iref": try readReferences(&reader)
            case "iprp": try readProperties(box.start, box.end)
            case "idat": idat = box.start..<box.end
            default: continue
            }
        }
    }

    private mutating func readItemInfo(_ reader: inout HEIFReader) throws(HEIFRefusal) {
        let version = try reader.u8()
        try reader.skip(3)
        _ = try reader.uint(version == 0 ? 2 : 4)
        for entry in try reader.boxes() where entry.type == "infe" {
            var infe = HEIFReader(bytes, from: entry.start, to: entry.end)
            let entryVersion = try infe.u8()
            try infe.skip(3)
            // Versions 0 and 1 predate item types: nothing the route reads.
            guard entryVersion >= 2 else { continue }
            let id = try infe.uint(entryVersion == 2 ? 2 : 4)
            try infe.skip(2)
            let type = try infe.fourCC()
            types[id] = type
            guard types.count <= 100_000 else { throw HEIFRefusal("over 100,000 items") }
            if type == "mime" {
                // Its name, its content type, then (optional) its content encoding.
                _ = try infe.cString()
                _ = try infe.cString()
                if infe.remaining > 0, !(try infe.cString()).isEmpty { encodedItems.insert(id) }
            }
        }
    }

    private mutating func readLocations(_ reader: inout HEIFReader) throws(HEIFRefusal) {
        let version = try reader.u8()
        guard version <= 2 else { throw HEIFRefusal("'iloc' version \(version)") }
        try reader.skip(3)
        let sizes = try reader.u8(), more = try reader.u8()
        let offsetSize = sizes >> 4, lengthSize = sizes & 15, baseSize = more >> 4
        let indexSize = version == 0 ? 0 : more & 15
        let count = try reader.uint(version < 2 ? 2 : 4)
        for _ in 0..<count {
            let id = try reader.uint(version < 2 ? 2 : 4)
            let method = version == 0 ? 0 : try reader.u16() & 15
            guard try reader.u16() == 0 else { throw HEIFRefusal("an item in another file") }
            let base = try reader.uint(baseSize)
            let extents = try reader.u16()
            var ranges: [Range<Int>] = []
            for _ in 0..<extents {
                try reader.skip(indexSize)
                let offset = try reader.uint(offsetSize), length = try reader.uint(lengthSize)
                ranges.append(try extent(base + offset, length, method: method))
            }
            locations[id] = (method, ranges)
        }
    }

    /// An extent as a range of the file, checked to lie inside it (or inside `idat`).
    private func extent(_ offset: Int, _ length: Int, method: Int) throws(HEIFRefusal) -> Range<Int> {
        let within: Range<Int>
        switch method {
        case 0: within = 0..<bytes.count
        case 1:
            // `idat` comes after `iloc` in some files: checked when the item is read.
            return offset..<(offset + length)
        default: throw HEIFRefusal("an item built from other items (construction method \(method))")
        }
        let end = length == 0 ? within.upperBound : offset + length
        guard offset >= within.lowerBound, offset <= end, end <= within.upperBound else {
            throw HEIFRefusal("an item's bytes lie outside the file")
        }
        return offset..<end
    }

    private mutating func readReferences(_ reader: inout HEIFReader) throws(HEIFRefusal) {
        let version = try reader.u8()
        try reader.skip(3)
        let idSize = version == 0 ? 2 : 4
        for box in try reader.boxes() {
            var entry = HEIFReader(bytes, from: box.start, to: box.end)
            let from = try entry.uint(idSize)
            let count = try entry.u16()
            var targets: [Int] = []
            for _ in 0..<count { targets.append(try entry.uint(idSize)) }
            references[box.type, default: [:]][from] = targets
        }
    }

    private mutating func readProperties(_ start: Int, _ end: Int) throws(HEIFRefusal) {
        for box in try HEIFReader(bytes, from: start, to: end).boxes() {
            if box.type == "ipco" {
                properties = try HEIFReader(bytes, from: box.start, to: box.end).boxes()
            } else if box.type == "ipma" {
                var reader = HEIFReader(bytes, from: box.start, to: box.end)
                let version = try reader.u8()
                let flags = try reader.uint(2) << 8 | (try reader.u8())
                let count = try reader.u32()
                for _ in 0..<count {
                    let id = try reader.uint(version < 1 ? 2 : 4)
                    let n = try reader.u8()
                    var list: [(index: Int, essential: Bool)] = []
                    for _ in 0..<n {
                        let value = try reader.uint(flags & 1 == 1 ? 2 : 1)
                        let high = flags & 1 == 1 ? 0x8000 : 0x80
                        list.append((value & (high - 1), value & high != 0))
                    }
                    associations[id] = list
                }
            }
        }
    }

    /// The bytes of item `id`, its extents joined (at most `limit` bytes).
    func itemBytes(_ id: Int, limit: Int = HEIFMeta.maxItemBytes) throws(HEIFRefusal) -> [UInt8] {
        var out: [UInt8] = []
        for range in try itemExtents(id) {
            guard out.count + range.count <= limit else { throw HEIFRefusal("item \(id) is over \(limit) bytes") }
            out += bytes[range]
        }
        return out
    }

    /// The extents of item `id` in the file, `idat` ones resolved and checked.
    func itemExtents(_ id: Int) throws(HEIFRefusal) -> [Range<Int>] {
        guard let location = locations[id] else { throw HEIFRefusal("item \(id) has no location") }
        guard location.method == 1 else { return location.extents }
        guard let idat else { throw HEIFRefusal("item \(id) in an 'idat' the file lacks") }
        return try location.extents.map { range throws(HEIFRefusal) in
            let start = idat.lowerBound + range.lowerBound, end = idat.lowerBound + range.upperBound
            guard end <= idat.upperBound else { throw HEIFRefusal("item \(id) overruns its 'idat'") }
            return start..<end
        }
    }

    /// The properties of item `id`: (type, payload, essential).
    func properties(of id: Int) throws(HEIFRefusal) -> [(type: String, range: Range<Int>, essential: Bool)] {
        // Index 0 associates no property (ISO/IEC 23008-12 9.3.3.1).
        try (associations[id] ?? []).filter { $0.index != 0 }.map { association throws(HEIFRefusal) in
            guard association.index <= properties.count else {
                throw HEIFRefusal("a property index \(association.index) of \(properties.count)")
            }
            let property = properties[association.index - 1]
            return (property.type, property.start..<property.end, association.essential)
        }
    }
}
