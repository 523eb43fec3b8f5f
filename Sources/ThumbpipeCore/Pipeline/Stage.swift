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

/// Why one item's image could not be processed; the run goes on without it.
public struct ItemFailure: Error, Sendable, Codable, CustomStringConvertible {
    /// The stage that failed.
    public var stage: Stage
    /// One line a user can act on, e.g. `truncated JPEG (Premature end of JPEG file)`.
    public var message: String
    /// Whether the failure is a circumstance of this run (a timeout, a crashed
    /// worker) rather than a property of the source: such items are tried again next run.
    public var transient = false

    /// Creates a failure at `stage`.
    public init(_ stage: Stage, _ message: String, transient: Bool = false) {
        self.stage = stage
        self.message = message
        self.transient = transient
    }

    public var description: String { message }

    /// The failure as the state records it: `stage: message`.
    public var recorded: String { "\(stage.rawValue): \(message)" }

    /// A failure read back from the state's `stage: message`.
    public init(recorded text: String) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        self.init(
            Stage(rawValue: parts[0]) ?? .decode, parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : text
        )
    }
}
