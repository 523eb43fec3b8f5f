import Foundation
import Synchronization

/// Durations per stage across a run, summarised as p50 / p95 / max.
public final class StageTimings: Sendable {
    private let samples = Mutex<[Stage: [Double]]>([:])

    /// Creates an empty collection.
    public init() {}

    /// Records one item's span of each stage, in seconds.
    public func record(_ spans: [Stage: Double]) {
        samples.withLock { all in
            for (stage, seconds) in spans { all[stage, default: []].append(seconds) }
        }
    }

    /// Per stage: count, p50, p95 and max in milliseconds, and the total in seconds.
    public func summary() -> [String: Any] {
        samples.withLock { all in
            var result: [String: Any] = [:]
            for (stage, values) in all where !values.isEmpty {
                let sorted = values.sorted()
                func percentile(_ p: Double) -> Double {
                    let rank = Int((p * Double(sorted.count - 1)).rounded())
                    return sorted[min(sorted.count - 1, max(0, rank))]
                }
                result[stage.rawValue] =
                    [
                        "count": sorted.count,
                        "p50Ms": Self.round(percentile(0.5) * 1000),
                        "p95Ms": Self.round(percentile(0.95) * 1000),
                        "maxMs": Self.round(sorted.last! * 1000),
                        "totalSeconds": Self.round(sorted.reduce(0, +)),
                    ] as [String: Any]
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
