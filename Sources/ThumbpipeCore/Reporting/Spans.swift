import Dispatch

/// The stage spans of one task: what ran, when and for how long, for the
/// report's timings and the Chrome trace.
public struct Spans: Sendable, Codable {
    /// One stage's run.
    public struct Span: Sendable, Codable {
        /// The stage.
        public var stage: Stage
        /// Start and end, in nanoseconds of the monotonic clock.
        public var start: UInt64
        public var end: UInt64
    }

    /// The spans in the order they ran.
    public private(set) var all: [Span] = []

    /// Creates an empty record.
    public init() {}

    /// The monotonic clock, in nanoseconds.
    public static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Runs `body` as a span of `stage`.
    public mutating func measure<T, E: Error>(_ stage: Stage, _ body: () throws(E) -> T) throws(E) -> T {
        let start = Self.now
        defer { all.append(Span(stage: stage, start: start, end: Self.now)) }
        return try body()
    }

    /// Splits the last span of `stage` into `parts` (stage, nanoseconds) laid back
    /// to back from its start, the rest keeping `stage`: for a streaming pipeline,
    /// whose stages interleave, the time each took, shown one after another.
    public mutating func split(lastOf stage: Stage, into parts: [(Stage, Int64)]) {
        guard let index = all.lastIndex(where: { $0.stage == stage }) else { return }
        let span = all[index]
        var cursor = span.start
        var pieces: [Span] = []
        for (part, nanoseconds) in parts where nanoseconds > 0 {
            let end = min(span.end, cursor + UInt64(nanoseconds))
            pieces.append(Span(stage: part, start: cursor, end: end))
            cursor = end
        }
        pieces.append(Span(stage: stage, start: cursor, end: span.end))
        all.replaceSubrange(index...index, with: pieces)
    }

    /// Adds another record's spans after these.
    public mutating func append(_ other: Spans) { all.append(contentsOf: other.all) }

    /// Seconds per stage, summed.
    public var totals: [Stage: Double] {
        var result: [Stage: Double] = [:]
        for span in all { result[span.stage, default: 0] += Double(span.end - span.start) / 1e9 }
        return result
    }
}
