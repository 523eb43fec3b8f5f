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
        var request = RunRequest(
            input: positionals[0], output: OutputFolder(output),
            settings: try settings(pipelineName, overrides: overrides), jobs: jobs)
        request.recursive = recursive
        request.extensions = extensions
        request.shard = shard
        request.runId = runId
        request.force = force
        request.verifyContent = verifyContent
        request.pruneMissing = pruneMissing
        request.rebuildState = rebuildState
        request.maxRemoved = maxRemoved
        request.sandbox = sandbox
        request.html = !noHTML
        request.standardInputClosed = standardInputClosed

        let run = try Run.prepare(request, notice: terminal.diagnostic)
        for warning in run.fullManifest.warnings { terminal.warning(warning) }
        // --log and --trace never write over what the run reads or owns.
        let protected = run.protectedPaths
        let logTarget = try logPath.map { try OutputTarget.resolve($0, for: "--log", protecting: protected) }
        let traceTarget = try tracePath.map { try OutputTarget.resolve($0, for: "--trace", protecting: protected) }
        if let logTarget, let traceTarget, logTarget.kind == .file, logTarget.path == traceTarget.path {
            throw ThumbpipeError(.usage, "--log and --trace name the same file \(logTarget.path)")
        }
        if dryRun {
            let (plan, change) = try run.plan()
            try printPlan(plan, manifest: run.manifest, json: json, settingsChange: change)
            return 0
        }
        let log = try logTarget.map { try ItemLog(target: $0) }
        let trace = try traceTarget.map { try TraceWriter(target: $0, workers: jobs, sampleEvery: traceSample) }
        let cancel = CancellationFlag()
        signals.forward(to: cancel)
        let result = try run.execute(
            hooks: hooks(run, terminal: terminal, log: log), cancel: cancel, trace: trace, warn: terminal.warning)
        try log?.finish()
        printSummary(result, run: run, trace: trace, terminal: terminal)
        let failed = result.failures.count
        let known = result.failures.filter { $0.known == true }.count
        // A nightly job asks to hear only of news: failures it has not seen before.
        return (exitOnNewOnly ? failed - known : failed) > 0 ? 1 : 0
    }

    /// The pipeline `name` with the command line's settings over it, checked.
    static func settings(
        _ name: String, overrides: [(key: String, value: String, origin: SettingDescription.Origin)]
    ) throws -> PipelineSettings {
        var settings = try PipelineCatalog().resolve(name).settings
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
        return settings
    }

    /// What the terminal and `--log` hear as items finish.
    static func hooks(_ run: Run, terminal: Terminal, log: ItemLog?) -> RunHooks {
        let manifestName = run.manifestName
        let total = run.manifest.items.count
        var onItem: (@Sendable (ItemLogEntry) -> Void)? = nil
        if let log { onItem = { entry in log.write(entry) } }
        return RunHooks(
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
    }
}
