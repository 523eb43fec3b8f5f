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
