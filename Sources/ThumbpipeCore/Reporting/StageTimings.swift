import Foundation
import Synchronization

/// Durations per stage across a run, summarised as p50 / p95 / max.
///
/// Samples go into log-spaced buckets (2 % wide), so memory stays the same
/// however many items a run has, and percentiles are within 2 %.
public final class StageTimings: Sendable {
    private typealias Histogram = DurationHistogram
    private let histograms = Mutex<[Stage: Histogram]>([:])

    /// Creates an empty collection.
    public init() {}

    private static func bucket(_ seconds: Double) -> Int { DurationHistogram.bucket(seconds) }

    private static func value(ofBucket bucket: Int) -> Double { DurationHistogram.value(ofBucket: bucket) }

    /// Records one item's time in each stage, in seconds.
    public func record(_ spans: [Stage: Double]) {
        histograms.withLock { all in
            for (stage, seconds) in spans { all[stage, default: Histogram()].add(seconds) }
        }
    }

    /// Records `items` items' time in one stage, measured together (items
    /// without a photo are not timed one by one): each counts at the average.
    public func record(_ stage: Stage, seconds: Double, items: Int) {
        guard items > 0 else { return }
        let average = seconds / Double(items)
        histograms.withLock { $0[stage, default: Histogram()].add(average, count: items) }
    }

    /// One stage's figures in a report.
    public struct Summary: Sendable, Codable, Equatable {
        /// How many items ran the stage.
        public var count: Int
        /// Median and 95th percentile in milliseconds (absent in a merged report).
        public var p50Ms: Double?
        public var p95Ms: Double?
        /// The slowest item's time in milliseconds.
        public var maxMs: Double
        /// All items' time in seconds.
        public var totalSeconds: Double

        public init(count: Int, p50Ms: Double?, p95Ms: Double?, maxMs: Double, totalSeconds: Double) {
            self.count = count
            self.p50Ms = p50Ms
            self.p95Ms = p95Ms
            self.maxMs = maxMs
            self.totalSeconds = totalSeconds
        }

        /// Adds another part's figures (percentiles cannot be added, so they go).
        public func merged(with other: Summary) -> Summary {
            Summary(
                count: count + other.count, p50Ms: nil, p95Ms: nil, maxMs: max(maxMs, other.maxMs),
                totalSeconds: StageTimings.round(totalSeconds + other.totalSeconds))
        }
    }

    /// Per stage, the histogram as `[milliseconds at the bucket's upper edge, count]`
    /// pairs in rising order: a few hundred pairs at most, whatever the run's size.
    public func bucketCounts() -> [String: [[Double]]] {
        histograms.withLock { all in
            var result: [String: [[Double]]] = [:]
            for (stage, histogram) in all where histogram.count > 0 {
                result[stage.rawValue] = histogram.buckets.sorted { $0.key < $1.key }.map {
                    [Self.round(Self.value(ofBucket: $0.key) * 1000), Double($0.value)]
                }
            }
            return result
        }
    }

    /// Per stage: count, p50, p95 and max in milliseconds, and the total in seconds.
    public func summary() -> [String: Summary] {
        histograms.withLock { all in
            var result: [String: Summary] = [:]
            for (stage, histogram) in all where histogram.count > 0 {
                result[stage.rawValue] = Summary(
                    count: histogram.count, p50Ms: Self.round(histogram.percentile(0.5) * 1000),
                    p95Ms: Self.round(histogram.percentile(0.95) * 1000), maxMs: Self.round(histogram.maximum * 1000),
                    totalSeconds: Self.round(histogram.total))
            }
            return result
        }
    }

    static func round(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}

/// Durations in log-spaced buckets (2 % wide): constant memory however many are
/// added, percentiles within 2 %.
struct DurationHistogram: Sendable {
    var buckets: [Int: Int] = [:]
    var count = 0
    var total = 0.0
    var maximum = 0.0

    static let growth = 1.02
    static let smallest = 1e-6

    static func bucket(_ seconds: Double) -> Int {
        seconds <= smallest ? 0 : Int((log(seconds / smallest) / log(growth)).rounded(.up))
    }

    static func value(ofBucket bucket: Int) -> Double { smallest * pow(growth, Double(bucket)) }

    /// Adds `count` durations of `seconds` each.
    mutating func add(_ seconds: Double, count added: Int = 1) {
        buckets[Self.bucket(seconds), default: 0] += added
        count += added
        total += seconds * Double(added)
        maximum = max(maximum, seconds)
    }

    /// The `p` quantile (0…1), in seconds.
    func percentile(_ p: Double) -> Double {
        let rank = Int((p * Double(count)).rounded(.up))
        var seen = 0
        for (bucket, n) in buckets.sorted(by: { $0.key < $1.key }) {
            seen += n
            if seen >= rank { return min(Self.value(ofBucket: bucket), maximum) }
        }
        return maximum
    }
}

/// Reads this process's resident-set high-water mark (VmHWM) from /proc.
public enum ProcessMemory {
    /// Peak resident set size in bytes, or 0 where /proc is unavailable.
    public static func peakResidentBytes() -> Int {
        guard let status = FileSystem.text(of: "/proc/self/status") else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let digits = line.split(separator: " ").compactMap { Int($0) }
            return (digits.first ?? 0) * 1024
        }
        return 0
    }
}
