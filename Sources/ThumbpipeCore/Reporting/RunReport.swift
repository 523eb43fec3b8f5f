import Foundation

/// `.thumbpipe/report.json`: counts, settings, per-stage timings, throughput,
/// memory, every failure and every warning. `run` writes it, `merge` sums the
/// parts' into one, and tests read it, all through this one type.
public struct RunReport: Sendable, Codable {
    /// thumbpipe's version, as `--version` prints it.
    public static let version = "0.1.0"

    public struct Counts: Sendable, Codable, Equatable {
        public var items = 0
        public var succeeded = 0
        public var failed = 0
        public var withoutImage = 0
        /// Items made despite decoder warnings (counted in `succeeded` too).
        public var withWarnings = 0

        public init(items: Int = 0, succeeded: Int = 0, failed: Int = 0, withoutImage: Int = 0, withWarnings: Int = 0) {
            self.items = items
            self.succeeded = succeeded
            self.failed = failed
            self.withoutImage = withoutImage
            self.withWarnings = withWarnings
        }
    }

    public struct Throughput: Sendable, Codable {
        public var seconds = 0.0
        public var itemsPerSecond = 0.0
        public var imagesPerSecond = 0.0
        public var sourceMegabytesPerSecond = 0.0
    }

    /// Peak resident memory, in bytes.
    public struct Memory: Sendable, Codable {
        /// The parent: manifest, archive, state.
        public var parentPeakRSSBytes = 0
        /// The largest single worker.
        public var largestWorkerPeakRSSBytes = 0
        /// The workers' peaks added over the worker slots: a bound on what they can have held at one time.
        public var workersPeakRSSBytes = 0
        /// The parent and its workers together in proportional set size: pages
        /// the processes share (libraries) counted once, not once per process;
        /// sampled every second.
        public var peakPSSBytes: Int?
    }

    public struct Incremental: Sendable, Codable {
        public var new = 0
        public var changed = 0
        /// How the changed items changed: `source`, `settings`, `algorithm` (an upgrade), `output`…
        public var changedBy: [String: Int] = [:]
        public var metadata = 0
        public var moved = 0
        public var unchanged = 0
        public var removed = 0
        public var kept = 0
        /// Why the kept items were kept: `source missing`, `unreadable`, `empty` (absent from older reports).
        public var keptBy: [String: Int]?
        /// The removed items, by name and last source (at most 1,000).
        public var removedItems: [RemovedItem] = []
        /// The items whose photo moved to a new key, old key → new (at most 1,000).
        public var movedItems: [MovedItem] = []
        public var decoded = 0
        public var timeSavedSeconds = 0.0
        /// Items whose archive bytes were copied from the previous archive, not encoded.
        public var archiveItemsCopied: Int?
        /// Those bytes.
        public var archiveBytesCopied: UInt64?
    }

    /// An item that moved to a new key, as the report lists it.
    public struct MovedItem: Sendable, Codable, Equatable {
        public var from: String
        public var to: String
        public var itemName: String
    }

    /// What a folder run's scan left out (`run DIR`): a migration's loose ends.
    public struct LeftOut: Sendable, Codable, Equatable {
        /// Files skipped, by what they are (`MP4 video`, `PDF not in --formats`, `file of unknown type`…).
        public var skipped: [String: Int] = [:]
        /// The first of them by name, each with what it is.
        public var skippedFiles: [SkippedFile] = []
        /// Files whose names are not valid UTF-8, escaped: rename them (as UTF-8) to have them read.
        public var namesNotUTF8: [String] = []
        /// Hidden files and folders (names starting with a dot): never scanned.
        public var hidden = 0
        /// Folders behind symlinks: never followed (name the folder itself to scan it).
        public var symlinkedFolders = 0
        /// Sub-folders left out for want of `-r`.
        public var subfolders = 0
        /// Files folded into another's item (an edit into its original, a copy into
        /// the first of its copies), at most 1,000; absent from older reports.
        public var folded: [FolderScan.Folded]?

        public struct SkippedFile: Sendable, Codable, Equatable {
            public var path: String
            public var kind: String
        }

        /// Whether nothing was left out.
        public var isEmpty: Bool {
            skipped.isEmpty && namesNotUTF8.isEmpty && hidden == 0 && symlinkedFolders == 0 && subfolders == 0
        }

        /// From a scan.
        public init(_ scan: FolderScan.Result) {
            skipped = scan.skippedKinds
            skippedFiles = scan.skippedFiles.map { SkippedFile(path: $0.path, kind: $0.kind) }
            namesNotUTF8 = scan.badNames
            hidden = scan.hidden
            symlinkedFolders = scan.symlinkedFolders
            subfolders = scan.subfolders
            folded = scan.folded.isEmpty ? nil : Array(scan.folded.prefix(1000))
        }
    }

    /// A removed item as the report lists it.
    public struct RemovedItem: Sendable, Codable, CustomStringConvertible {
        public var itemKey: String
        public var itemName: String
        public var source: String

        /// `Bike (photos/bike.jpg) KEY`, as the plan's removed items read.
        public var description: String {
            IncrementalPlan.RemovedItem.line(itemName: itemName, source: source, itemKey: itemKey)
        }
    }

    public var thumbpipeVersion = RunReport.version
    /// What the folder run's scan left out (nil for a manifest run).
    public var leftOut: LeftOut?
    /// How the run's workers were confined (``Sandbox``), e.g. `Landlock ABI 7 (files, TCP) and seccomp`.
    public var sandbox: String?
    public var manifest: String?
    public var output: String?
    public var jobs: Int?
    /// The parts a merged report was summed from.
    public var mergedFrom: [String]?
    public var counts = Counts()
    public var settings: PipelineSettings?
    public var stages: [String: StageTimings.Summary] = [:]
    public var throughput = Throughput()
    /// The parent and its workers together: the highest total resident memory,
    /// sampled every 50 ms during the run.
    public var peakRSSBytes = 0
    /// The bytes of the store files this run wrote (absent from older reports).
    public var storeBytesWritten: Int64?
    public var memory = Memory()
    public var incremental = Incremental()
    public var failures: [FailureRecord] = []
    public var warnings: [WarningRecord] = []
    /// When the run started (ISO 8601, UTC).
    public var startTime: String?
    /// Per stage, `[milliseconds, count]` histogram buckets.
    public var histograms: [String: [[Double]]] = [:]
    /// Items archived and memory held over the run, about once a second.
    public var timeline: [TimelinePoint] = []
    /// The 20 slowest decoded items, slowest first.
    public var slowest: [ItemProfile] = []
    /// An even sample of at most 2,000 decoded items: time, megapixels, format.
    public var sample: [ItemSample] = []
    /// Items dated by their file's modification time (no EXIF date, or one in the
    /// future): the first 1,000, and how many in all.
    public var datesFromFileTime: [DateGuess] = []
    public var datesFromFileTimeCount = 0
    /// Items whose photo's time names no offset from UTC and has no GPS stamp
    /// beside it, read as local time in the run's zone (`--time-zone`); nil when none.
    public var datesInTimeZone: ZonedDates?
    /// Items that share a photo (the same content hash), in groups.
    public var duplicates: [[DuplicateItem]] = []
    /// Where the workers' time went, by format and size class, how busy they were,
    /// and hints with the figures behind them.
    public var profile: RunProfile?

    /// An empty report.
    public init() {}

    /// How many items' dates were read in which time zone.
    public struct ZonedDates: Sendable, Codable, Equatable {
        public var count: Int
        /// The zone's identifier (`Europe/Oslo`).
        public var zone: String
    }

    /// Reads a report file.
    /// - Throws: ``ThumbpipeError`` (66) when it cannot be read, (65) when it is not a report.
    public static func read(_ path: String) throws -> RunReport {
        guard let data = try? FileSystem.contents(of: path, limit: 1 << 30) else {
            throw ThumbpipeError(.noInput, "\(path): cannot read")
        }
        do {
            return try decoded(data)
        } catch {
            throw ThumbpipeError(.dataError, "\(path): not a thumbpipe report (\(error))")
        }
    }

    /// A report from the JSON ``write(to:)`` wrote, checked as a file read back
    /// must be (``ReportBounds``): a damaged or crafted `report.json` is refused
    /// here rather than drawn.
    /// - Throws: a decoding error, or ``ReportBounds/Problem`` naming what is out of bounds.
    public static func decoded(_ data: Data) throws -> RunReport {
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw ReportBounds.Problem("not JSON")
        }
        if let problem = ReportBounds.problem(json) { throw problem }
        let report = try JSONDecoder().decode(RunReport.self, from: data)
        if let problem = ReportBounds.problem(report) { throw problem }
        return report
    }

    /// Writes the report atomically to `OUT/.thumbpipe/report.json`.
    /// - Returns: the JSON written (the report as a reader will see it, figures rounded).
    /// - Throws: ``ThumbpipeError`` (74) when it cannot be written.
    @discardableResult
    public func write(to output: OutputFolder) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw ThumbpipeError(.software, "cannot encode the report: \(error)")
        }
        try TemporaryFile.write(data + Data("\n".utf8), to: output.layout.report)
        try keepHistory(data + Data("\n".utf8), in: output)
        return data
    }

    /// How many earlier reports `.thumbpipe/reports/` keeps.
    public static let historyLength = 30

    /// Keeps a copy as `.thumbpipe/reports/<start time>.json`, and only the last ``historyLength``.
    private func keepHistory(_ data: Data, in output: OutputFolder) throws {
        let folder = output.layout.reports
        do {
            try FileSystem.createFolder(folder, intermediate: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(folder): cannot create: \(ThumbpipeError.describe(error))")
        }
        let stamp = (startTime ?? ISO8601Format.string(Date())).filter { $0.isNumber || $0 == "T" || $0 == "Z" }
        try TemporaryFile.write(data, to: folder + "/" + stamp + ".json")
        let names = FileSystem.textNames(in: folder).filter { $0.hasSuffix(".json") }
        for name in names.dropLast(Self.historyLength) { try? FileSystem.remove(folder + "/" + name) }
    }
}

extension RunReport.Counts {
    /// Both counts summed.
    static func + (a: Self, b: Self) -> Self {
        Self(
            items: a.items + b.items, succeeded: a.succeeded + b.succeeded, failed: a.failed + b.failed,
            withoutImage: a.withoutImage + b.withoutImage, withWarnings: a.withWarnings + b.withWarnings)
    }
}

extension RunReport {
    /// The report of a merge: the parts' counts summed, their failures and warnings
    /// in manifest order, their stages merged, the longest part's time and the
    /// largest part's memory (the parts ran side by side).
    /// - Parameter parts: the part folders, recorded as `mergedFrom`.
    public static func merged(_ reports: [RunReport], from parts: [String]) -> RunReport {
        var merged = RunReport()
        merged.mergedFrom = parts
        for report in reports {
            merged.counts = merged.counts + report.counts
            merged.failures += report.failures
            merged.warnings += report.warnings
            merged.settings = merged.settings ?? report.settings
            merged.throughput.seconds = max(merged.throughput.seconds, report.throughput.seconds)
            for (stage, summary) in report.stages {
                merged.stages[stage] = merged.stages[stage].map { $0.merged(with: summary) } ?? summary
            }
            merged.peakRSSBytes = max(merged.peakRSSBytes, report.peakRSSBytes)
            merged.memory.parentPeakRSSBytes = max(merged.memory.parentPeakRSSBytes, report.memory.parentPeakRSSBytes)
            merged.memory.workersPeakRSSBytes = max(
                merged.memory.workersPeakRSSBytes, report.memory.workersPeakRSSBytes)
            merged.memory.largestWorkerPeakRSSBytes = max(
                merged.memory.largestWorkerPeakRSSBytes, report.memory.largestWorkerPeakRSSBytes)
        }
        merged.failures.sort { $0.line < $1.line }
        merged.warnings.sort { $0.line < $1.line }
        merged.counts.failed = merged.failures.count
        return merged
    }
}

/// What a report read back may hold: the numbers, settings and list lengths
/// thumbpipe itself writes, so that drawing, merging or summing them can neither
/// trap nor run away. Every number is finite, not negative and at most 2^53 (the
/// largest a JSON reader takes exactly, far above any count, byte total or time a
/// run records), and all of them together at most 2^62, so no sum of them
/// overflows an `Int`; the settings pass the checks a pipeline file does; the
/// lists a run caps keep their caps.
public enum ReportBounds {
    /// Why a report was refused.
    public struct Problem: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The largest number a report may hold.
    public static let largestNumber = 9_007_199_254_740_992.0
    /// The largest sum of all of a report's numbers.
    public static let largestTotal = 4_611_686_018_427_387_904.0

    /// The first number out of bounds in parsed JSON, by its path, or a total past ``largestTotal``.
    static func problem(_ json: Any) -> Problem? {
        var total = 0.0
        if let problem = problem(json, path: "", total: &total) { return problem }
        guard total <= largestTotal else { return Problem("its numbers add up to \(total), past 2^62") }
        return nil
    }

    private static func problem(_ json: Any, path: String, total: inout Double) -> Problem? {
        switch json {
        case let object as [String: Any]:
            for (key, value) in object.sorted(by: { $0.key < $1.key }) {
                let inner = path.isEmpty ? key : path + "." + key
                if let problem = problem(value, path: inner, total: &total) { return problem }
            }
        case let array as [Any]:
            for (index, element) in array.enumerated() {
                if let problem = problem(element, path: "\(path)[\(index)]", total: &total) { return problem }
            }
        case is String, is NSNull, is Bool:
            break
        case let number as NSNumber:
            let value = number.doubleValue
            guard value >= 0, value <= largestNumber else {
                return Problem("\(path) is \(number), outside 0…2^53")
            }
            total += value
        default:
            break
        }
        return nil
    }

    /// Settings a pipeline file could not hold, or a list longer than a run writes it.
    static func problem(_ report: RunReport) -> Problem? {
        do {
            try report.settings?.validate(at: "settings")
        } catch {
            return Problem("\(error)")
        }
        let lists: [(String, Int, Int)] = [
            ("slowest", report.slowest.count, ProfileCollector.slowestCount),
            ("sample", report.sample.count, ProfileCollector.sampleCount),
            ("datesFromFileTime", report.datesFromFileTime.count, RunReport.listedItems),
            ("incremental.removedItems", report.incremental.removedItems.count, RunReport.listedItems),
            ("incremental.movedItems", report.incremental.movedItems.count, RunReport.listedItems),
        ]
        for (name, count, cap) in lists where count > cap {
            return Problem("\(name) lists \(count) items; a run lists at most \(cap)")
        }
        for (stage, buckets) in report.histograms.sorted(by: { $0.key < $1.key }) {
            if let index = buckets.firstIndex(where: { $0.count != 2 }) {
                return Problem("histograms.\(stage)[\(index)] is not a pair of milliseconds and items")
            }
        }
        return nil
    }
}
