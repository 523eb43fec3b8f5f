import Foundation
import Synchronization

/// Durations per stage across a run, summarised as p50 / p95 / max.
///
/// Samples go into log-spaced buckets (2 % wide), so memory stays the same
/// however many items a run has, and percentiles are within 2 %.
public final class StageTimings: Sendable {
    private struct Histogram {
        var buckets: [Int: Int] = [:]
        var count = 0
        var total = 0.0
        var maximum = 0.0
    }
    private static let growth = 1.02
    private static let smallest = 1e-6
    private let histograms = Mutex<[Stage: Histogram]>([:])

    /// Creates an empty collection.
    public init() {}

    private static func bucket(_ seconds: Double) -> Int {
        seconds <= smallest ? 0 : Int((log(seconds / smallest) / log(growth)).rounded(.up))
    }

    private static func value(ofBucket bucket: Int) -> Double {
        smallest * pow(growth, Double(bucket))
    }

    /// Records one item's time in each stage, in seconds.
    public func record(_ spans: [Stage: Double]) {
        histograms.withLock { all in
            for (stage, seconds) in spans {
                var histogram = all[stage, default: Histogram()]
                histogram.buckets[Self.bucket(seconds), default: 0] += 1
                histogram.count += 1
                histogram.total += seconds
                histogram.maximum = max(histogram.maximum, seconds)
                all[stage] = histogram
            }
        }
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
                let sorted = histogram.buckets.sorted { $0.key < $1.key }
                func percentile(_ p: Double) -> Double {
                    let rank = Int((p * Double(histogram.count)).rounded(.up))
                    var seen = 0
                    for (bucket, count) in sorted {
                        seen += count
                        if seen >= rank { return min(Self.value(ofBucket: bucket), histogram.maximum) }
                    }
                    return histogram.maximum
                }
                result[stage.rawValue] = Summary(
                    count: histogram.count, p50Ms: Self.round(percentile(0.5) * 1000),
                    p95Ms: Self.round(percentile(0.95) * 1000), maxMs: Self.round(histogram.maximum * 1000),
                    totalSeconds: Self.round(histogram.total))
            }
            return result
        }
    }

    static func round(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}

/// Reads this process's resident-set high-water mark (VmHWM) from /proc.
public enum ProcessMemory {
    /// Peak resident set size in bytes, or 0 where /proc is unavailable.
    public static func peakResidentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let digits = line.split(separator: " ").compactMap { Int($0) }
            return (digits.first ?? 0) * 1024
        }
        return 0
    }
}

extension ProcessMemory {
    /// The current resident set size of process `pid` in bytes (from /proc/PID/statm), or 0.
    public static func residentBytes(pid: pid_t) -> Int {
        let fd = open("/proc/\(pid)/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 127) }
        guard n > 0 else { return 0 }
        let fields = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Samples the resident memory of a run, the parent and its live workers
/// together, every `interval`: the peak of the sum is what the machine held.
final class MemorySampler: Sendable {
    /// The most timeline points kept: past it, every other point goes and the spacing doubles.
    static let maxPoints = 600
    private let peak = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)
    private let points = Mutex<(list: [TimelinePoint], every: Double)>(([], 1))
    private let started = Spans.now
    private let workers: @Sendable () -> [pid_t]
    private let progress: @Sendable () -> Int

    /// Starts sampling; `workers` gives the live worker pids at each sample, and
    /// `progress` the items archived so far, recorded with the memory about once a second.
    init(
        interval: Double = 0.05, workers: @escaping @Sendable () -> [pid_t],
        progress: @escaping @Sendable () -> Int = { 0 }
    ) {
        self.workers = workers
        self.progress = progress
        let started = self.started
        let thread = Thread { [self] in
            var next = 0.0
            while running.load(ordering: .relaxed) {
                let total = sample(workers())
                let t = Double(Spans.now - started) / 1e9
                if t >= next {
                    next = record(TimelinePoint(t: StageTimings.round(t), items: progress(), rssBytes: total))
                }
                usleep(UInt32(interval * 1e6))
            }
            done.signal()
        }
        thread.name = "thumbpipe-memory"
        thread.start()
    }

    private func sample(_ workers: [pid_t]) -> Int {
        let total = workers.reduce(ProcessMemory.residentBytes(pid: getpid())) {
            $0 + ProcessMemory.residentBytes(pid: $1)
        }
        _ = peak.max(total, ordering: .relaxed)
        return total
    }

    /// Keeps a point; returns when the next one is due.
    private func record(_ point: TimelinePoint) -> Double {
        points.withLock { state in
            state.list.append(point)
            if state.list.count > Self.maxPoints {
                state.list = state.list.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
                state.every *= 2
            }
            return point.t + state.every
        }
    }

    /// Stops sampling; returns the highest total seen and the timeline.
    func stop() -> (peak: Int, timeline: [TimelinePoint]) {
        running.store(false, ordering: .relaxed)
        done.wait()
        // The last point: where the run ended.
        let t = Double(Spans.now - started) / 1e9
        _ = record(TimelinePoint(t: StageTimings.round(t), items: progress(), rssBytes: sample(workers())))
        return (peak.load(ordering: .relaxed), points.withLock { $0.list })
    }
}
