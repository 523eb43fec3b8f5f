import Foundation

/// Writes `.thumbpipe/report.json`: counts, settings, per-stage timings,
/// throughput, peak RSS and every failure.
public enum RunReport {
    /// thumbpipe's version, as `--version` prints it.
    public static let version = "0.1.0"

    /// The report as a JSON object.
    public static func json(
        result: RunResult, manifest: Manifest, settings: PipelineSettings, options: RunOptions, timings: StageTimings
    ) -> [String: Any] {
        let seconds = max(result.seconds, 1e-9)
        return [
            "thumbpipeVersion": version,
            "manifest": manifest.path,
            "output": options.outputFolder,
            "jobs": options.jobs,
            "counts": [
                "items": result.total,
                "succeeded": result.succeeded,
                "failed": result.failures.count,
                "withoutImage": result.withoutImage,
            ],
            "settings": settings.summary,
            "stages": timings.summary(),
            "throughput": [
                "seconds": StageTimings.round(result.seconds),
                "itemsPerSecond": StageTimings.round(Double(result.total) / seconds),
                "imagesPerSecond": StageTimings.round(Double(result.succeeded + result.failures.count) / seconds),
                "sourceMegabytesPerSecond": StageTimings.round(Double(result.sourceBytes) / 1e6 / seconds),
            ],
            "peakRSSBytes": ProcessMemory.peakResidentBytes(),
            "incremental": [
                "new": result.classes[.new] ?? 0, "changed": result.classes[.changed] ?? 0,
                "unchanged": result.classes[.unchanged] ?? 0, "removed": result.classes[.removed] ?? 0,
                "decoded": result.decodedItems, "timeSavedSeconds": StageTimings.round(result.timeSavedSeconds),
            ],
            "failures": result.failures.map { failure in
                [
                    "line": failure.line,
                    "itemKey": failure.itemKey,
                    "itemName": failure.itemName,
                    "source": failure.source,
                    "stage": failure.stage.rawValue,
                    "message": failure.message,
                ] as [String: Any]
            },
        ]
    }

    /// Writes the report atomically to `OUT/.thumbpipe/report.json`.
    /// - Throws: ``ThumbpipeError`` (74) when it cannot be written.
    public static func write(_ report: [String: Any], outputFolder: String) throws {
        let data: Data
        do {
            data = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys])
        } catch {
            throw ThumbpipeError(.software, "cannot encode the report: \(error)")
        }
        try TemporaryFile.write(data + Data("\n".utf8), to: outputFolder + "/.thumbpipe/report.json")
    }
}
