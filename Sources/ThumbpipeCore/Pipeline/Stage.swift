/// The named stages of thumbpipe's pipeline, as reports and traces name them.
public enum Stage: String, Sendable, CaseIterable, Codable {
    /// Sniffing the source, finding its loader and reading its header.
    case header
    /// Decoding the source's pixels (in full, or shrunk on load for a thumbnail).
    case decode
    /// Converting decoded pixels to 8-bit sRGB through their profile.
    case colour
    /// Aspect-fill scaling, centre crop and orientation.
    case scale
    /// The rounded-rectangle mask.
    case clip
    /// PNG encoding of the thumbnail.
    case encode
    /// Encoding the full-size JPEG store file (what remains of the store's
    /// streaming pipeline once decoding and colour are taken out).
    case store
    /// Flushing, closing and renaming the store file into place.
    case write
    /// Writing the item archive.
    case archive
    /// Recording the item in the incremental state.
    case state
}

extension Stage {
    /// What the stage's time measures, in one sentence: the one definition
    /// report.html shows beside its tables (and docs/ENGINE.md's *Profiling* repeats).
    public var definition: String {
        switch self {
        case .header:
            "Sniffing the source's signature, finding its loader and reading its header (size, orientation, EXIF date); no pixels."
        case .decode:
            "Decoding the source's pixels (a JPEG's planes, band by band, on the plane path): in full for the store (inside the encoder's pull, timed apart), or shrunk on load for a thumbnail."
        case .colour:
            "Converting decoded pixels to 8-bit sRGB through their ICC profile (tables for matrix/TRC profiles, lcms otherwise); nothing for sRGB."
        case .scale:
            "Aspect-fill scaling, centre crop and orientation of the thumbnail (the tap's Lanczos3 over the crop, or libvips's resize)."
        case .clip:
            "The rounded-rectangle mask over the thumbnail's pixels."
        case .encode:
            "PNG encoding of the thumbnail."
        case .store:
            "Encoding the full-size JPEG store file: what remains of the store's streaming pull once decode and colour are taken out (on the plane path: encoding the planes' bands, turned upright)."
        case .write:
            "Flushing, closing and renaming the store file into place (in the parent, after the worker's reply)."
        case .archive:
            "Writing the item archive (in the parent: encoding, or copying unchanged items' bytes)."
        case .state:
            "Recording items in the incremental state (SQLite, in the parent)."
        }
    }
}
