import Dispatch
import Foundation
import Synchronization
import ThumbpipeCore

/// `thumbpipe run`: a manifest in, an output folder out.
enum RunCommand {
    static let help = """
        USAGE: thumbpipe run MANIFEST|DIR|- [options]

        Reads MANIFEST (.jsonl/.ndjson one object per line, .json an array, .csv with a
        header row; or an existing items.archive, whose store files are carried over
        byte for byte and whose thumbnails are made again), or the images of folder DIR (as 'thumbpipe scan DIR' then 'run'
        would: same keys, same archive), or a JSONL manifest on standard input (-, image
        paths relative to the current folder), and writes OUT/items.archive, one
        full-size JPEG per item named by its itemKey, and OUT/.thumbpipe/report.json.

        OPTIONS:
          -o, --output DIR          output folder (default: out)
          -r, --recursive           with DIR: its sub-folders too
          --ext LIST                with DIR: only files with these extensions
          --pipeline NAME|FILE      pipeline settings (default: homepwner; see
                                    'thumbpipe pipeline --help' for where NAME is found)
          -j, --jobs N              worker processes (default: the number of cores, \(ProcessInfo.processInfo.activeProcessorCount) here)
        \(PipelineSettings.flagHelp)
          --set KEY=VALUE           any pipeline setting, e.g. --set thumbnail.scale=3
          --no-html                 do not write OUT/.thumbpipe/report.html
          --log FILE                one JSON line per item: key, name, line, source,
                                    action (new, changed, metadata, moved, unchanged,
                                    removed, kept, failed),
                                    reason, milliseconds
          --trace FILE              write a Chrome trace (each item's stage spans with
                                    its file, format and size, a track per worker)
                                    that opens in Perfetto; at most 256 MB (about
                                    130,000 items), past which items are counted
          --trace-sample N          with --trace: trace one item in N
          --force                   redo every item, whatever the previous run did
          --dry-run                 print what a run would do (new, changed, unchanged,
                                    removed) and write nothing
          --json                    with --dry-run: the plan as JSON
          --max-removed N|P%        refuse a run that would remove more of the previous
                                    run's items than this (default 10%); an empty
                                    manifest over a folder with items is always refused
          --verify-content          re-hash sources and store files instead of trusting
                                    their size and modification time
          --exit-on-failure WHEN    any (default): exit 1 when an item failed; new: only
                                    when a failure is not known from an earlier run (same
                                    source, same settings), so a nightly cron mails news
          --prune-missing           an item whose photo is missing loses its thumbnail and
                                    store file (by default they are kept, and reported)
          --rebuild-state           the state (.thumbpipe/state.sqlite) is damaged or lost:
                                    move it aside, adopt the archive's items and the store
                                    files, and make every item again
          --sandbox MODE            how workers are confined before reading a source:
                                    required, auto (default: what the kernel offers)
                                    or off (see 'Sandbox' in docs/GUIDE.md)
          --shard K/N               do only the items whose itemKey hashes to shard K of N
                                    (0 ≤ K < N), as a partial output for 'thumbpipe merge'
          --run-id ID               with --shard: the run this part belongs to (e.g. a
                                    Slurm job ID), recorded for 'merge --run-id ID'
          -q, --quiet               no progress bar
          -h, --help                this help

        Exit status: 0 all items done, 1 some items failed (listed on stderr and in
        the report), 64 bad command line, 65 bad manifest or pipeline file, 66 input
        cannot be opened, 70 --sandbox required cannot be had, 71 a worker process cannot be started, 73 output cannot be
        created, 74 read/write failure, 130/143 interrupted by SIGINT/SIGTERM.

        Every source is opened in a worker process: a source that hangs a decoder
        fails after limits.timeoutSeconds, one that crashes it fails alone, and the
        run goes on. Sources whose decoders warned are done but listed under
        "warnings" in the report.
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        // Caught from the very start, so that no moment of a run dies of them
        // with temporaries left; the run stops at once when they arrive.
        let signals = SignalCatcher([SIGINT, SIGTERM])
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let output = try args.option("-o", "--output") ?? "out"
        let pipelineName = try args.option("--pipeline") ?? PipelineCatalog.defaultName
        let tracePath = try args.option("--trace")
        let traceSample =
            try args.option("--trace-sample").map {
                try Int(option: $0, name: "--trace-sample", range: 1...1_000_000_000)
            } ?? 1
        let force = args.flag("--force")
        let dryRun = args.flag("--dry-run")
        let json = args.flag("--json")
        let verifyContent = args.flag("--verify-content")
        let pruneMissing = args.flag("--prune-missing")
        let rebuildState = args.flag("--rebuild-state")
        let exitOnNewOnly =
            try args.option("--exit-on-failure").map { value -> Bool in
                guard value == "any" || value == "new" else {
                    throw ThumbpipeError(.usage, "--exit-on-failure takes any or new, not '\(value)'")
                }
                return value == "new"
            } ?? false
        let sandbox =
            try args.option("--sandbox").map { value -> SandboxMode in
                guard let mode = SandboxMode(rawValue: value) else {
                    throw ThumbpipeError(.usage, "--sandbox takes required, auto or off, not '\(value)'")
                }
                return mode
            } ?? .auto
        let noHTML = args.flag("--no-html")
        let logPath = try args.option("--log")
        let recursive = args.flag("-r", "--recursive")
        let extensions = try args.option("--ext").map { Set($0.split(separator: ",").map(String.init)) }
        let maxRemoved = try args.option("--max-removed").map { try RemovalLimit(parsing: $0) } ?? .standard
        let shard = try args.option("--shard").map { try Shard(parsing: $0) }
        let runId = try args.option("--run-id").map(RunIdentity.parse)
        let jobs =
            try args.option("-j", "--jobs").map {
                try Int(option: $0, name: "--jobs", range: 1...256)
            } ?? ProcessInfo.processInfo.activeProcessorCount
        var overrides: [(key: String, value: String, origin: SettingDescription.Origin)] = []
        for setting in PipelineSettings.descriptions {
            if let flag = setting.flag, let value = try args.option(flag) {
                overrides.append((setting.key, value, .flag))
            }
        }
        for pair in try args.options("--set") {
            guard let eq = pair.firstIndex(of: "=") else {
                throw ThumbpipeError(.usage, "--set takes KEY=VALUE, not '\(pair)'")
            }
            overrides.append((String(pair[..<eq]), String(pair[pair.index(after: eq)...]), .file))
        }
        let positionals = try args.finish(command: "run")
        if runId != nil && shard == nil {
            throw ThumbpipeError(.usage, "--run-id goes with --shard K/N (it names the run a part belongs to)")
        }
        if json && !dryRun {
            throw ThumbpipeError(
                .usage, "--json goes with --dry-run (a run's figures are in OUT/.thumbpipe/report.json)")
        }
        guard positionals.count == 1 else {
            throw ThumbpipeError(
                .usage,
                positionals.isEmpty
                    ? "run needs a MANIFEST (see 'thumbpipe run --help')"
                    : "run takes one MANIFEST, got \(positionals.count)")
        }

        var settings = try PipelineCatalog().resolve(pipelineName).settings
        for (key, value, origin) in overrides {
            let json: JSONValue = Double(value) != nil ? .number(value) : .string(value)
            do {
                try settings.set(key, json, at: "command line", origin: origin)
            } catch let error as ThumbpipeError {
                throw ThumbpipeError(.usage, error.message)
            }
        }
        do {
            try settings.validate(at: "command line")
        } catch let error as ThumbpipeError {
            throw ThumbpipeError(.usage, error.message)
        }

        var scanned: FolderScan.Result? = nil
        let fullManifest = try loadManifest(
            positionals[0], recursive: recursive, extensions: extensions, settings: settings, output: output,
            terminal: terminal, scanned: &scanned)
        for warning in fullManifest.warnings { terminal.warning(warning) }
        var manifest = fullManifest
        var shardInfo: ShardInfo? = nil
        if let shard {
            let (part, positions) = shard.select(fullManifest)
            manifest = part
            shardInfo = ShardInfo(
                manifestHash: ContentHash.file(fullManifest.path) ?? "", manifestItems: fullManifest.items.count,
                settingsFingerprint: ShardInfo.fingerprint(settings), className: settings.archive.className,
                archiveFileName: settings.archive.fileName, shard: shard.index, shards: shard.count,
                positions: positions, runId: runId)
        }
        let manifestName = URL(fileURLWithPath: manifest.path).lastPathComponent
        // --log and --trace never write over what the run reads or owns.
        var protected = ProtectedPaths()
        if positionals[0] != "-" { protected.protect(file: positionals[0], as: "the manifest") }
        let items = fullManifest.items
        protected.protect(files: { items.indices.compactMap { items[$0].imagePath } }, as: "a source of the run")
        protected.protect(outputFolder: output, archiveFileName: settings.archive.fileName)
        let logTarget = try logPath.map { try OutputTarget.resolve($0, for: "--log", protecting: protected) }
        let traceTarget = try tracePath.map { try OutputTarget.resolve($0, for: "--trace", protecting: protected) }
        if let logTarget, let traceTarget, logTarget.kind == .file, logTarget.path == traceTarget.path {
            throw ThumbpipeError(.usage, "--log and --trace name the same file \(logTarget.path)")
        }

        if dryRun {
            let lock = try OutputLock.ifPresent(folder: output)
            defer { withExtendedLifetime(lock) {} }
            let statePath = RunState.path(in: output)
            let state =
                FileManager.default.fileExists(atPath: statePath) ? try RunState(folder: output, readOnly: true) : nil
            // What the run would refuse, the dry run refuses alike (a reserved key, a file in the way).
            try OutputGuard.check(manifest: manifest, settings: settings, state: state, outputFolder: output)
            let plan = try IncrementalPlan.make(
                manifest: manifest, settings: settings, state: state, outputFolder: output, force: force,
                verifyContent: verifyContent, pruneMissing: pruneMissing)
            try plan.checkRemovals(
                limit: maxRemoved, manifestItems: manifest.items.count, manifestName: manifestName, output: output)
            let change = try SettingsChange.since(lastRunOf: state, to: settings, plan: plan)
            try printPlan(plan, manifest: manifest, json: json, settingsChange: change)
            return 0
        }
        let memory = settings.limits.workerMemoryBytes
        if memory > 0, let minimum = Worker.minimumMemoryBytes(executable: RunOptions.currentExecutable),
            memory < minimum
        {
            throw ThumbpipeError(
                .usage,
                "limits.workerMemoryBytes is \(memory >> 20) MiB, but a worker maps about \((minimum >> 20) - 128) MiB "
                    + "before it reads any image: set at least \(minimum) (\(minimum >> 20) MiB), or 0 for no limit")
        }
        let support = Sandbox.probe()
        try Sandbox.check(sandbox, support: support)
        let lock = try OutputFolder.prepare(output)
        if rebuildState {
            let rebuilt = try StateRebuild.run(folder: output, manifest: manifest, settings: settings)
            terminal.warning(rebuilt.description)
        }
        // A refused run leaves no state behind: the next one is refused alike.
        let previousState =
            FileManager.default.fileExists(atPath: RunState.path(in: output)) ? try RunState(folder: output) : nil
        try OutputGuard.check(manifest: manifest, settings: settings, state: previousState, outputFolder: output)
        let state = try previousState ?? RunState(folder: output)
        let plan = try IncrementalPlan.make(
            manifest: manifest, settings: settings, state: state, outputFolder: output, force: force,
            verifyContent: verifyContent, pruneMissing: pruneMissing)
        try plan.checkRemovals(
            limit: maxRemoved, manifestItems: manifest.items.count, manifestName: manifestName, output: output)
        // Never a silent revert: a setting that differs from the last run's is said first.
        if let change = try SettingsChange.since(lastRunOf: state, to: settings, plan: plan) {
            terminal.warning(change.description)
        }
        var options = RunOptions(outputFolder: output, jobs: jobs, lock: lock)
        options.sandbox = sandbox
        let log = try logTarget.map { try ItemLog(target: $0) }
        var onItem: (@Sendable (ItemLogEntry) -> Void)? = nil
        if let log { onItem = { entry in log.write(entry) } }
        let total = manifest.items.count
        let hooks = RunHooks(
            onFailure: { failure in
                terminal.countFailure()
                terminal.diagnostic(
                    Terminal.shown("\(manifestName):\(failure.line): \(failure.source): \(failure.message)"))
            },
            onWarning: { warning in
                terminal.diagnostic(
                    Terminal.shown(
                        "\(manifestName):\(warning.line): \(warning.source): warning: \(warning.messages.joined(separator: "; "))"
                    ))
            },
            onProgress: { done in terminal.progress(done: done, total: total) },
            onItem: onItem)
        let trace = try traceTarget.map { try TraceWriter(target: $0, workers: jobs, sampleEvery: traceSample) }
        let runner = BatchRunner(
            manifest: manifest, settings: settings, options: options, plan: plan, state: state, trace: trace,
            hooks: hooks)
        let cancel = CancellationFlag()
        signals.forward(to: cancel)

        // The page is drawn on its own thread while the run writes its archive and state.
        let page = Mutex<String?>(nil)
        let drawn = DispatchGroup()
        let result = try runner.run(cancel: cancel) { result in
            var report = RunReport(
                result: result, manifest: manifest, settings: settings, options: options, timings: runner.timings)
            report.sandbox = result.sandbox ?? Sandbox.describe(sandbox, support: support)
            report.leftOut = scanned.map(RunReport.LeftOut.init)
            let json = try report.write(outputFolder: output)
            let written = report
            if !noHTML {
                drawn.enter()
                Thread {
                    let html = try? HTMLReport.render(justRun: written, written: json)
                    page.withLock { $0 = html }
                    drawn.leave()
                }.start()
            }
        }
        // After the archive is in place, under the run's lock: a part killed before
        // this keeps its earlier run's identity, so 'merge --run-id' refuses it.
        if var info = shardInfo {
            // Bound to the archive it describes: merge refuses a shard.json beside another part's archive.
            let archive = OutputFolder(output).layout.archive(settings.archive.fileName)
            info.archiveBytes = FileInfo(path: archive)?.size
            info.archiveHash = ContentHash.file(archive)
            try info.write(in: output)
        }
        try SettingsChange.record(settings, in: state)
        if let log {
            for item in plan.removed { log.write(ItemLogEntry(removed: item)) }
            try log.finish()
        }
        if !noHTML {
            do {
                drawn.wait()
                if let html = page.withLock({ $0 }) {
                    try HTMLReport.write(html, outputFolder: output)
                } else {
                    try HTMLReport.write(outputFolder: output)
                }
            } catch {
                terminal.warning("report.html not written: \(error)")
            }
        }
        if result.classes.contains(where: { $0.key != .new && $0.value > 0 }) {
            terminal.diagnostic("thumbpipe: \(result.planSummary); \(result.decodedItems) decoded")
            for move in result.moved.prefix(20) {
                terminal.diagnostic("  moved: \(Terminal.shown(move.itemName)) \(move.from) → \(move.to)")
            }
            if result.moved.count > 20 {
                terminal.diagnostic("  moved: … and \(result.moved.count - 20) more (see report.json)")
            }
            if !result.removed.isEmpty {
                terminal.diagnostic(IncrementalPlan.list(result.removed, limit: 20, prefix: "  removed: "))
            }
        }
        if let trace, trace.droppedItems > 0 {
            terminal.warning(
                "the trace reached its \(TraceWriter.defaultByteLimit >> 20) MB cap: \(trace.droppedItems) items after it are not in it; --trace-sample N traces one item in N over the whole run"
            )
        }
        if !result.duplicates.isEmpty {
            let items = result.duplicates.reduce(0) { $0 + $1.count }
            let capped = items >= RunState.duplicateItemLimit
            let count = capped ? "at least \(items)" : "\(items)"
            terminal.diagnostic(
                "thumbpipe: \(count) items share their photo with another (the same content): "
                    + DuplicateItem.line(result.duplicates.map { $0.map(\.itemName) })
                    + (result.duplicates.count > 5 || capped ? " (see duplicates in the report)" : ""))
        }
        if result.datesFromFileTimeCount > 0 {
            terminal.diagnostic(
                "thumbpipe: \(result.datesFromFileTimeCount) items are dated by their file's time (no EXIF date, or one in the future): see datesFromFileTime in the report"
            )
        }
        let failed = result.failures.count
        let known = result.failures.filter { $0.known == true }.count
        // The wall time of the whole command (planning, state, archive and report included),
        // not only the items' part: what a user timing the night sees.
        let wall = Date().timeIntervalSince(processStarted)
        let rate = Double(total) / max(wall, 1e-9)
        terminal.diagnostic(
            "thumbpipe: \(total) items in \(String(format: "%.2f", wall)) s (\(String(format: "%.1f", rate)) items/s): "
                + "\(result.succeeded) done\(result.warnings.isEmpty ? "" : " (\(result.warnings.count) with warnings)"), \(failed) failed\(known > 0 ? " (\(known) known from earlier runs)" : ""), \(result.withoutImage) without image → \(output)/\(settings.archive.fileName)"
        )
        // A nightly job asks to hear only of news: failures it has not seen before.
        return (exitOnNewOnly ? failed - known : failed) > 0 ? 1 : 0
    }
}
