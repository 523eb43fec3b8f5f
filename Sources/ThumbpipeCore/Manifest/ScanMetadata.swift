import Dispatch
import Foundation
import Synchronization

/// What `scan` reads of each photo for the manifest it writes: its title and
/// description, read as a run reads them (``PhotoMetadata`` and the sidecars,
/// by ``ItemLedger/title(of:)``), in confined workers: a job that makes nothing
/// reads the header and the sidecars and decodes no pixels.
public enum ScanMetadata {
    /// A photo's title and description; nil fields when it has none, or could not be read.
    public struct Read: Sendable, Equatable {
        public var title: String?
        public var description: String?
        /// Where the library places the photo (Takeout's `geoData`).
        public var place: GeoPoint?
    }

    /// Reads `paths` with `jobs` workers (in a scratch folder of their own).
    /// - Returns: one ``Read`` per path, in order, and the warnings of the photos
    ///   whose metadata could not be read (their lines keep the file's name).
    public static func read(
        _ paths: [String], jobs: Int, executable: String = RunOptions.currentExecutable,
        sandbox: SandboxMode = .auto
    ) throws -> (reads: [Read], warnings: [String]) {
        guard !paths.isEmpty else { return ([], []) }
        let temporary = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        let scratch = temporary + "/thumbpipe-scan-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)"
        let output = OutputFolder(scratch)
        try FileSystem.createFolder(output.layout.work, intermediate: true)
        defer {
            OutputFolder.empty(scratch)
            try? FileSystem.removeFolder(scratch)
        }
        let supervisor = try Supervisor(
            executable: executable, settings: PipelineSettings(), output: output, sandbox: sandbox)
        defer {
            supervisor.shutDown()
            supervisor.reapExiting()
        }
        let slots = max(1, min(jobs, paths.count))
        let results = Mutex([Read](repeating: Read(), count: paths.count))
        let warnings = Mutex([String]())
        let failure = Mutex<(any Error)?>(nil)
        DispatchQueue.concurrentPerform(iterations: slots) { slot in
            for index in stride(from: slot, to: paths.count, by: slots) {
                do {
                    let read = try readOne(paths[index], index: index, slot: slot, supervisor: supervisor)
                    results.withLock { $0[index] = read.read }
                    if let warning = read.warning { warnings.withLock { $0.append(warning) } }
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                    return
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return (results.withLock { $0 }, warnings.withLock { $0 })
    }

    private static func readOne(_ path: String, index: Int, slot: Int, supervisor: Supervisor) throws -> (
        read: Read, warning: String?
    ) {
        var job = ItemJob(
            index: index, itemKey: "scan-\(index)", source: path, makeThumbnail: false, makeStore: false,
            hashSource: false)
        job.sidecars = Sidecars.read(for: path).sidecars
        let outcome = try supervisor.outcome(of: try supervisor.submit(job, slot: slot), slot: slot)
        guard let header = outcome.header else {
            let why = outcome.failure?.message ?? outcome.writeError ?? "not read"
            return (Read(), "\(path): \(why): named by its file")
        }
        let description =
            header.sidecars.takeoutDescription ?? header.sidecars.xmp?.description
            ?? header.embedded.description
        return (
            Read(title: ItemLedger.title(of: header), description: description, place: header.sidecars.takeoutPlace),
            nil
        )
    }
}
