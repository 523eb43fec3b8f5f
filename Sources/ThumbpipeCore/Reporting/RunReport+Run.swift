import Foundation

extension RunReport {
    /// A run's report as its sink left it: counts, failures, warnings, the
    /// slowest and sampled items and the guessed dates. The runner adds the plan
    /// (``take(_:manifest:)``) and the workers (``takeWorkers(_:confined:sampledPeak:proportionalPeak:)``).
    /// - Parameters:
    ///   - seconds: the run's wall time, for the rates.
    ///   - timings: the stages and their histograms, as they are now.
    init(
        totals: OrderedSink.Totals, manifest: Manifest, settings: PipelineSettings, options: RunOptions,
        seconds: Double, timings: StageTimings
    ) {
        self.init()
        self.manifest = manifest.path
        output = options.output.path
        jobs = options.jobs
        self.settings = settings
        counts = Counts(
            items: manifest.items.count, succeeded: totals.succeeded, failed: totals.failures.count,
            withoutImage: manifest.items.count - manifest.items.withImageCount, withWarnings: totals.warnings.count)
        failures = totals.failures
        warnings = totals.warnings
        incremental.decoded = totals.decodedItems
        slowest = totals.profiles.slowest
        sample = totals.profiles.sample
        datesFromFileTime = totals.dateGuesses
        datesFromFileTimeCount = totals.dateGuessCount
        if totals.zoneAssumedCount > 0 {
            datesInTimeZone = ZonedDates(
                count: totals.zoneAssumedCount,
                zone: options.timeZone.identifier == "GMT" ? "UTC" : options.timeZone.identifier)
        }
        storeBytesWritten = totals.storeBytesWritten
        let wall = max(seconds, 1e-9)
        throughput = Throughput(
            seconds: StageTimings.round(seconds),
            itemsPerSecond: StageTimings.round(Double(counts.items) / wall),
            imagesPerSecond: StageTimings.round(Double(totals.decodedItems) / wall),
            sourceMegabytesPerSecond: StageTimings.round(Double(totals.sourceBytes) / 1e6 / wall))
        stages = timings.summary()
        histograms = timings.bucketCounts()
    }

    /// The plan's figures: classes, changes, removals, moves (old key → new key)
    /// and the time the reused items saved; all items new without a plan. Items
    /// the run made again because their recorded thumbnail was missing or damaged
    /// (`remade`, by the class the plan gave them) count as changed, by `output`;
    /// items planned as changed by their source whose job found only their metadata
    /// changed (`imageKept`) count as metadata.
    mutating func take(
        _ plan: IncrementalPlan?, manifest: Manifest, remade: [ItemClass: Int] = [:], imageKept: Int = 0
    ) {
        guard let plan else {
            incremental.new = manifest.items.count
            return
        }
        let counts = plan.counts
        incremental.new = counts[.new] ?? 0
        incremental.changed = counts[.changed] ?? 0
        incremental.changedBy = plan.changeKinds
        incremental.keptBy = plan.keptKinds.isEmpty ? nil : plan.keptKinds
        incremental.metadata = counts[.metadata] ?? 0
        incremental.moved = counts[.moved] ?? 0
        incremental.unchanged = counts[.unchanged] ?? 0
        incremental.removed = counts[.removed] ?? 0
        incremental.kept = counts[.kept] ?? 0
        incremental.removedItems = plan.removed.prefix(Self.listedItems).map {
            RemovedItem(itemKey: $0.itemKey, itemName: $0.itemName, source: $0.source)
        }
        let moved = plan.moves.sorted { $0.key < $1.key }.compactMap { position, from in
            let item = manifest.items[position]
            return from == item.itemKey ? nil : MovedItem(from: from, to: item.itemKey, itemName: item.itemName)
        }
        incremental.movedItems = Array(moved.prefix(Self.listedItems))
        incremental.timeSavedSeconds = StageTimings.round(plan.savedSeconds)
        // A changed item stays changed, by what changed first; the others move to changed, by `output`.
        for (planned, count) in remade {
            switch planned {
            case .metadata: incremental.metadata -= count
            case .moved: incremental.moved -= count
            case .unchanged: incremental.unchanged -= count
            default: continue
            }
            incremental.changed += count
            incremental.changedBy["output", default: 0] += count
        }
        if imageKept > 0 {
            incremental.changed -= imageKept
            incremental.metadata += imageKept
            incremental.changedBy["source", default: imageKept] -= imageKept
            if incremental.changedBy["source"] == 0 { incremental.changedBy["source"] = nil }
        }
    }

    /// The workers' memory and confinement (when they were confined), and the run's peaks.
    mutating func takeWorkers(_ supervisor: Supervisor, confined: Bool, sampledPeak: Int, proportionalPeak: Int) {
        let parent = ProcessMemory.peakResidentBytes()
        memory = Memory(
            parentPeakRSSBytes: parent, largestWorkerPeakRSSBytes: supervisor.largestWorkerPeakRSSBytes,
            workersPeakRSSBytes: supervisor.workersPeakRSSBytes, peakPSSBytes: proportionalPeak)
        if confined, let confinement = supervisor.confinement {
            sandbox =
                confinement.description
                + (confinement.problems.isEmpty ? "" : "; missing: \(confinement.problems.joined(separator: "; "))")
        }
        peakRSSBytes = max(sampledPeak, parent, supervisor.largestWorkerPeakRSSBytes)
    }

    /// How many removed and moved items the report lists by name.
    public static let listedItems = 1000

    /// Items per class against the previous run.
    public var classes: [ItemClass: Int] {
        [
            .new: incremental.new, .changed: incremental.changed, .metadata: incremental.metadata,
            .moved: incremental.moved, .unchanged: incremental.unchanged, .removed: incremental.removed,
            .kept: incremental.kept,
        ]
    }

    /// What the summary says of the items dated by their file's time: how many, and
    /// (as a migration's reader checks them one by one) the first 20 by name.
    public var datesFromFileTimeSummary: [String] {
        var lines: [String] = []
        if let zoned = datesInTimeZone {
            lines.append(
                "thumbpipe: \(zoned.count == 1 ? "1 photo's time names" : "\(zoned.count) photos' times name") no UTC offset: read as local time in \(zoned.zone) (--time-zone to change)"
            )
        }
        guard datesFromFileTimeCount > 0 else { return lines }
        let count = datesFromFileTimeCount
        let names = datesFromFileTime.prefix(20).map(\.source)
        return lines + [
            "thumbpipe: \(count == 1 ? "1 item is" : "\(count) items are") dated by the file's time (no EXIF date, or one in the future): see datesFromFileTime in the report",
            "thumbpipe: dated by the file's time: " + names.joined(separator: ", ")
                + (count > names.count ? " (+\(count - names.count) more)" : ""),
        ]
    }

    /// The plan in one line (``IncrementalPlan/summary(_:_:)``).
    public var planSummary: String {
        IncrementalPlan.summary(classes, incremental.changedBy, kept: incremental.keptBy)
    }
}

extension OrderedSink {
    /// The run's report, from what this sink has archived
    /// (``RunReport/init(totals:manifest:settings:options:seconds:timings:)``).
    func report(
        manifest: Manifest, settings: PipelineSettings, options: RunOptions, seconds: Double, timings: StageTimings
    ) -> RunReport {
        RunReport(
            totals: totals, manifest: manifest, settings: settings, options: options, seconds: seconds,
            timings: timings)
    }
}
