import Foundation

/// How a run is carried out.
public struct RunOptions: Sendable {
    /// `--prefer-exif-date`: a photo's EXIF date wins over its Takeout sidecar's.
    public var preferEXIFDate = false
    /// `--time-zone`: the zone of photo times that name no offset (``ItemLedger/timeZone``).
    public var timeZone = TimeZone.current
    /// The output folder (created when missing).
    public var output: OutputFolder
    /// Worker processes; each runs one item at a time.
    public var jobs: Int
    /// Items that may be in flight ahead of the archive writer; bounds memory.
    public var window: Int
    /// The `thumbpipe` executable the workers run (`thumbpipe __worker`).
    public var workerExecutable: String
    /// The output folder's lock, when the caller already holds it (else the run takes it).
    public var lock: OutputLock?
    /// How workers are confined (``Sandbox``).
    public var sandbox: SandboxMode = .auto

    /// Creates options; `window` defaults to four items per job, the worker
    /// executable to this process's own.
    public init(
        output: OutputFolder, jobs: Int, window: Int? = nil, workerExecutable: String? = nil, lock: OutputLock? = nil
    ) {
        self.lock = lock
        self.output = output
        self.jobs = max(1, jobs)
        self.window = max(2, window ?? 4 * max(1, jobs))
        self.workerExecutable = workerExecutable ?? Self.currentExecutable
    }

    /// This process's executable, as the kernel knows it.
    public static var currentExecutable: String {
        FileSystem.linkDestination("/proc/self/exe") ?? CommandLine.arguments[0]
    }
}
