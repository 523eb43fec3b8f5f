import Foundation

/// Every setting of a run, as a pipeline file (`pipelines/NAME.json`) states it.
public struct PipelineSettings: Sendable, Equatable, Codable {
    /// The thumbnail's geometry and format.
    public struct Thumbnail: Sendable, Equatable, Codable {
        /// Canvas width in points.
        public var width: Double = 40
        /// Canvas height in points.
        public var height: Double = 40
        /// Pixels per point.
        public var scale: Double = 2
        /// Corner radius in points.
        public var cornerRadius: Double = 5
        /// Encoded format; only `png` (8-bit RGBA) is supported.
        public var format: String = "png"

        /// Canvas width in pixels: `width × scale`, rounded.
        public var pixelWidth: Int { Int((width * scale).rounded()) }
        /// Canvas height in pixels: `height × scale`, rounded.
        public var pixelHeight: Int { Int((height * scale).rounded()) }
        /// Corner radius in pixels, at most half the shorter side.
        public var pixelRadius: Double {
            min(cornerRadius * scale, Double(min(pixelWidth, pixelHeight)) / 2)
        }
    }

    /// The full-size image store.
    public struct Store: Sendable, Equatable, Codable {
        /// Encoded format; only `jpeg` is supported.
        public var format: String = "jpeg"
        /// JPEG quality from 0 to 1, as `UIImageJPEGRepresentation` takes it (0.5 → libvips Q=50).
        public var quality: Double = 0.5
        /// How the stored JPEG displays upright.
        public var orientation: StoreOrientation = .rotate
        /// Keep the source's metadata (EXIF with GPS, XMP, IPTC) in the store file.
        public var keepMetadata = false
        /// Optimised Huffman tables: files about a quarter smaller at Q=50, but
        /// libjpeg holds every coefficient of the image while encoding (about
        /// 67 MB more for a 22 Mpx photo). Off by default, as in libvips.
        public var optimizeCoding = false

        /// libvips's Q for ``quality``.
        public var vipsQuality: Int { max(1, min(100, Int((quality * 100).rounded()))) }

        /// The settings, set away from their defaults, that keep every JPEG off the
        /// plane path (for the report's hints): `store.keepMetadata`, `store.orientation tag`.
        public var settingsOffPlanes: [String] {
            (keepMetadata ? ["store.keepMetadata"] : []) + (orientation == .tag ? ["store.orientation tag"] : [])
        }
    }

    /// The item archive.
    public struct Archive: Sendable, Equatable, Codable {
        /// The class name the items are archived under.
        public var className: String = "BNRItem"
        /// The archive's file name in the output folder.
        public var fileName: String = "items.archive"
    }

    /// Limits on what a source may cost.
    public struct Limits: Sendable, Equatable, Codable {
        /// Sources with more pixels than this are refused before decoding (sharp's default).
        public var maxPixels: Int = 268_402_689
        /// How strict decoding is: `none`, `truncated`, `error` or `warning` (libvips's fail_on).
        public var failOn: FailOn = .truncated
        /// Sources larger than this many bytes are refused before decoding; 0 means no limit.
        public var maxFileBytes = 0
        /// A source whose item takes a worker longer than this (from opening the
        /// source to its last output) fails: the worker is killed and replaced.
        /// 0 means no limit.
        public var timeoutSeconds = 60.0
        /// The most address space one worker process may use (RLIMIT_AS), so
        /// one monstrous file fails its item instead of taking the machine;
        /// 0 means no limit.
        public var workerMemoryBytes = 0
        /// The loaders a source may be decoded by (see ``ImageFormat``): the photo
        /// formats by default. Naming `magick` hands untrusted files to ImageMagick.
        public var formats = ImageFormats(ImageFormat.photoFormats)
    }

    /// How a stored JPEG is made to display upright.
    public enum StoreOrientation: String, Sendable, CaseIterable, Codable {
        /// Turn the pixels upright: correct in every viewer.
        case rotate
        /// Keep the stored pixels and write only the EXIF orientation tag: cheaper, but
        /// viewers that ignore EXIF show the image sideways.
        case tag
    }

    /// libvips's decode strictness levels (VipsFailOn).
    public enum FailOn: String, Sendable, CaseIterable, Codable {
        case none, truncated, error, warning
        var vipsValue: Int32 {
            switch self {
            case .none: 0
            case .truncated: 1
            case .error: 2
            case .warning: 3
            }
        }
    }

    /// The pipeline's name (the file's base name).
    public var name: String = "homepwner"
    public var thumbnail = Thumbnail()
    public var store = Store()
    public var archive = Archive()
    public var limits = Limits()

    /// The seed values: Homepwner's 40×40 pt thumbnail at scale 2 with a 5 pt radius, JPEG quality 0.5.
    public init() {}
}

extension PipelineSettings {
    /// Loads a pipeline file. Missing settings keep their seed values.
    /// - Throws: ``ThumbpipeError`` (66) when it cannot be read, (65) with the line of a wrong setting.
    public static func load(path: String) throws -> PipelineSettings {
        let data: Data
        do {
            data = try FileSystem.contents(of: path, limit: 64 << 20)
        } catch {
            throw ThumbpipeError(.noInput, "\(path): cannot open pipeline file: \(error)")
        }
        return try parse(
            [UInt8](data), file: URL(fileURLWithPath: path).lastPathComponent,
            name: URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent)
    }

    /// Parses a pipeline file's bytes (`file` names it in messages, `name` is its default name).
    /// - Throws: ``ThumbpipeError`` (65) with the line of a wrong setting.
    public static func parse(_ bytes: [UInt8], file: String, name: String) throws -> PipelineSettings {
        let root: JSONValue
        // A UTF-8 byte-order mark (Windows editors write one) opens the file, not the JSON.
        let bytes = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        do {
            root = try JSONParser.parse(bytes)
        } catch let error as JSONSyntaxError {
            throw ThumbpipeError.data(file, error.line, "invalid JSON: \(error.reason)")
        }
        var settings = PipelineSettings()
        settings.name = name
        try settings.apply(root, file: file)
        return settings
    }

    private mutating func apply(_ root: JSONValue, file: String) throws {
        guard case .object(let sections, _) = root else {
            throw ThumbpipeError.data(file, 1, "a pipeline file must be a JSON object")
        }
        for section in sections {
            guard case .object(let members, _) = section.value else {
                if section.key == "name", case .string(let s) = section.value {
                    name = s
                    continue
                }
                throw ThumbpipeError.data(file, section.line, "'\(section.key)' must be an object")
            }
            for member in members {
                let key = "\(section.key).\(member.key)"
                try set(key, member.value, at: "\(file):\(member.line)")
            }
        }
        try validate(at: file)
    }

    /// Checks that settings make sense together.
    /// - Throws: ``ThumbpipeError`` (65) naming the first that does not.
    public func validate(at location: String) throws {
        func bad(_ reason: String) -> ThumbpipeError { ThumbpipeError(.dataError, "\(location): \(reason)") }
        guard thumbnail.width > 0, thumbnail.height > 0, thumbnail.scale > 0 else {
            throw bad("thumbnail width, height and scale must be greater than 0")
        }
        // Checked in floating point first: a huge value must not reach an Int conversion.
        guard (thumbnail.width * thumbnail.scale).isFinite, (thumbnail.height * thumbnail.scale).isFinite,
            thumbnail.width * thumbnail.scale < 4096.5, thumbnail.height * thumbnail.scale < 4096.5,
            thumbnail.cornerRadius.isFinite
        else { throw bad("thumbnail canvas must be 1 to 4096 pixels a side (width × scale, height × scale)") }
        guard thumbnail.pixelWidth >= 1, thumbnail.pixelHeight >= 1, thumbnail.pixelWidth <= 4096,
            thumbnail.pixelHeight <= 4096
        else { throw bad("thumbnail canvas must be 1 to 4096 pixels a side") }
        guard thumbnail.cornerRadius >= 0 else { throw bad("thumbnail.cornerRadius must be 0 or more") }
        // Every run's report holds its settings, and a report read back holds no
        // number past 2^53 (``ReportBounds``): a setting past it would leave a
        // report no one can draw or merge.
        let numbers: [(String, Double)] = [
            ("thumbnail.cornerRadius", thumbnail.cornerRadius), ("limits.maxPixels", Double(limits.maxPixels)),
            ("limits.maxFileBytes", Double(limits.maxFileBytes)),
            ("limits.workerMemoryBytes", Double(limits.workerMemoryBytes)),
        ]
        for (name, value) in numbers where value > ReportBounds.largestNumber {
            throw bad("\(name) must be at most 2^53 (9007199254740992)")
        }
        guard thumbnail.format == "png" else {
            throw bad("thumbnail.format '\(thumbnail.format)' is not supported (png)")
        }
        guard store.format == "jpeg" || store.format == "jpg" else {
            throw bad("store.format '\(store.format)' is not supported (jpeg)")
        }
        guard store.quality > 0, store.quality <= 1 else { throw bad("store.quality must be in (0, 1]") }
        guard !archive.className.isEmpty else { throw bad("archive.className must not be empty") }
        guard ManifestItem.isSafeKey(archive.fileName) else {
            throw bad("archive.fileName '\(archive.fileName)' is not a safe file name")
        }
    }
}
