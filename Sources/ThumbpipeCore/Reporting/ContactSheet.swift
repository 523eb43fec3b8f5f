import CVips
import CVipsShim
import Foundation

/// Lays an archive's thumbnails out in a grid on a neutral grey background,
/// each with its item name under it, so a person can check a whole run at a
/// glance. Past ``Layout/perSheet`` items it continues on further sheets.
public struct ContactSheet: Sendable {
    /// Where everything goes on a sheet.
    public struct Layout: Sendable, Equatable {
        /// Thumbnails per row.
        public var columns: Int
        /// Items per sheet; more go to the next sheet.
        public var perSheet: Int
        /// The thumbnail box in pixels (the archive's first thumbnail's size).
        public var thumbnailWidth: Int
        public var thumbnailHeight: Int
        /// Space around each cell's content.
        public var padding = 10
        /// Room under each thumbnail for two lines of its name.
        public var labelHeight = 28

        /// A cell's width: the thumbnail or the label, whichever is wider, plus padding.
        public var cellWidth: Int { max(thumbnailWidth, 96) + 2 * padding }
        /// A cell's height: thumbnail, gap, label, padding.
        public var cellHeight: Int { thumbnailHeight + labelHeight + 2 * padding + 4 }

        /// Fewer columns and items per sheet, when needed, so that a full sheet
        /// has at most `pixels` pixels (one cell at the least).
        public mutating func fit(pixels: Int) {
            let cells = max(1, pixels / (cellWidth * cellHeight))
            columns = min(columns, cells)
            perSheet = min(perSheet, max(columns, cells / columns * columns))
        }

        /// How many sheets `count` items take.
        public func sheets(for count: Int) -> Int { max(1, (count + perSheet - 1) / perSheet) }

        /// The pixel size of the sheet holding `items` items.
        public func size(items: Int) -> (width: Int, height: Int) {
            let rows = max(1, (items + columns - 1) / columns)
            return (columns * cellWidth, rows * cellHeight)
        }

        /// The sheet and top-left corner of item `index`'s thumbnail.
        public func thumbnailOrigin(of index: Int) -> (sheet: Int, x: Int, y: Int) {
            let slot = index % perSheet
            let column = slot % columns
            let row = slot / columns
            let x = column * cellWidth + (cellWidth - thumbnailWidth) / 2
            return (index / perSheet, x, row * cellHeight + padding)
        }
    }

    /// The background grey level (neutral mid-grey, so white and black thumbnails both show).
    public static let background: UInt8 = 128
    /// The layout of the sheets.
    public var layout: Layout
    /// Why items failed, by key (from the run's report): a failed item is drawn
    /// with a red outline and its reason, an item without a photo as a plain box.
    public var failures: [String: String] = [:]

    /// Creates a contact sheet with `columns` per row and at most `perSheet` items per sheet.
    public init(columns: Int = 10, perSheet: Int = 100, thumbnailWidth: Int = 80, thumbnailHeight: Int = 80) {
        layout = Layout(
            columns: max(1, columns), perSheet: max(1, perSheet), thumbnailWidth: thumbnailWidth,
            thumbnailHeight: thumbnailHeight)
    }

    /// The file names of the sheets for `base`: `sheet.png`, then `sheet-2.png`, `sheet-3.png`…
    public static func sheetPath(_ base: String, index: Int) -> String {
        guard index > 0 else { return base }
        let url = URL(fileURLWithPath: base)
        let stem = url.deletingPathExtension().path
        let ext = url.pathExtension.isEmpty ? "png" : url.pathExtension
        return "\(stem)-\(index + 1).\(ext)"
    }

    /// Renders every sheet of `reader`'s items and writes them as PNG files named from `base`.
    /// - Returns: the paths written.
    /// - Throws: ``ThumbpipeError`` for unreadable archives (65) or unwritable files (73/74).
    /// - Parameter target: the first sheet's target, when the user named it (a FIFO
    ///   or device is written through); later sheets are files beside it.
    public static func write(
        from reader: KeyedArchiveReader, to base: String, columns: Int = 10, perSheet: Int = 100,
        failures: [String: String] = [:], target: OutputTarget? = nil, warn: (String) -> Void = { _ in }
    ) throws -> [String] {
        try Vips.start()
        let folder = URL(fileURLWithPath: base).deletingLastPathComponent().path
        do {
            try FileSystem.createFolder(folder, intermediate: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(folder): cannot create: \(ThumbpipeError.describe(error))")
        }
        var sheet = ContactSheet(columns: columns, perSheet: perSheet)
        sheet.failures = failures
        try sheet.fitThumbnails(of: reader)
        var paths: [String] = []
        let layout = sheet.layout
        // Pango picks a font per character by coverage; what no font has draws as a box.
        let fonts = FontCoverage()
        var uncovered: (names: Int, characters: [Unicode.Scalar]) = (0, [])
        defer { if let message = Self.uncoveredMessage(uncovered.names, uncovered.characters) { warn(message) } }
        for page in 0..<layout.sheets(for: reader.count) {
            let first = page * layout.perSheet
            let last = min(reader.count, first + layout.perSheet)
            let size = layout.size(items: last - first)
            var canvas = RGBABuffer(
                width: size.width, height: size.height,
                pixels: [UInt8](repeating: background, count: size.width * size.height * 4))
            for i in stride(from: 3, to: canvas.pixels.count, by: 4) { canvas.pixels[i] = 255 }
            for index in first..<last {
                let item = try reader.validItem(at: index)
                let missing = fonts.missing(in: item.itemName)
                if !missing.isEmpty {
                    uncovered.names += 1
                    for scalar in missing where uncovered.characters.count < 8 && !uncovered.characters.contains(scalar)
                    {
                        uncovered.characters.append(scalar)
                    }
                }
                try sheet.draw(item, at: index, on: &canvas)
            }
            let png = try PNGEncode().apply(canvas)
            if page == 0, let target {
                try target.write(png)
                paths.append(target.path)
                continue
            }
            let path = sheetPath(base, index: page)
            try TemporaryFile.write(png, to: path)
            paths.append(path)
        }
        return paths
    }

    /// Sizes the boxes by the first thumbnail (one run's thumbnails share a size),
    /// then fits the sheet within ``largestSheetPixels``.
    private mutating func fitThumbnails(of reader: KeyedArchiveReader) throws {
        for index in 0..<reader.count {
            if let png = try reader.validItem(at: index).thumbnailData, let size = PNGInfo.size(png),
                size.width <= Self.largestThumbnail, size.height <= Self.largestThumbnail
            {
                layout.thumbnailWidth = size.width
                layout.thumbnailHeight = size.height
                break
            }
        }
        layout.fit(pixels: Self.largestSheetPixels)
    }

    /// The most pixels one sheet has (64 Mpx: 256 MB as RGBA, the bulk of the
    /// command's memory): with large thumbnails, sheets get fewer columns and
    /// items, never more pixels.
    static let largestSheetPixels = 64 << 20

    /// The largest thumbnail side a sheet draws (thumbpipe's canvas is at most
    /// 4096): a PNG header claiming more is refused before anything is decoded.
    static let largestThumbnail = 4096

    /// Draws one item's cell: its thumbnail (or an empty box) and its name.
    func draw(_ item: ArchivedItem, at index: Int, on canvas: inout RGBABuffer) throws {
        let origin = layout.thumbnailOrigin(of: index)
        if let png = item.thumbnailData, let size = PNGInfo.size(png),
            size.width > Self.largestThumbnail || size.height > Self.largestThumbnail
        {
            throw ThumbpipeError(
                .dataError,
                "item \(index + 1) (\(item.itemKey)): its thumbnail claims \(size.width)×\(size.height) pixels, "
                    + "over the \(Self.largestThumbnail) a contact sheet draws")
        }
        if let png = item.thumbnailData, let pixels = try? Self.decode(png) {
            Self.blend(
                pixels, onto: &canvas, x: origin.x, y: origin.y, maxWidth: layout.thumbnailWidth,
                maxHeight: layout.thumbnailHeight)
        } else {
            // No thumbnail: a darker box, so missing images stand out.
            let box = RGBABuffer(
                width: layout.thumbnailWidth, height: layout.thumbnailHeight,
                pixels: [UInt8](repeating: 0, count: layout.thumbnailWidth * layout.thumbnailHeight * 4).enumerated()
                    .map {
                        $0.offset % 4 == 3 ? 255 : 96
                    })
            Self.blend(
                box, onto: &canvas, x: origin.x, y: origin.y, maxWidth: layout.thumbnailWidth,
                maxHeight: layout.thumbnailHeight)
            if failures[item.itemKey] != nil { Self.outline(&canvas, x: origin.x, y: origin.y, layout: layout) }
        }
        let labelTop = origin.y + layout.thumbnailHeight + 4
        let labelWidth = layout.cellWidth - 4
        var label = item.itemName
        if item.thumbnailData == nil, let reason = failures[item.itemKey] {
            // The reason's first words: enough to tell "file not found" from "truncated JPEG".
            label += "\n" + reason.split(separator: " ").prefix(3).joined(separator: " ")
        }
        if let mask = try? Self.text(label, width: labelWidth) {
            let left =
                (index % layout.perSheet % layout.columns) * layout.cellWidth + (layout.cellWidth - mask.width) / 2
            for y in 0..<min(mask.height, layout.labelHeight) {
                for x in 0..<min(mask.width, labelWidth) where left + x >= 0 && left + x < canvas.width {
                    let coverage = Int(mask.pixels[y * mask.width + x])
                    guard coverage > 0 else { continue }
                    let i = ((labelTop + y) * canvas.width + left + x) * 4
                    for c in 0..<3 {
                        // Near-black text over the grey.
                        let bg = Int(canvas.pixels[i + c])
                        canvas.pixels[i + c] = UInt8((bg * (255 - coverage) + 16 * coverage + 127) / 255)
                    }
                }
            }
        }
    }

    /// A 2-pixel red frame around a failed item's box.
    static func outline(_ canvas: inout RGBABuffer, x: Int, y: Int, layout: Layout) {
        for row in 0..<layout.thumbnailHeight {
            for column in 0..<layout.thumbnailWidth
            where row < 2 || column < 2 || row >= layout.thumbnailHeight - 2 || column >= layout.thumbnailWidth - 2 {
                let px = x + column
                let py = y + row
                guard px >= 0, py >= 0, px < canvas.width, py < canvas.height else { continue }
                let i = (py * canvas.width + px) * 4
                canvas.pixels[i] = 220
                canvas.pixels[i + 1] = 30
                canvas.pixels[i + 2] = 30
            }
        }
    }

    /// Straight-alpha "over" onto an opaque canvas; opaque pixels are copied exactly.
    static func blend(
        _ source: RGBABuffer, onto canvas: inout RGBABuffer, x: Int, y: Int, maxWidth: Int, maxHeight: Int
    ) {
        let width = min(source.width, maxWidth)
        let height = min(source.height, maxHeight)
        let dx = x + (maxWidth - width) / 2
        let dy = y + (maxHeight - height) / 2
        for row in 0..<height {
            for column in 0..<width {
                let s = (row * source.width + column) * 4
                let d = ((dy + row) * canvas.width + dx + column) * 4
                let a = Int(source.pixels[s + 3])
                for c in 0..<3 {
                    let blended = (Int(source.pixels[s + c]) * a + Int(canvas.pixels[d + c]) * (255 - a) + 127) / 255
                    canvas.pixels[d + c] = UInt8(blended)
                }
            }
        }
    }

    /// Decodes a PNG thumbnail to 8-bit RGBA.
    static func decode(_ png: Data) throws -> RGBABuffer {
        // Not libvips's PNG loader: an archive's thumbnails are untrusted bytes and this
        // process is not a confined worker (``PNGDecode``).
        try PNGDecode.rgba(png, maxSide: largestThumbnail)
    }

    /// What to tell the user when `names` item names have characters no installed
    /// font has (the first few shown as `U+AC00`), with the fonts that have them.
    static func uncoveredMessage(_ names: Int, _ characters: [Unicode.Scalar]) -> String? {
        guard names > 0 else { return nil }
        // By code point alone: the terminal has no glyph for them either.
        let shown = characters.map { String(format: "U+%04X", $0.value) }.joined(separator: ", ")
        return
            "\(names) item \(names == 1 ? "name has" : "names have") characters no installed font has (\(shown)): they show as boxes; install a font that has them (Debian: fonts-noto-cjk or fonts-droid-fallback for Chinese, Japanese and Korean, fonts-noto-core for other scripts, fonts-symbola for emoji)"
    }

    /// Renders a label as a coverage mask (vips_text).
    static func text(_ text: String, width: Int) throws -> (width: Int, height: Int, pixels: [UInt8]) {
        var out: UnsafeMutablePointer<VipsImage>? = nil
        // Pango reads markup: escape it so names show as typed.
        let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
        try Vips.check(CVipsShim_text(&out, escaped, "sans 9", Int32(width), 72), "text")
        let image = VImage(out!)
        return (image.width, image.height, try image.withSamples(operation: "text") { [UInt8]($0) })
    }
}
