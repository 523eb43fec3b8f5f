import Foundation
import ThumbpipeCore

/// `run --metrics FILE`: the run's ``RunMetrics`` written when it ends, however
/// it ends (a run refused for a usage or data error is a failed night too).
struct MetricsFile {
    let target: OutputTarget
    let collection: String
    let archive: String
    let started = Date()

    /// Resolves `path` as `--log` is resolved: never over the manifest, a source,
    /// or the output folder's own files.
    init(_ path: String, request: RunRequest, collection: String?) throws {
        var protected = ProtectedPaths()
        if request.input != "-" { protected.protect(file: request.input, as: "the manifest") }
        protected.protect(output: request.output, archiveFileName: request.settings.archive.fileName)
        target = try OutputTarget.resolve(path, for: "--metrics", protecting: protected)
        let name = URL(fileURLWithPath: request.output.path).standardizedFileURL.lastPathComponent
        self.collection = collection ?? (name.isEmpty ? "/" : name)
        archive = request.output.layout.archive(request.settings.archive.fileName)
    }

    /// Runs `body` and writes the metrics of what it came to: its status and report,
    /// or the exit status of the error it threw (then thrown on).
    func recording(_ body: () throws -> (status: Int32, report: RunReport?)) throws -> Int32 {
        do {
            let (status, report) = try body()
            try record(status: status, report: report)
            return status
        } catch let error as ThumbpipeError {
            try? record(status: error.exitStatus, report: nil)
            throw error
        } catch let error as RunCancelled {
            try? record(status: error.exitStatus, report: nil)
            throw error
        }
    }

    private func record(status: Int32, report: RunReport?) throws {
        // The archive's bytes count when this run wrote it (a night with nothing to do does not).
        let archiveInfo = FileInfo(path: archive)
        let wroteArchive = report != nil && (archiveInfo?.modificationDate ?? .distantPast) >= started
        let metrics = RunMetrics(
            collection: collection, started: started, seconds: Date().timeIntervalSince(started),
            exitStatus: status, report: report, archiveBytesWritten: wroteArchive ? archiveInfo?.size ?? 0 : 0,
            previousSuccess: RunMetrics.previousSuccess(in: target.path, collection: collection))
        try target.write(Data(metrics.text.utf8))
    }
}
