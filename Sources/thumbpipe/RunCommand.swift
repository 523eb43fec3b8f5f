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
        \(RunOptionDescription.optionsHelp)

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
        let line = try parse(&args)
        let positionals = try args.finish(command: "run")
        if line.json && !line.dryRun {
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
        var request = line.request(input: positionals[0], settings: try line.settings())
        request.standardInputClosed = standardInputClosed
        let body = {
            try run(
                Run.prepare(request, notice: { terminal.diagnostic($0) }), line: line, signals: signals,
                terminal: terminal)
        }
        guard let metrics = line.metrics, !line.dryRun else { return try body().status }
        return try MetricsFile(metrics, request: request, collection: line.collection).recording(body)
    }

    /// The command line's options and pipeline settings by flag (`--scale 3`,
    /// before `--set`'s: `--set` wins).
    static func parse(_ args: inout Arguments) throws -> RunCommandLine {
        var line = RunCommandLine()
        for option in RunOptionDescription.all {
            if option.value == nil {
                if args.flag(option.names) { try option.apply("", to: &line) }
            } else {
                let values = try args.values(option.names)
                for value in option.repeatable ? values : Array(values.suffix(1)) { try option.apply(value, to: &line) }
            }
        }
        // The pipeline's settings by flag (--scale 3), before --set's: --set wins.
        var flagged: [(key: String, value: String, origin: SettingDescription.Origin)] = []
        for setting in PipelineSettings.descriptions {
            if let flag = setting.flag, let value = try args.option(flag) {
                flagged.append((setting.key, value, .flag))
            }
        }
        line.overrides = flagged + line.overrides
        return line
    }

    /// Plans (`--dry-run`) or carries out a prepared run; returns the exit status
    /// and the run's report (none for a dry run).
    static func run(_ run: Run, line: RunCommandLine, signals: SignalCatcher, terminal: Terminal) throws -> (
        status: Int32, report: RunReport?
    ) {
        for warning in run.fullManifest.warnings { terminal.warning(warning) }
        // --log and --trace never write over what the run reads or owns.
        let protected = run.protectedPaths
        let logTarget = try line.log.map { try OutputTarget.resolve($0, for: "--log", protecting: protected) }
        let traceTarget = try line.trace.map { try OutputTarget.resolve($0, for: "--trace", protecting: protected) }
        if let logTarget, let traceTarget, logTarget.kind == .file, logTarget.path == traceTarget.path {
            throw ThumbpipeError(.usage, "--log and --trace name the same file \(logTarget.path)")
        }
        if line.dryRun {
            let (plan, change) = try run.plan()
            for text in PlanText.lines(plan, manifest: run.manifest, json: line.json, settingsChange: change) {
                try printOut(text)
            }
            return (0, nil)
        }
        let log = try logTarget.map { try ItemLog(target: $0) }
        let trace = try traceTarget.map {
            try TraceWriter(target: $0, workers: line.jobs, sampleEvery: line.traceSample)
        }
        let cancel = CancellationFlag()
        signals.forward(to: cancel)
        let result = try run.execute(
            hooks: hooks(run, terminal: terminal, log: log), cancel: cancel, trace: trace, warn: terminal.warning)
        try log?.finish()
        printSummary(result, run: run, trace: trace, terminal: terminal)
        let failed = result.failures.count
        let known = result.failures.filter { $0.known == true }.count
        // A nightly job asks to hear only of news: failures it has not seen before.
        return ((line.exitOnNewOnly ? failed - known : failed) > 0 ? 1 : 0, result)
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
                    Terminal.shown("\(manifestName):\(failure.line): \(failure.source): \(failure.message)"),
                    priority: .error)
            },
            onWarning: { warning in
                terminal.diagnostic(
                    Terminal.shown(
                        "\(manifestName):\(warning.line): \(warning.source): warning: \(warning.messages.joined(separator: "; "))"
                    ), priority: .warning)
            },
            onProgress: { done in terminal.progress(done: done, total: total) },
            onItem: onItem)
    }
}
