import Foundation

/// Where an item failed: a stage of the pipeline, or what became of the worker
/// that ran it. Reports, `--log` and the state name it with its raw value.
public enum FailureStage: String, Sendable, CaseIterable, Codable {
    case header, decode, colour, scale, clip, encode, store, write, archive, state
    /// The item took longer than `limits.timeoutSeconds`; its worker was stopped.
    case timeout
    /// The worker died on the source (a signal, or an exit without a reply).
    case crash
    /// No worker could be started for the item, or it sent an unreadable reply.
    case worker
    /// The worker's sandbox refused what the decoder tried (or let it through).
    case sandbox

    /// The failure stage of a pipeline stage.
    public init(_ stage: Stage) {
        // Every pipeline stage is a failure stage of the same name.
        self = FailureStage(rawValue: stage.rawValue) ?? .decode
    }
}

/// Why one item's image could not be processed; the run goes on without it.
public struct ItemFailure: Error, Sendable, Codable, Equatable, CustomStringConvertible {
    /// Where it failed.
    public var stage: FailureStage
    /// One line a user can act on, e.g. `truncated JPEG (Premature end of JPEG file)`.
    public var message: String
    /// Whether the failure is a circumstance of this run (a timeout, a crashed
    /// worker, the machine) rather than a property of the source: such items are
    /// tried again next run, and never recorded as the source's failure.
    public var transient = false

    /// Creates a failure at `stage`.
    public init(_ stage: FailureStage, _ message: String, transient: Bool = false) {
        self.stage = stage
        self.message = message
        self.transient = transient
    }

    public var description: String { message }

    /// The failure in one line, as `--log` and the terminal show it: `decode: truncated JPEG (…)`.
    public var line: String { "\(stage.rawValue): \(message)" }

    /// A failure recorded by a state of schema 1 or 2 as `stage: message`.
    init(legacy text: String) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        if parts.count == 2, let stage = FailureStage(rawValue: parts[0]) {
            self.init(stage, parts[1].trimmingCharacters(in: .whitespaces))
        } else {
            self.init(.decode, text)
        }
    }
}

extension ItemFailure {
    /// Errors of the machine a decode runs on (libvips reports them with the
    /// system's words, e.g. writing its temporary): a full disk or quota, too
    /// many open files, a read-only or failing file system, a file-size limit.
    static let environmentCauses = [
        "no space left on device", "disk quota exceeded", "too many open files", "read-only file system",
        "file too large", "input/output error", "for writing",
    ]

    /// The one translation of an error met while making an item's outputs into its
    /// failure: a libvips error becomes a message a user can act on (what kind of
    /// damage, or that the machine refused), anything else its description.
    /// - Parameters:
    ///   - format: the source's format name for messages (`JPEG`).
    init(_ error: any Error, format: String, stage: FailureStage) {
        if let failure = error as? ItemFailure {
            self = failure
            return
        }
        guard let error = error as? VipsError else {
            self.init(stage, "\(error)")
            return
        }
        // libvips keeps one error buffer per process: when two items fail at
        // the same moment, one may find it already emptied by the other.
        let text =
            error.message == "failed" ? "no detail from libvips; the file may be truncated or corrupt" : error.message
        let lower = text.lowercased()
        // The machine, not the photo: the failure is reported, but not kept as
        // the source's (it is tried again next run).
        if let cause = Self.environmentCauses.first(where: { lower.contains($0) }) {
            self.init(
                stage, "the system refused while decoding \(format) (\(cause)), not the photo's fault (\(text))",
                transient: true)
            return
        }
        let what: String
        if lower.contains("corrupt jpeg data") || lower.contains("corrupt data") {
            what = "corrupt \(format)"
        } else if lower.contains("premature end") || lower.contains("truncated") || lower.contains("unexpected end")
            || lower.contains("out of data") || lower.contains("not enough data") || lower.contains("read error")
        {
            what = "truncated \(format)"
        } else if lower.contains("out of memory") {
            what = "out of memory decoding \(format) (limits.workerMemoryBytes caps a worker)"
        } else if lower.contains("not a known file format") || lower.contains("is not a known") {
            what = "not a supported image"
        } else {
            what = "cannot decode \(format)"
        }
        self.init(stage, "\(what) (\(text))")
    }
}
