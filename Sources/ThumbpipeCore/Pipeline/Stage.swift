/// The named stages of thumbpipe's pipeline, as reports and traces name them.
public enum Stage: String, Sendable, CaseIterable, Codable {
    /// Reading the source: header, shrink-on-load decode, colour to sRGB.
    case decode
    /// Aspect-fill scaling, centre crop and orientation.
    case scale
    /// The rounded-rectangle mask.
    case clip
    /// PNG encoding of the thumbnail.
    case encode
    /// The full-size JPEG store file.
    case store
    /// Writing the item archive.
    case archive
    /// Recording the item in the incremental state.
    case state
}

/// Why one item's image could not be processed; the run goes on without it.
public struct ItemFailure: Error, Sendable, Codable, CustomStringConvertible {
    /// The stage that failed.
    public var stage: Stage
    /// One line a user can act on, e.g. `truncated JPEG (Premature end of JPEG file)`.
    public var message: String

    /// Creates a failure at `stage`.
    public init(_ stage: Stage, _ message: String) {
        self.stage = stage
        self.message = message
    }

    public var description: String { message }
}
