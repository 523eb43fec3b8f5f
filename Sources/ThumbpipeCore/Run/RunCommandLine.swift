import Foundation

/// `thumbpipe run`'s command line as values: the request's fields and the
/// command's own (where the log and trace go, a dry run, when to exit 1).
public struct RunCommandLine: Sendable {
    public var output = "out"
    public var pipeline = PipelineCatalog.defaultName
    /// Settings given by flag (`--scale 3`) or `--set KEY=VALUE`, in order.
    public var overrides: [(key: String, value: String, origin: SettingDescription.Origin)] = []
    public var jobs = ProcessInfo.processInfo.activeProcessorCount
    /// The run's choices, as the request takes them.
    public var flags = RunRequest.Flags()
    public var log: String? = nil
    public var trace: String? = nil
    public var traceSample = 1
    /// `--metrics FILE`: the run's Prometheus textfile metrics.
    public var metrics: String? = nil
    /// `--collection NAME`: the metrics' `collection` label (default: the output folder's name).
    public var collection: String? = nil
    public var dryRun = false
    public var json = false
    /// `--exit-on-failure new`: exit 1 only for failures not known from an earlier run.
    public var exitOnNewOnly = false

    public init() {}

    /// The request this command line makes of `input`, with `settings` resolved from it.
    public func request(input: String, settings: PipelineSettings) -> RunRequest {
        var request = RunRequest(input: input, output: OutputFolder(output), settings: settings, jobs: jobs)
        request.flags = flags
        return request
    }
}

/// One of `run`'s options: its names, the placeholder of its value (nil for a
/// flag), what `--help` says of it, what the manual and the completions say
/// of it, and how it sets the command line. The one table (``all``) parses
/// `run`, writes its `--help`, and generates the manual's option list and the
/// bash, zsh and fish completions of `run` (``RunOptionDocs``).
public struct RunOptionDescription: Sendable {
    public let names: [String]
    public let value: String?
    public let help: String
    /// The manual's and the completions' text.
    public let docs: OptionDocumentation
    /// Taken every time it is given (`--set`), not only the last time.
    public let repeatable: Bool
    let apply: @Sendable (inout RunCommandLine, String) throws -> Void

    private init(
        names: [String], value: String?, repeatable: Bool, help: String, docs: OptionDocumentation,
        apply: @escaping @Sendable (inout RunCommandLine, String) throws -> Void
    ) {
        self.names = names
        self.value = value
        self.help = help
        self.docs = docs
        self.repeatable = repeatable
        self.apply = apply
    }

    /// An option with a value, `VALUE` in the help.
    static func option(
        _ names: [String], _ value: String, repeatable: Bool = false, _ help: String, docs: OptionDocumentation,
        apply: @escaping @Sendable (inout RunCommandLine, String) throws -> Void
    ) -> RunOptionDescription {
        RunOptionDescription(names: names, value: value, repeatable: repeatable, help: help, docs: docs, apply: apply)
    }

    /// A flag: present or not.
    static func flag(
        _ names: [String], _ help: String, docs: OptionDocumentation,
        apply: @escaping @Sendable (inout RunCommandLine) -> Void
    ) -> RunOptionDescription {
        RunOptionDescription(names: names, value: nil, repeatable: false, help: help, docs: docs) { line, _ in
            apply(&line)
        }
    }

    /// Sets `line` from this option's `value` ("" for a flag).
    public func apply(_ value: String, to line: inout RunCommandLine) throws { try apply(&line, value) }

    /// `  -o, --output DIR          output folder…`: the help's lines for it, wrapped at column 28.
    public var helpText: String { Self.helpText(names.joined(separator: ", ") + (value.map { " " + $0 } ?? ""), help) }

    /// One option's lines in a `--help`: `  HEAD` padded to column 28, then the
    /// help's first line, its other lines indented to that column.
    static func helpText(_ head: String, _ help: String) -> String {
        let lines = help.split(separator: "\n")
        let start = "  " + head
        var text = start.padding(toLength: max(start.count + 1, 28), withPad: " ", startingAt: 0) + lines[0]
        for line in lines.dropFirst() { text += "\n" + String(repeating: " ", count: 28) + line }
        return text
    }

    static func choice<T>(_ name: String, _ value: String, _ table: [String: T], _ words: String) throws -> T {
        guard let chosen = table[value] else {
            throw ThumbpipeError(.usage, "\(name) takes \(words), not '\(value)'")
        }
        return chosen
    }

    /// Every option of `run`, in the order `--help` lists them; the pipeline's
    /// setting flags (``PipelineSettings/flagHelp``) come before `--set`.
    public static let all: [RunOptionDescription] = [
        .option(
            ["-o", "--output"], "DIR", "output folder (default: out)",
            docs: OptionDocumentation("output folder", .folder, "Output folder (default\n.Pa out ) .")
        ) { $0.output = $1 },
        .flag(
            ["-r", "--recursive"], "with DIR: its sub-folders too",
            docs: OptionDocumentation(
                "with DIR: its sub-folders too", .none, "With a folder as input: its sub-folders too.")
        ) { $0.flags.recursive = true },
        .option(
            ["--ext"], "LIST", "with DIR: only files with these extensions",
            docs: OptionDocumentation(
                "with DIR: only these extensions", .free("extensions"),
                "With a folder as input: only files with these extensions.")
        ) {
            $0.flags.extensions = Set($1.split(separator: ",").map(String.init))
        },
        .option(
            ["--pipeline"], "NAME|FILE",
            "pipeline settings (default: homepwner; see\n'thumbpipe pipeline --help' for where NAME is found)",
            docs: OptionDocumentation(
                "pipeline settings", .pipelines,
                "Pipeline settings (default\n.Li homepwner ,\nbuilt in); see\n.Sx PIPELINES .")
        ) { $0.pipeline = $1 },
        .option(
            ["-j", "--jobs"], "N",
            "worker processes (default: the number of cores, \(ProcessInfo.processInfo.activeProcessorCount) here)",
            docs: OptionDocumentation(
                "worker processes", .free("count"), "Worker processes (default: the number of cores).")
        ) { $0.jobs = try Int(option: $1, name: "--jobs", range: 1...256) },
        .option(
            ["--set"], "KEY=VALUE", repeatable: true, "any pipeline setting, e.g. --set thumbnail.scale=3",
            docs: OptionDocumentation(
                "any pipeline setting", .free("KEY=VALUE"), "Any pipeline setting, e.g.\n.Li --set thumbnail.scale=3 .")
        ) {
            guard let eq = $1.firstIndex(of: "=") else {
                throw ThumbpipeError(.usage, "--set takes KEY=VALUE, not '\($1)'")
            }
            $0.overrides.append((String($1[..<eq]), String($1[$1.index(after: eq)...]), .file))
        },
        .flag(
            ["--no-html"], "do not write OUT/.thumbpipe/report.html",
            docs: OptionDocumentation(
                "do not write report.html", .none, "Do not write\n.Pa OUT/.thumbpipe/report.html .")
        ) { $0.flags.html = false },
        .option(
            ["--log"], "FILE",
            "one JSON line per item: key, name, line, source,\naction (new, changed, metadata, moved, unchanged,\nremoved, kept, failed),\nreason, milliseconds",
            docs: OptionDocumentation(
                "one JSON line per item", .file,
                "One JSON line per item: key, name, line, source, action, reason, milliseconds.")
        ) { $0.log = $1 },
        .option(
            ["--trace"], "FILE",
            "write a Chrome trace (each item's stage spans with\nits file, format and size, a track per worker)\nthat opens in Perfetto; at most 256 MB (about\n130,000 items), past which items are counted",
            docs: OptionDocumentation(
                "write a Chrome trace", .file,
                "Write a Chrome trace of every item's stage spans, a track per worker, that opens\nin Perfetto; at most 256 MB (about 130,000 items), past which items are counted\nand a warning says how many were left out."
            )
        ) { $0.trace = $1 },
        .option(
            ["--trace-sample"], "N", "with --trace: trace one item in N",
            docs: OptionDocumentation(
                "with --trace, trace one item in N", .free("count"),
                "With\n.Fl -trace :\ntrace one item in\n.Ar N ,\nso the trace of a large set stays small and still spans the whole run."
            )
        ) {
            $0.traceSample = try Int(option: $1, name: "--trace-sample", range: 1...1_000_000_000)
        },
        .option(
            ["--metrics"], "FILE",
            "write the run's Prometheus metrics there (node-exporter's\ntextfile format, written atomically): last run and\nlast success times, duration, items by outcome, bytes",
            docs: OptionDocumentation(
                "write Prometheus textfile metrics", .file,
                "Write the run's metrics in the Prometheus text format to\n.Ar FILE ,\natomically (a temporary in the same folder renamed over it), for\nnode-exporter's textfile collector: the last run's and the last success's time\n(a failed run leaves the last success as it was), its duration and exit status,\nitems by outcome and bytes written, labelled by\n.Fl -collection ."
            )
        ) { $0.metrics = $1 },
        .option(
            ["--collection"], "NAME", "with --metrics: the collection label (default: the\noutput folder's name)",
            docs: OptionDocumentation(
                "the collection label of the metrics", .free("name"),
                "With\n.Fl -metrics :\nthe\n.Ql collection\nlabel of every series (default: the output folder's name)."
            )
        ) { $0.collection = $1 },
        .flag(
            ["--force"], "redo every item, whatever the previous run did",
            docs: OptionDocumentation("redo every item", .none, "Redo every item, whatever the previous run did.")
        ) { $0.flags.force = true },
        .flag(
            ["--dry-run"], "print what a run would do (new, changed, unchanged,\nremoved) and write nothing",
            docs: OptionDocumentation(
                "print what a run would do", .none, "Print what a run would do and write nothing.")
        ) { $0.dryRun = true },
        .flag(
            ["--json"], "with --dry-run: the plan as JSON",
            docs: OptionDocumentation("with --dry-run: as JSON", .none, "With\n.Fl -dry-run :\nthe plan as JSON.")
        ) { $0.json = true },
        .option(
            ["--max-removed"], "N|P%",
            "refuse a run that would remove more of the previous\nrun's items than this (default 10%); an empty\nmanifest over a folder with items is always refused",
            docs: OptionDocumentation(
                "refuse removing more than N or P%", .free("limit"),
                "Refuse a run that would remove more of the previous run's items than this\n(default 10%).")
        ) { $0.flags.maxRemoved = try RemovalLimit(parsing: $1) },
        .flag(
            ["--verify-content"],
            "re-hash sources and store files instead of trusting\ntheir size and modification time",
            docs: OptionDocumentation(
                "re-hash sources and store files", .none,
                "Re-hash sources and store files instead of trusting their size and modification\ntime.")
        ) { $0.flags.verifyContent = true },
        .option(
            ["--exit-on-failure"], "WHEN",
            "any (default): exit 1 when an item failed; new: only\nwhen a failure is not known from an earlier run (same\nsource, same settings), so a nightly cron mails news",
            docs: OptionDocumentation(
                "exit 1 on any failure, or only on new ones", .choices(["any", "new"]),
                ".Cm any\n(the default): exit 1 when an item failed;\n.Cm new :\nonly when a failure is not known from an earlier run (the same source and\nsettings failed before), so a nightly job reports news only."
            )
        ) { $0.exitOnNewOnly = try choice("--exit-on-failure", $1, ["any": false, "new": true], "any or new") },
        .flag(
            ["--prune-missing"],
            "an item whose photo is missing loses its thumbnail and\nstore file (by default they are kept, and reported)",
            docs: OptionDocumentation(
                "drop the outputs of items whose photo is missing", .none,
                "An item whose photo is missing loses its thumbnail and store file; by default\nthey are kept, and the item is reported as kept since the night its source was\nfirst missed."
            )
        ) { $0.flags.pruneMissing = true },
        .flag(
            ["--prefer-exif-date"],
            "a photo's own EXIF date wins over its Google Takeout\nsidecar's photoTakenTime (which wins by default: it\ncarries the user's corrections)",
            docs: OptionDocumentation(
                "prefer a photo's EXIF date to its Takeout sidecar's", .none,
                "A photo's own EXIF DateTimeOriginal wins over its Google Takeout sidecar's\n.Ql photoTakenTime ,\nwhich wins by default: it is the library's own record, with the user's\ncorrections."
            )
        ) { $0.flags.preferEXIFDate = true },
        .option(
            ["--time-zone"], "ZONE",
            "the zone of photo times that name no UTC offset and\nhave no GPS time beside them (an IANA name such as\nEurope/Oslo, UTC, or +02:00; default: the machine's)",
            docs: OptionDocumentation(
                "the zone of photo times without an offset", .free("zone"),
                "A photo's EXIF time before EXIF 2.31 names no offset from UTC: it is local time\nin a zone the photo does not say. thumbpipe reads it in the zone its GPS time\nstamp implies when it has one, else in\n.Ar zone :\nan IANA name\n.Pq Li Europe/Oslo ,\n.Li UTC ,\nor an offset\n.Pq Li +02:00 ;\nby default the machine's. The report says how many dates were read so."
            )
        ) { $0.flags.timeZone = try timeZone($1) },
        .flag(
            ["--rebuild-state"],
            "the state (.thumbpipe/state.sqlite) is damaged or lost:\nmove it aside, adopt the archive's items and the store\nfiles, and make every item again",
            docs: OptionDocumentation(
                "rebuild a damaged or lost state from the archive and store files", .none,
                "The way back from a damaged or lost\n.Pa .thumbpipe/state.sqlite :\nit is moved aside as\n.Pa state.sqlite.damaged ,\nthe items of the archive in the output folder and the store files at their keys\n(or the manifest's) are adopted as thumbpipe's own, and every item is made\nagain, since nothing proves what made those outputs."
            )
        ) { $0.flags.rebuildState = true },
        .option(
            ["--sandbox"], "MODE",
            "how workers are confined before reading a source:\nrequired, auto (default: what the kernel offers)\nor off (see 'Sandbox' in docs/GUIDE.md)",
            docs: OptionDocumentation(
                "how workers are confined", .choices(["required", "auto", "off"]),
                "How workers are confined before they read a source:\n.Cm required\n(both Landlock and seccomp, or exit 70),\n.Cm auto\n(what the kernel offers; the default) or\n.Cm off .\nSee\n.Sx SANDBOX ."
            )
        ) {
            $0.flags.sandbox = try choice(
                "--sandbox", $1, Dictionary(uniqueKeysWithValues: SandboxMode.allCases.map { ($0.rawValue, $0) }),
                "required, auto or off")
        },
        .option(
            ["--shard"], "K/N",
            "do only the items whose itemKey hashes to shard K of N\n(0 ≤ K < N), as a partial output for 'thumbpipe merge'",
            docs: OptionDocumentation(
                "only shard K of N", .free("K/N"),
                "Only the items whose item key hashes to shard\n.Ar K\nof\n.Ar N ,\nas a partial output for\n.Cm merge ."
            )
        ) { $0.flags.shard = try Shard(parsing: $1) },
        .option(
            ["--run-id"], "ID",
            "with --shard: the run this part belongs to (e.g. a\nSlurm job ID), recorded for 'merge --run-id ID'",
            docs: OptionDocumentation(
                "the run this part belongs to", .free("id"),
                "With\n.Fl -shard :\nthe run this part belongs to (a Slurm job ID, a Kubernetes job name), recorded for\n.Cm merge Fl -run-id ."
            )
        ) { $0.flags.runId = try RunIdentity.parse($1) },
    ]

    /// The OPTIONS block of `run --help`: the table, the setting flags before `--set`, then quiet and help.
    public static var optionsHelp: String {
        let split = all.firstIndex { $0.names == ["--set"] } ?? all.count
        return
            (all[..<split].map(\.helpText) + [PipelineSettings.flagHelp] + all[split...].map(\.helpText) + [
                helpText("-q, --quiet", "no progress bar"), helpText("-h, --help", "this help"),
            ]).joined(separator: "\n")
    }
}

extension Int {
    /// A whole-number option's value within `range`.
    /// - Throws: ``ThumbpipeError`` (64) naming the option and the range.
    public init(option value: String, name: String, range: ClosedRange<Int>) throws {
        guard let parsed = Int(value), range.contains(parsed) else {
            throw ThumbpipeError(
                .usage, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'"
            )
        }
        self = parsed
    }
}

extension RunCommandLine {
    /// The pipeline the command line names, with its settings (by flag and
    /// `--set`) over it, checked.
    /// - Throws: ``ThumbpipeError`` (64) naming the setting that is wrong.
    public func settings() throws -> PipelineSettings {
        var settings = try PipelineCatalog().resolve(pipeline).settings
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
}

/// A `--time-zone` value: an IANA name, `UTC`, or a fixed offset `±HH:MM`.
func timeZone(_ text: String) throws -> TimeZone {
    if let seconds = ISO8601.exifOffsetSeconds(text), text.count == 6, let zone = TimeZone(secondsFromGMT: seconds) {
        return zone
    }
    if let zone = TimeZone(identifier: text) { return zone }
    throw ThumbpipeError(
        .usage,
        "--time-zone: unknown zone '\(text)': give an IANA name such as Europe/Oslo or America/New_York, UTC, or an offset such as +02:00"
    )
}
