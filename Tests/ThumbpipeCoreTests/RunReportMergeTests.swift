import Foundation
import Testing

@testable import ThumbpipeCore

@Suite("Merging reports")
struct RunReportMergeTests {
    static func report(items: Int, failedLines: [Int], seconds: Double, peak: Int) -> RunReport {
        var report = RunReport()
        report.counts = RunReport.Counts(
            items: items, succeeded: items - failedLines.count, failed: failedLines.count, withoutImage: 1)
        report.failures = failedLines.map {
            FailureRecord(
                line: $0, itemKey: "k\($0)", itemName: "I\($0)", source: "p\($0).jpg", stage: .decode, message: "bad")
        }
        report.throughput.seconds = seconds
        report.peakRSSBytes = peak
        report.stages = ["decode": StageTimings.Summary(count: items, p50Ms: 5, p95Ms: 9, maxMs: 12, totalSeconds: 1)]
        return report
    }

    @Test("Counts summed, failures in manifest order, the longest part's time, the largest part's memory")
    func merged() {
        let a = Self.report(items: 10, failedLines: [9, 3], seconds: 4, peak: 300)
        let b = Self.report(items: 6, failedLines: [5], seconds: 7, peak: 200)
        let merged = RunReport.merged([a, b], from: ["part-0", "part-1"])
        #expect(merged.counts == RunReport.Counts(items: 16, succeeded: 13, failed: 3, withoutImage: 2))
        #expect(merged.failures.map(\.line) == [3, 5, 9])
        #expect(merged.throughput.seconds == 7 && merged.peakRSSBytes == 300)
        #expect(merged.stages["decode"]?.count == 16 && merged.stages["decode"]?.totalSeconds == 2)
        #expect(merged.mergedFrom == ["part-0", "part-1"])
        #expect(RunReport.merged([], from: []).counts == RunReport.Counts())
    }
}
