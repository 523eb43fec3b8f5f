import Dispatch
import Foundation
import ThumbpipeCore

/// `thumbpipe run`: a manifest in, an output folder out.
enum RunCommand {
    static let help = """
        USAGE: thumbpipe run MANIFEST [options]

        Reads MANIFEST (.jsonl/.ndjson one object per line, .json an array, .csv with a
        header row) and writes OUT/items.archive, one full-size JPEG per item named by
        its itemKey, and OUT/.thumbpipe/report.json.

        OPTIONS:
          -o, --output DIR          output folder (default: out)
          --pipeline NAME|FILE      pipeline settings (default: homepwner, from pipelines/)
          -j, --jobs N              worker threads (default: the number of cores, \(ProcessInfo.processInfo.activeProcessorCount) here)
          --width PT, --height PT   thumbnail canvas in points
          --scale S                 pixels per point
          --corner-radius PT        corner radius in points
          --quality Q               store JPEG quality, 0-1 (0.5 = libvips Q=50)
          --max-pixels N            refuse sources with more pixels than N
          --fail-on LEVEL           none, truncated, error or warning (libvips fail_on)
          --set KEY=VALUE           any pipeline setting, e.g. --set thumbnail.scale=3
          --trace FILE              write a Chrome trace (one span per stage per item, a
                                    track per worker) that opens in Perfetto
          --force                   redo every item, whatever the previous run did
          --dry-run                 print what a run would do (new, changed, unchanged,
                                    removed) and write nothing; with --json, as JSON
          --verify-content          re-hash sources and store files instead of trusting
                                    their size and modification time
          --shard K/N               do only the items whose itemKey hashes to shard K of N
                                    (0 ≤ K < N), as a partial output for 'thumbpipe merge'
          -q, --quiet               no progress bar
          -h, --help                this help

        Exit status: 0 all items done, 1 some items failed (listed on stderr and in
        the report), 64 bad command line, 65 bad manifest or pipeline file, 66 input
        cannot be opened, 73 output cannot be created, 74 read/write failure.
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = Arguments.forCommand(argv, help: help) else { return 0 }
        let output = try args.option("-o", "--output") ?? "out"
        let pipelineName = try args.option("--pipeline") ?? "homepwner"
        let tracePath = try args.option("--trace")
        let force = args.flag("--force")
        let dryRun = args.flag("--dry-run")
        let json = args.flag("--json")
        let verifyContent = args.flag("--verify-content")
        let shard = try args.option("--shard").map { try Shard(parsing: $0) }
        let jobs =
            try args.option("-j", "--jobs").map {
                try Int(option: $0, name: "--jobs", range: 1...256)
            } ?? ProcessInfo.processInfo.activeProcessorCount
        var overrides: [(String, String)] = []
        for (flag, key) in [
            ("--width", "thumbnail.width"), ("--height", "thumbnail.height"), ("--scale", "thumbnail.scale"),
            ("--corner-radius", "thumbnail.cornerRadius"), ("--quality", "store.quality"),
            ("--max-pixels", "limits.maxPixels"), ("--fail-on", "limits.failOn"),
        ] {
            if let value = try args.option(flag) { overrides.append((key, value)) }
        }
        for pair in try args.options("--set") {
            guard let eq = pair.firstIndex(of: "=") else {
                throw ThumbpipeError(.usage, "--set takes KEY=VALUE, not '\(pair)'")
            }
            overrides.append((String(pair[..<eq]), String(pair[pair.index(after: eq)...])))
        }
        let positionals = try args.finish(command: "run")
        guard positionals.count == 1 else {
            throw ThumbpipeError(
                .usage,
                positionals.isEmpty
                    ? "run needs a MANIFEST (see 'thumbpipe run --help')"
                    : "run takes one MANIFEST, got \(positionals.count)")
        }

        var settings = try PipelineSettings.load(path: try PipelineSettings.locate(pipelineName))
        for (key, value) in overrides {
            let json: JSONValue = Double(value) != nil ? .number(value) : .string(value)
            do {
                try settings.set(key, json, at: "command line")
            } catch let error as ThumbpipeError {
                throw ThumbpipeError(.usage, error.message)
            }
        }
        do {
            try settings.validate(at: "command line")
        } catch let error as ThumbpipeError {
            throw ThumbpipeError(.usage, error.message)
        }

        let fullManifest = try Manifest.read(path: positionals[0])
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
                positions: positions)
        }
        let manifestName = URL(fileURLWithPath: manifest.path).lastPathComponent

        if dryRun {
            let statePath = RunState.path(in: output)
            let state =
                FileManager.default.fileExists(atPath: statePath) ? try RunState(folder: output, readOnly: true) : nil
            let plan = try IncrementalPlan.make(
                manifest: manifest, settings: settings, state: state, outputFolder: output, force: force,
                verifyContent: verifyContent)
            printPlan(plan, manifest: manifest, json: json)
            return 0
        }
        try BatchRunner.prepareOutputFolder(output)
        let state = try RunState(folder: output)
        let plan = try IncrementalPlan.make(
            manifest: manifest, settings: settings, state: state, outputFolder: output, force: force,
            verifyContent: verifyContent)
        let options = RunOptions(outputFolder: output, jobs: jobs)
        let runner = BatchRunner(manifest: manifest, settings: settings, options: options)
        runner.plan = plan
        runner.state = state
        if let tracePath {
            runner.trace = try TraceWriter(path: tracePath, workers: jobs)
        }
        let total = manifest.items.count
        runner.onFailure = { failure in
            terminal.diagnostic("\(manifestName):\(failure.line): \(failure.source): \(failure.message)")
        }
        runner.onProgress = { done in terminal.progress(done: done, total: total) }

        let cancel = CancellationFlag()
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { cancel.cancel(signal: number) }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }

        let result = try runner.run(cancel: cancel) { result in
            let report = RunReport.json(
                result: result, manifest: manifest, settings: settings, options: options, timings: runner.timings)
            try RunReport.write(report, outputFolder: output)
            try shardInfo?.write(in: output)
        }
        let counts = result.classes
        if (counts[.unchanged] ?? 0) + (counts[.changed] ?? 0) + (counts[.removed] ?? 0) > 0 {
            terminal.diagnostic(
                "thumbpipe: \(counts[.new] ?? 0) new, \(counts[.changed] ?? 0) changed, \(counts[.unchanged] ?? 0) unchanged, "
                    + "\(counts[.removed] ?? 0) removed; \(result.decodedItems) decoded")
        }
        let failed = result.failures.count
        let rate = Double(total) / max(result.seconds, 1e-9)
        terminal.diagnostic(
            "thumbpipe: \(total) items in \(String(format: "%.2f", result.seconds)) s (\(String(format: "%.1f", rate)) items/s): "
                + "\(result.succeeded) done, \(failed) failed, \(result.withoutImage) without image → \(output)/\(settings.archive.fileName)"
        )
        return failed > 0 ? 1 : 0
    }

    /// Prints a dry run's plan: counts, then one line per item that is not unchanged.
    static func printPlan(_ plan: IncrementalPlan, manifest: Manifest, json: Bool) {
        let counts = plan.counts
        if json {
            var items: [[String: Any]] = zip(manifest.items, plan.work).map { item, work in
                [
                    "itemKey": item.itemKey, "line": item.line, "class": work.itemClass.rawValue,
                    "thumbnail": work.needsThumbnail, "store": work.needsStore, "reason": work.reason,
                ]
            }
            items += plan.removed.map { ["itemKey": $0, "class": "removed", "reason": "not in the manifest"] }
            let object: [String: Any] = [
                "counts": Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }), "items": items,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]) {
                printOut(String(decoding: data, as: UTF8.self))
            }
            return
        }
        printOut(
            "plan: \(counts[.new] ?? 0) new, \(counts[.changed] ?? 0) changed, \(counts[.unchanged] ?? 0) unchanged, \(counts[.removed] ?? 0) removed"
        )
        for (item, work) in zip(manifest.items, plan.work) where work.itemClass != .unchanged {
            let outputs = [work.needsThumbnail ? "thumbnail" : nil, work.needsStore ? "store" : nil].compactMap { $0 }
            printOut("  \(work.itemClass.rawValue)\t\(item.itemKey)\t\(work.reason)\t\(outputs.joined(separator: "+"))")
        }
        for key in plan.removed { printOut("  removed\t\(key)") }
    }
}
