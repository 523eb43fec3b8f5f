import Foundation

/// One setting of a pipeline, described once: its dotted name, the flag that
/// sets it, what it means, which outputs it shapes, how its value is read and
/// checked, and its value as text. Parsing (pipeline files, `--set`, flags),
/// the run's flag table and `--help`, the settings summary and every change
/// fingerprint are built from ``PipelineSettings/descriptions``, so a new
/// setting is one entry there and cannot be left out of a fingerprint.
public struct SettingDescription: Sendable {
    /// What a setting shapes: a change to it redoes (or re-tries) exactly these.
    public enum Output: String, Sendable, CaseIterable {
        /// Every thumbnail (and so every archive entry).
        case thumbnail
        /// Every store file.
        case store
        /// Whether an item fails (limits): a failure is kept while these hold.
        case failure
        /// The archive as a whole (its class and file name).
        case archive
    }

    /// Where a value comes from: a command-line flag takes friendlier forms
    /// (`--quality 50` as well as `0.5`).
    public enum Origin: Sendable { case file, flag }

    /// The dotted name, e.g. `thumbnail.scale`.
    public let key: String
    /// The `run` flag that sets it (`--scale`) and its value's name (`S`), if any.
    public let flag: String?
    public let flagValue: String
    /// What it means, for `--help` (lines after the first are continuation lines).
    public let help: String
    /// What the manual and the completions say of its flag (nil without a flag).
    public let docs: OptionDocumentation?
    /// What it shapes.
    public let shapes: Set<Output>
    /// Two valid values, for the test that changes each setting.
    public let examples: [JSONValue]
    let read: @Sendable (inout PipelineSettings, JSONValue, Origin, SettingValue) throws -> Void
    let text: @Sendable (PipelineSettings) -> String

    init(
        _ key: String, flag: String? = nil, _ flagValue: String = "", help: String = "",
        docs: OptionDocumentation? = nil, shapes: Set<Output>, examples: [JSONValue],
        read: @escaping @Sendable (inout PipelineSettings, JSONValue, Origin, SettingValue) throws -> Void,
        text: @escaping @Sendable (PipelineSettings) -> String
    ) {
        self.key = key
        self.flag = flag
        self.flagValue = flagValue
        self.help = help
        self.docs = docs
        self.shapes = shapes
        self.examples = examples
        self.read = read
        self.text = text
    }

    /// The setting's value in `settings`, as text: what fingerprints hash and
    /// what the summary and a settings change show.
    public func value(in settings: PipelineSettings) -> String { text(settings) }
}

/// Reads one setting's value, with errors that name the setting and where it was given.
struct SettingValue {
    let key: String
    let location: String
    let value: JSONValue

    func bad(_ reason: String) -> ThumbpipeError { ThumbpipeError(.dataError, "\(location): \(key) \(reason)") }

    func number() throws -> Double {
        let text: String
        switch value {
        case .number(let n): text = n
        // The command line gives every value as text; a file must write a number as one ("60" is not).
        case .string(let s) where location == "command line": text = s
        default: throw bad("must be a number, found \(value.typeName)")
        }
        // Decimal only, as JSON writes numbers: no 0x10 (which Double reads as 16), inf or nan.
        guard Self.isDecimal(text), let d = Double(text), d.isFinite else {
            throw bad("must be a decimal number, found '\(text)'")
        }
        // 1e-320 and the like (subnormal): no setting means them.
        if d != 0 && d.magnitude < Double.leastNormalMagnitude { throw bad("must not be as small as '\(text)'") }
        return d
    }

    /// Whether `text` is a decimal number as JSON writes one (a leading `+` allowed).
    static func isDecimal(_ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
        func digits() -> Int {
            var n = 0
            while let c = bytes.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) {
                bytes = bytes.dropFirst()
                n += 1
            }
            return n
        }
        guard digits() > 0 else { return false }
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            guard digits() > 0 else { return false }
        }
        if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") { bytes = bytes.dropFirst() }
            guard digits() > 0 else { return false }
        }
        return bytes.isEmpty
    }

    /// A whole number in `range`, or an error saying `rule`.
    func whole(_ range: ClosedRange<Double>, _ rule: String) throws -> Int {
        let n = try number()
        guard range.contains(n), n == n.rounded() else { throw bad(rule) }
        return Int(n)
    }

    func boolean() throws -> Bool {
        switch value {
        case .bool(let b): return b
        case .string("true"): return true
        case .string("false"): return false
        default: throw bad("must be true or false")
        }
    }

    func string() throws -> String {
        guard case .string(let s) = value else { throw bad("must be a string, found \(value.typeName)") }
        return s
    }

    /// One of an enumeration's raw values.
    func choice<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws -> T where T.RawValue == String {
        let s = try string()
        guard let choice = T(rawValue: s) else {
            throw bad("must be one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), found '\(s)'")
        }
        return choice
    }

    /// A list of names, as a JSON array or a comma-separated string.
    func names() throws -> [String] {
        switch value {
        case .array(let elements):
            return try elements.map { element in
                guard case .string(let s) = element else { throw bad("must be a list of format names") }
                return s
            }
        case .string(let s): return s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        default: throw bad("must be a list of format names")
        }
    }
}

extension PipelineSettings {
    /// Every setting, in the order files, summaries and fingerprints list them.
    public static let descriptions: [SettingDescription] = [
        SettingDescription(
            "thumbnail.width", flag: "--width", "PT", help: "thumbnail canvas width in points",
            docs: OptionDocumentation(
                "thumbnail width in points", .free("points"), "Thumbnail canvas width in points."),
            shapes: [.thumbnail],
            examples: [.number("40"), .number("64")], read: { s, _, _, v in s.thumbnail.width = try v.number() },
            text: { number($0.thumbnail.width) }),
        SettingDescription(
            "thumbnail.height", flag: "--height", "PT", help: "thumbnail canvas height in points",
            docs: OptionDocumentation(
                "thumbnail height in points", .free("points"), "Thumbnail canvas height in points."),
            shapes: [.thumbnail], examples: [.number("40"), .number("30")],
            read: { s, _, _, v in s.thumbnail.height = try v.number() }, text: { number($0.thumbnail.height) }),
        SettingDescription(
            "thumbnail.scale", flag: "--scale", "S", help: "pixels per point",
            docs: OptionDocumentation("pixels per point", .free("scale"), "Pixels per point."), shapes: [.thumbnail],
            examples: [.number("2"), .number("3")], read: { s, _, _, v in s.thumbnail.scale = try v.number() },
            text: { number($0.thumbnail.scale) }),
        SettingDescription(
            "thumbnail.cornerRadius", flag: "--corner-radius", "PT", help: "corner radius in points",
            docs: OptionDocumentation("corner radius in points", .free("points"), "Corner radius in points."),
            shapes: [.thumbnail], examples: [.number("5"), .number("8")],
            read: { s, _, _, v in s.thumbnail.cornerRadius = try v.number() },
            text: { number($0.thumbnail.cornerRadius) }),
        SettingDescription(
            "thumbnail.format", shapes: [.thumbnail], examples: [.string("png")],
            read: { s, _, _, v in s.thumbnail.format = try v.string().lowercased() }, text: { $0.thumbnail.format }),
        SettingDescription(
            "store.format", shapes: [.store], examples: [.string("jpeg"), .string("jpg")],
            read: { s, _, _, v in s.store.format = try v.string().lowercased() }, text: { $0.store.format }),
        SettingDescription(
            "store.quality", flag: "--quality", "Q", help: "store JPEG quality, 0-1 (0.5 = libvips Q=50)",
            docs: OptionDocumentation(
                "store JPEG quality, 0-1 or 1-100", .free("quality"),
                "Store JPEG quality, 0\\(en1 as UIImageJPEGRepresentation takes it, or 1\\(en100."),
            shapes: [.store], examples: [.number("0.5"), .number("0.8")],
            read: { s, _, origin, v in
                var q = try v.number()
                // From a flag, UIImageJPEGRepresentation's 0–1 or the 1–100 every other tool takes.
                if origin == .flag {
                    guard q > 0, q <= 100 else {
                        throw ThumbpipeError(
                            .usage,
                            "--quality must be from 0 to 1 (as UIImageJPEGRepresentation) or 1 to 100, not '\(q)'")
                    }
                    if q > 1 { q /= 100 }
                }
                s.store.quality = q
            }, text: { number($0.store.quality) }),
        SettingDescription(
            "store.orientation", shapes: [.store], examples: [.string("rotate"), .string("tag")],
            read: { s, _, _, v in
                let text = try v.string()
                guard let value = StoreOrientation(rawValue: text) else {
                    throw v.bad("must be rotate or tag, found '\(text)'")
                }
                s.store.orientation = value
            }, text: { $0.store.orientation.rawValue }),
        SettingDescription(
            "store.keepMetadata", shapes: [.store], examples: [.bool(false), .bool(true)],
            read: { s, _, _, v in s.store.keepMetadata = try v.boolean() }, text: { String($0.store.keepMetadata) }),
        SettingDescription(
            "store.optimizeCoding", shapes: [.store], examples: [.bool(false), .bool(true)],
            read: { s, _, _, v in s.store.optimizeCoding = try v.boolean() },
            text: { String($0.store.optimizeCoding) }),
        SettingDescription(
            "archive.className", shapes: [.archive], examples: [.string("BNRItem"), .string("Item")],
            read: { s, _, _, v in s.archive.className = try v.string() }, text: { $0.archive.className }),
        SettingDescription(
            "archive.fileName", shapes: [.archive], examples: [.string("items.archive"), .string("all.archive")],
            read: { s, _, _, v in s.archive.fileName = try v.string() }, text: { $0.archive.fileName }),
        SettingDescription(
            "limits.maxPixels", flag: "--max-pixels", "N", help: "refuse sources with more pixels than N",
            docs: OptionDocumentation(
                "refuse sources with more pixels", .free("pixels"), "Refuse sources with more pixels than\n.Ar N ."),
            shapes: [.thumbnail, .store], examples: [.number("268402689"), .number("1000000")],
            read: { s, _, _, v in s.limits.maxPixels = try v.whole(1...9e18, "must be a positive whole number") },
            text: { String($0.limits.maxPixels) }),
        SettingDescription(
            "limits.failOn", flag: "--fail-on", "LEVEL",
            help:
                "none, truncated, error or warning (libvips fail_on;\nwarning also fails items whose decoders warned)",
            docs: OptionDocumentation(
                "decode strictness", .choices(PipelineSettings.FailOn.allCases.map(\.rawValue)),
                ".Cm none , truncated , error\nor\n.Cm warning\n(libvips fail_on;\n.Cm warning\nalso fails items whose decoders warned)."
            ),
            shapes: [.thumbnail, .store], examples: [.string("truncated"), .string("error")],
            read: { s, _, _, v in s.limits.failOn = try v.choice(FailOn.self) }, text: { $0.limits.failOn.rawValue }),
        SettingDescription(
            "limits.maxFileBytes", shapes: [.thumbnail, .store], examples: [.number("0"), .number("1000000")],
            read: { s, _, _, v in
                s.limits.maxFileBytes = try v.whole(0...9e18, "must be a whole number, 0 for no limit")
            }, text: { String($0.limits.maxFileBytes) }),
        SettingDescription(
            "limits.formats", flag: "--formats", "LIST",
            help: "loaders a source may use (default: jpeg,png,webp,\nheif,tiff,gif,jxl; e.g. add svg, jp2k, magick)",
            docs: OptionDocumentation(
                "loaders a source may use", .formats,
                "Loaders a source may use, comma-separated (default:\n.Li jpeg,png,webp,heif,tiff,gif,jxl ;\nalso\n.Li jp2k , svg , pdf , magick , openexr , fits , rad , ppm ,\n.Li analyze , mat , vips , csv , matrix , openslide ) ."
            ),
            shapes: [.thumbnail, .store], examples: [.string("jpeg,png"), .string("jpeg")],
            read: { s, _, _, v in
                var formats: [ImageFormat] = []
                for name in try v.names() where !name.isEmpty {
                    guard let format = ImageFormat(rawValue: name.lowercased()) else {
                        throw v.bad(
                            "names an unknown format '\(name)' (known: \(ImageFormat.allCases.map(\.rawValue).joined(separator: ", ")))"
                        )
                    }
                    formats.append(format)
                }
                guard !formats.isEmpty else { throw v.bad("must name at least one format") }
                s.limits.formats = ImageFormats(formats)
            }, text: { $0.limits.formats.names }),
        SettingDescription(
            "limits.timeoutSeconds", flag: "--timeout", "S",
            help: "seconds one item may take before its worker is killed",
            docs: OptionDocumentation(
                "seconds one item may take", .free("seconds"), "Seconds one item may take before its worker is killed."),
            shapes: [.failure], examples: [.number("60"), .number("5")],
            read: { s, _, _, v in
                let n = try v.number()
                guard n >= 0, n <= 86_400 * 365 else { throw v.bad("must be 0 (no limit) to 31536000 seconds") }
                s.limits.timeoutSeconds = n
            }, text: { number($0.limits.timeoutSeconds) }),
        SettingDescription(
            "limits.workerMemoryBytes", shapes: [.failure], examples: [.number("0"), .number("2147483648")],
            read: { s, _, _, v in
                let n = try v.whole(0...9e18, "must be a whole number, 0 for no limit")
                guard n == 0 || n >= 64 * 1_048_576 else {
                    throw v.bad("must be 0 (no limit) or at least 67108864 (64 MiB)")
                }
                s.limits.workerMemoryBytes = n
            }, text: { String($0.limits.workerMemoryBytes) }),
    ]

    /// The description of the setting named `key`, if there is one.
    public static func description(of key: String) -> SettingDescription? {
        descriptions.first { $0.key == key }
    }

    /// Sets one setting by its dotted name (`thumbnail.scale`), as a pipeline file,
    /// `--set` or a flag (`origin`) gives it.
    /// - Throws: ``ThumbpipeError`` (65) naming `location` when the name or value is wrong.
    public mutating func set(
        _ key: String, _ value: JSONValue, at location: String, origin: SettingDescription.Origin = .file
    ) throws {
        guard let description = Self.description(of: key) else {
            throw ThumbpipeError(.dataError, "\(location): unknown setting '\(key)'")
        }
        try description.read(&self, value, origin, SettingValue(key: key, location: location, value: value))
    }

    /// Every setting with its value as text, in ``descriptions``' order.
    public var summary: [(key: String, value: String)] {
        Self.descriptions.map { ($0.key, $0.value(in: self)) }
    }

    /// The text every setting shaping `output` contributes to its fingerprint:
    /// `key=value` for each, in ``descriptions``' order.
    public func fingerprintText(of output: SettingDescription.Output) -> String {
        Self.descriptions.filter { $0.shapes.contains(output) }.map { "\($0.key)=\($0.value(in: self))" }
            .joined(separator: "|")
    }

    /// The `run` flags that set a setting, and their help lines.
    public static var flagHelp: String {
        descriptions.compactMap { d in d.flag.map { RunOptionDescription.helpText("\($0) \(d.flagValue)", d.help) } }
            .joined(separator: "\n")
    }

    /// A number as settings show it: `2`, `0.5`.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
