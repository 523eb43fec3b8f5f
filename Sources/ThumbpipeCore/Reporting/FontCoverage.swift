import CFontconfig

/// The characters the installed fonts can draw, as fontconfig knows them. Pango
/// (and so libvips's text) chooses a font per character by this coverage; a
/// character no font has draws as a box, which the contact sheet reports instead
/// of leaving a person to wonder.
struct FontCoverage: ~Copyable {
    /// The union of every installed font's character set (nil when fontconfig
    /// has no configuration: then nothing is reported as uncovered).
    private let characters: OpaquePointer?

    init() {
        guard FcInit() != 0, let fonts = FcConfigGetFonts(nil, FcSetSystem) else {
            characters = nil
            return
        }
        let union = FcCharSetCreate()
        for index in 0..<Int(fonts.pointee.nfont) {
            var set: OpaquePointer? = nil
            if FcPatternGetCharSet(fonts.pointee.fonts[index], FC_CHARSET, 0, &set) == FcResultMatch, let set {
                _ = FcCharSetMerge(union, set, nil)
            }
        }
        characters = union
    }

    deinit { if let characters { FcCharSetDestroy(characters) } }

    /// Whether any font is installed at all.
    var hasFonts: Bool { characters.map { FcCharSetCount($0) > 0 } ?? false }

    /// The characters of `text` that no installed font has (whitespace, controls
    /// and joiners, which draw nothing, left out), each once, in order.
    func missing(in text: String) -> [Unicode.Scalar] {
        guard let characters else { return [] }
        var seen: Set<Unicode.Scalar> = []
        return text.unicodeScalars.filter { scalar in
            guard !Self.drawsNothing(scalar), FcCharSetHasChar(characters, scalar.value) == 0 else { return false }
            return seen.insert(scalar).inserted
        }
    }

    /// Spaces, controls, joiners and variation selectors: no glyph of their own.
    static func drawsNothing(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar.properties.generalCategory == .control
            || scalar.properties.generalCategory == .format || scalar.properties.isVariationSelector
    }
}
