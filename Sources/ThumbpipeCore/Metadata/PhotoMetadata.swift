import Foundation

/// What a photo says of itself, reconciled from its EXIF, IPTC and XMP as the
/// Metadata Working Group's guidelines say (exiftool's `MWG` composites are the
/// reference): read in the confined worker, from the blocks libvips found.
public struct PhotoMetadata: Sendable, Codable, Equatable {
    /// Its title: XMP `dc:title`, else IPTC ObjectName.
    public var title: String?
    /// Its description: EXIF ImageDescription, else XMP `dc:description`, else
    /// IPTC Caption-Abstract (IPTC before XMP when the IPTC changed after the XMP).
    public var description: String?
    /// When it was taken: EXIF DateTimeOriginal (with its sub-seconds and
    /// offset), else XMP `photoshop:DateCreated`, else IPTC DateCreated and
    /// TimeCreated (in the same order as the description); beyond MWG, when
    /// none of those is there, XMP `exif:DateTimeOriginal`.
    public var taken: TakenTime?
    /// Blocks that could not be read, for the item's warnings.
    public var warnings: [String] = []

    public init(title: String? = nil, description: String? = nil, taken: TakenTime? = nil) {
        self.title = title
        self.description = description
        self.taken = taken
    }

    /// The longest title or description kept (longer ones are cut, with a warning).
    static let maxText = 2000

    /// Reconciles the blocks a photo has (MWG 2.0, as exiftool reads it).
    static func reconcile(exif: EXIFFields, xmp: Data?, iptc: Data?) -> PhotoMetadata {
        var result = PhotoMetadata()
        var packet: XMPPacket?
        var block: IPTCBlock?
        do throws(MetadataProblem) {
            packet = try xmp.map(XMPPacket.init)
        } catch { result.warnings.append(error.message) }
        do throws(MetadataProblem) {
            block = try iptc.map(IPTCBlock.init)
        } catch { result.warnings.append(error.message) }
        // MWG: the XMP wins unless there is IPTC that changed after it (a digest
        // stored that is not the block's own), or there is no XMP value.
        // An IPTC value cut at the field's limit whose XMP runs on is the XMP's.
        func pick(_ xmpValue: String?, limit: Int, _ iptcValue: () -> String?) -> String? {
            guard let block else { return xmpValue }
            if let xmpValue, block.xmpInStep { return xmpValue }
            let iptc = iptcValue()
            if let iptc, let xmpValue, iptc.count == limit, xmpValue.count > limit, xmpValue.hasPrefix(iptc) {
                return xmpValue
            }
            return iptc
        }
        let xmpTitle = result.read { () throws(MetadataProblem) in try packet?.languageAlternative(.dc, "title") }
        let xmpDescription = result.read { () throws(MetadataProblem) in
            try packet?.languageAlternative(.dc, "description")
        }
        result.title = result.kept(pick(xmpTitle, limit: 64) { block?.text(5) }, "title")
        let exifDescription = exif.imageDescription.flatMap { $0.allSatisfy { $0 == " " } ? nil : $0 }
        result.description = result.kept(
            exifDescription ?? pick(xmpDescription, limit: 2000) { block?.text(120) }, "description")
        result.taken = result.takenTime(exif: exif, packet: packet, block: block)
        return result
    }

    private func takenTime(exif: EXIFFields, packet: XMPPacket?, block: IPTCBlock?) -> TakenTime? {
        if let time = TakenTime.exif(exif) { return time }
        let xmpCreated = (try? packet?.simple(.photoshop, "DateCreated")).flatMap { $0 }.flatMap(TakenTime.iso)
        if block == nil || block?.xmpInStep == true, let xmpCreated { return xmpCreated }
        if let block { return block.dateCreated }
        // Beyond MWG: XMP's copy of the EXIF date, when nothing else dates the photo.
        return (try? packet?.simple(.exif, "DateTimeOriginal")).flatMap { $0 }.flatMap(TakenTime.iso)
    }

    /// `body`'s value, its problem a warning.
    private mutating func read(_ body: () throws(MetadataProblem) -> String?) -> String? {
        do throws(MetadataProblem) {
            return try body()
        } catch {
            if !warnings.contains(error.message) { warnings.append(error.message) }
            return nil
        }
    }

    /// A text trimmed, nil when blank, cut to ``maxText`` characters.
    private mutating func kept(_ text: String?, _ what: String) -> String? {
        // Control characters out (a title is a line of text), then blank is none.
        let clean = String(
            (text ?? "").unicodeScalars.filter { $0.value >= 0x20 || $0 == "\n" || $0 == "\t" }.map(Character.init)
        ).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !clean.isEmpty else { return nil }
        guard clean.count > Self.maxText else { return clean }
        warnings.append("the photo's \(what) has \(clean.count) characters: cut to \(Self.maxText)")
        return String(clean.prefix(Self.maxText))
    }
}

extension PhotoMetadata {
    /// The metadata of an image libvips opened: its EXIF fields, XMP and IPTC blocks.
    static func read(_ image: VImage) -> PhotoMetadata {
        let exif = EXIFFields(
            imageDescription: image.exif("exif-ifd0-ImageDescription"),
            dateTimeOriginal: image.exif("exif-ifd2-DateTimeOriginal"),
            subSecond: image.exif("exif-ifd2-SubSecTimeOriginal"),
            offset: image.exif("exif-ifd2-OffsetTimeOriginal") ?? image.exif("exif-ifd2-OffsetTime"),
            gpsDate: image.exif("exif-ifd3-GPSDateStamp"), gpsTime: image.exif("exif-ifd3-GPSTimeStamp"))
        return reconcile(exif: exif, xmp: image.blob("xmp-data"), iptc: image.blob("iptc-data"))
    }
}
