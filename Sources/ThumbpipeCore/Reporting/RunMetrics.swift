import Foundation

/// A run's figures for Prometheus, in the text format node-exporter's textfile
/// collector serves (`run --metrics FILE`): when the collection last ran and last
/// succeeded, how long it took, its items by outcome and the bytes it wrote,
/// every series labelled by collection. A failed night leaves the last success
/// where it was, so an alert on `time() - thumbpipe_last_success_timestamp_seconds`
/// fires when thumbnails stop being regenerated.
public struct RunMetrics: Sendable, Equatable {
    /// The collection's name: the `collection` label.
    public var collection: String
    /// When the run started.
    public var started: Date
    /// How long the whole command took, in seconds.
    public var seconds: Double
    /// The command's exit status (0 is a success).
    public var exitStatus: Int32
    /// When the collection last succeeded: this run when it did, else the
    /// previous file's (nil when none ever did).
    public var lastSuccess: Date?
    /// Items by outcome: done, failed, unchanged, moved, removed, kept (nil when the
    /// run ended before it had any: a usage or data error).
    public var items: [String: Int]?
    /// Store files and archive written, in bytes.
    public var bytesWritten: Int64

    /// The outcomes, in the order they are written.
    public static let outcomes = ["done", "failed", "unchanged", "moved", "removed", "kept"]

    /// The most of a previous file that is read (its own is a few hundred bytes).
    static let readLimit: Int64 = 1 << 20

    /// A finished run's metrics, from its report; the archive's bytes counted when it wrote one.
    public init(
        collection: String, started: Date, seconds: Double, exitStatus: Int32, report: RunReport?,
        archiveBytesWritten: Int64, previousSuccess: Date?
    ) {
        self.collection = collection
        self.started = started
        self.seconds = seconds
        self.exitStatus = exitStatus
        lastSuccess = exitStatus == 0 ? started : previousSuccess
        bytesWritten = (report?.storeBytesWritten ?? 0) + archiveBytesWritten
        guard let report else { return }
        let kept = report.failures.filter { $0.kept == true }.count
        let i = report.incremental
        items = [
            "done": max(0, report.counts.succeeded - i.unchanged - i.moved),
            "failed": report.failures.count - kept, "unchanged": i.unchanged, "moved": i.moved,
            "removed": i.removed, "kept": kept,
        ]
    }

    /// The file's text.
    public var text: String {
        let label = "collection=\"\(Self.escaped(collection))\""
        var lines: [String] = []
        func gauge(_ name: String, _ help: String, _ samples: [(String, String)]) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) gauge")
            for (labels, value) in samples { lines.append("\(name){\(labels)} \(value)") }
        }
        gauge(
            "thumbpipe_last_run_timestamp_seconds", "When the collection's last run started (Unix time).",
            [(label, Self.number(started.timeIntervalSince1970))])
        gauge(
            "thumbpipe_last_success_timestamp_seconds",
            "When the collection's last run that exited 0 started (Unix time); a failed run leaves it.",
            lastSuccess.map { [(label, Self.number($0.timeIntervalSince1970))] } ?? [])
        gauge(
            "thumbpipe_run_duration_seconds", "How long the collection's last run took.",
            [(label, Self.number(seconds))])
        gauge("thumbpipe_last_exit_status", "The exit status of the collection's last run.", [(label, "\(exitStatus)")])
        if let items {
            gauge(
                "thumbpipe_items", "The collection's items in its last run, by outcome.",
                Self.outcomes.map { ("\(label),outcome=\"\($0)\"", "\(items[$0] ?? 0)") })
        }
        gauge(
            "thumbpipe_bytes_written", "Bytes of store files and archive the collection's last run wrote.",
            [(label, "\(bytesWritten)")])
        return lines.joined(separator: "\n") + "\n"
    }

    /// The last success a previous file at `path` records for `collection`; nil
    /// when there is none, or the file is not one this could have written (it is
    /// read as text, bounded, and any line that is not the one sought is skipped).
    public static func previousSuccess(in path: String, collection: String) -> Date? {
        guard let data = FileDescriptor.contents(ofRegularFile: path, limit: readLimit) else { return nil }
        let prefix = "thumbpipe_last_success_timestamp_seconds{collection=\"\(escaped(collection))\"} "
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(prefix) {
            guard let seconds = Double(line.dropFirst(prefix.count)), seconds.isFinite, seconds > 0 else { return nil }
            return Date(timeIntervalSince1970: seconds)
        }
        return nil
    }

    /// A label value as the text format escapes it: backslash, quote, newline.
    static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// A number as the text format writes it: at most millisecond precision, no exponent.
    static func number(_ value: Double) -> String { String(format: "%.3f", value) }
}
