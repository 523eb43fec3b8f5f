import Dispatch
import Foundation
import Synchronization

/// What a run is asked to do: its input, its output folder, its settings and
/// its flags (`thumbpipe run`'s command line, as a value a library user fills in).
public struct RunRequest: Sendable {
    /// A manifest (`.jsonl`, `.ndjson`, `.json`, `.csv`), a folder of photos, an
    /// app's `items.archive`, or `-` for a JSONL manifest on standard input.
    public var input: String
    public var output: OutputFolder
    public var settings: PipelineSettings
    /// Worker processes.
    public var jobs: Int
    /// The choices beyond input, output, settings and jobs.
    public var flags = Flags()
    /// Standard input was closed when the process started (`run - <&-`).
    public var standardInputClosed = false
    /// The `thumbpipe` executable the workers run (`thumbpipe __worker`); nil for
    /// this process's own, which a library user that is not thumbpipe must set.
    public var workerExecutable: String? = nil

    /// A request to run `input` into `output` with `settings`, a worker per core.
    public init(
        input: String, output: OutputFolder, settings: PipelineSettings,
        jobs: Int = ProcessInfo.processInfo.activeProcessorCount
    ) {
        self.input = input
        self.output = output
        self.settings = settings
        self.jobs = jobs
    }
}

extension RunRequest {
    /// A run's choices beyond its input, output, settings and jobs, as `run`'s
    /// flags give them (``RunCommandLine`` holds the same value).
    public struct Flags: Sendable {
        /// With a folder: its sub-folders too, and only these extensions.
        public var recursive = false
        public var extensions: Set<String>? = nil
        /// Only the items whose key hashes to this shard, as a part for `merge`, and the run it belongs to.
        public var shard: Shard? = nil
        public var runId: String? = nil
        /// Redo everything; hash instead of trusting stamps; drop a missing source's outputs.
        public var force = false
        public var verifyContent = false
        public var pruneMissing = false
        /// `--prefer-exif-date`: a photo's EXIF date wins over its Takeout sidecar's.
        public var preferEXIFDate = false
        /// `--time-zone`: the zone of photo times that name no offset.
        public var timeZone = TimeZone.current
        /// The state is damaged or lost: adopt the archive and store files, make every item again.
        public var rebuildState = false
        /// The most of the previous run's items this run may remove.
        public var maxRemoved = RemovalLimit.standard
        public var sandbox = SandboxMode.auto
        /// Write `report.html` beside `report.json`.
        public var html = true

        public init() {}
    }
}

/// One run, as a library drives it: ``prepare(_:notice:)`` reads the input and
/// takes the shard; ``plan()`` is what a dry run prints; ``execute(hooks:cancel:trace:warn:)``
/// carries it out and writes the archive, the store, the state and the report.
public final class Run: Sendable {
    public let request: RunRequest
    /// The items this run does (its shard's, with `--shard`).
    public let manifest: Manifest
    /// The whole input, of which ``manifest`` is a shard.
    public let fullManifest: Manifest
    /// A folder run's scan, for what it left out.
    public let scanned: FolderScan.Result?
    /// What a shard records for `merge`.
    let shardInfo: ShardInfo?

    /// The manifest's file name, as messages name it (`items.jsonl:12: …`).
    public var manifestName: String { URL(fileURLWithPath: manifest.path).lastPathComponent }

    private init(request: RunRequest, manifest: Manifest, fullManifest: Manifest, scanned: FolderScan.Result?) {
        self.request = request
        self.manifest = manifest
        self.fullManifest = fullManifest
        self.scanned = scanned
        shardInfo = request.flags.shard.map { shard in
            let (_, positions) = shard.select(fullManifest)
            return ShardInfo(
                manifestHash: ContentHash.file(fullManifest.path) ?? "", manifestItems: fullManifest.items.count,
                settingsFingerprint: ShardInfo.fingerprint(request.settings),
                className: request.settings.archive.className, archiveFileName: request.settings.archive.fileName,
                shard: shard.index, shards: shard.count, positions: positions, runId: request.flags.runId)
        }
    }

    /// Reads the request's input and takes its shard.
    /// - Parameter notice: what the user should hear of the input (files a folder
    ///   run skips, thumbnails a migration keeps).
    /// - Throws: ``ThumbpipeError``: 64 for a request that contradicts itself, 65/66 for the input.
    public static func prepare(_ request: RunRequest, notice: (String) -> Void = { _ in }) throws -> Run {
        if request.flags.runId != nil && request.flags.shard == nil {
            throw ThumbpipeError(.usage, "--run-id goes with --shard K/N (it names the run a part belongs to)")
        }
        var scanned: FolderScan.Result? = nil
        let full = try loadManifest(request, scanned: &scanned, notice: notice)
        let manifest = request.flags.shard.map { $0.select(full).manifest } ?? full
        return Run(request: request, manifest: manifest, fullManifest: full, scanned: scanned)
    }

    /// What a file the run writes besides its output (`--log`, `--trace`) must
    /// never be: the manifest, a source, or a file of the output folder.
    public var protectedPaths: ProtectedPaths {
        var protected = ProtectedPaths()
        if request.input != "-" { protected.protect(file: request.input, as: "the manifest") }
        let items = fullManifest.items
        protected.protect(files: { items.indices.compactMap { items[$0].imagePath } }, as: "a source of the run")
        protected.protect(output: request.output, archiveFileName: request.settings.archive.fileName)
        return protected
    }

    /// The plan of the run, as a dry run prints it: refused where the run would
    /// be refused, and nothing written.
    public func plan() throws -> (plan: IncrementalPlan, settingsChange: SettingsChange?) {
        let output = request.output
        let lock = try OutputLock.ifPresent(output)
        defer { withExtendedLifetime(lock) {} }
        let state =
            FileSystem.exists(output.layout.state)
            ? try RunState(output: output, readOnly: true) : nil
        // What the run would refuse, the dry run refuses alike (a reserved key, a file in the way).
        try OutputGuard.check(manifest: manifest, settings: request.settings, state: state, output: output)
        let plan = try makePlan(state: state)
        return (plan, try SettingsChange.since(lastRunOf: state, to: request.settings, plan: plan))
    }

    private func makePlan(state: RunState?) throws -> IncrementalPlan {
        let plan = try IncrementalPlan.make(
            manifest: manifest, settings: request.settings, state: state, output: request.output,
            force: request.flags.force, verifyContent: request.flags.verifyContent,
            pruneMissing: request.flags.pruneMissing)
        try plan.checkRemovals(
            limit: request.flags.maxRemoved, manifestItems: manifest.items.count, manifestName: manifestName,
            output: request.output.path)
        return plan
    }

    /// Carries the run out: takes the output folder, plans against the previous
    /// run, runs every item and writes the store, the archive, the state and the
    /// report (and `shard.json` for a shard). Removed items are told to
    /// `hooks.onItem` after the others.
    /// - Parameter warn: what the user must be told on the way (a settings change
    ///   since the last run, a rebuilt state, a page that could not be written).
    /// - Throws: ``ThumbpipeError`` for a run that cannot be made (64, 65, 70–74),
    ///   ``RunCancelled`` when `cancel` was set.
    public func execute(
        hooks: RunHooks = RunHooks(), cancel: CancellationFlag = CancellationFlag(), trace: TraceWriter? = nil,
        warn: (String) -> Void = { _ in }
    ) throws -> RunReport {
        let settings = request.settings
        let output = request.output
        let executable = request.workerExecutable ?? RunOptions.currentExecutable
        try checkWorkerMemory(executable: executable)
        let support = Sandbox.probe()
        try Sandbox.check(request.flags.sandbox, support: support)
        let lock = try output.prepare()
        if request.flags.rebuildState {
            warn(try StateRebuild.run(output: output, manifest: manifest, settings: settings).description)
        }
        // A refused run leaves no state behind: the next one is refused alike.
        let previousState =
            FileSystem.exists(output.layout.state) ? try RunState(output: output) : nil
        try OutputGuard.check(manifest: manifest, settings: settings, state: previousState, output: output)
        let state = try previousState ?? RunState(output: output)
        let plan = try makePlan(state: state)
        // Never a silent revert: a setting that differs from the last run's is said first.
        if let change = try SettingsChange.since(lastRunOf: state, to: settings, plan: plan) {
            warn(change.description)
        }
        var options = RunOptions(
            output: output, jobs: request.jobs, workerExecutable: executable, lock: lock)
        options.sandbox = request.flags.sandbox
        options.preferEXIFDate = request.flags.preferEXIFDate
        options.timeZone = request.flags.timeZone
        let runner = BatchRunner(
            manifest: manifest, settings: settings, options: options, plan: plan, state: state, trace: trace,
            hooks: hooks)
        let page = PageDrawer()
        let report = try runner.run(cancel: cancel) { report in
            report.sandbox = report.sandbox ?? Sandbox.describe(request.flags.sandbox, support: support)
            report.leftOut = scanned.map(RunReport.LeftOut.init)
            let json = try report.write(to: output)
            if request.flags.html {
                page.draw(report, written: json, against: HTMLReport.Against.previous(in: output, before: report))
            }
        }
        try writeShardInfo()
        try SettingsChange.record(settings, in: state)
        if let onItem = hooks.onItem { for item in plan.removed { onItem(ItemLogEntry(removed: item)) } }
        if request.flags.html {
            do { try page.write(in: output) } catch { warn("report.html not written: \(error)") }
        }
        withExtendedLifetime(lock) {}
        return report
    }

    /// The report's page, drawn on its own thread while the run writes its archive and state.
    final class PageDrawer: Sendable {
        private let page = Mutex<String?>(nil)
        private let drawn = DispatchGroup()

        /// Starts drawing the page of `report` (written as `written`).
        func draw(_ report: RunReport, written: Data, against: HTMLReport.Against?) {
            drawn.enter()
            Thread { [self] in
                let html = try? HTMLReport.render(justRun: report, written: written, against: against)
                page.withLock { $0 = html }
                drawn.leave()
            }.start()
        }

        /// Writes the page once drawn (drawn again from report.json when drawing failed).
        func write(in output: OutputFolder) throws {
            drawn.wait()
            if let html = page.withLock({ $0 }) {
                try HTMLReport.write(html, in: output)
            } else {
                try HTMLReport.write(from: output)
            }
        }
    }

    /// Refuses a worker memory cap below what a worker maps before it reads an image.
    private func checkWorkerMemory(executable: String) throws {
        let memory = request.settings.limits.workerMemoryBytes
        if memory > 0, let minimum = Worker.minimumMemoryBytes(executable: executable), memory < minimum {
            throw ThumbpipeError(
                .usage,
                "limits.workerMemoryBytes is \(memory >> 20) MiB, but a worker maps about \((minimum >> 20) - 128) MiB "
                    + "before it reads any image: set at least \(minimum) (\(minimum >> 20) MiB), or 0 for no limit")
        }
    }

    /// A shard's `shard.json`, written after the archive is in place, under the run's
    /// lock (a part killed before this keeps its earlier run's identity, so
    /// 'merge --run-id' refuses it), bound to the archive it describes (merge
    /// refuses a shard.json beside another part's archive).
    private func writeShardInfo() throws {
        guard var info = shardInfo else { return }
        let archive = request.output.layout.archive(request.settings.archive.fileName)
        info.archiveBytes = FileInfo(path: archive)?.size
        info.archiveHash = ContentHash.file(archive)
        try info.write(in: request.output)
    }
}
