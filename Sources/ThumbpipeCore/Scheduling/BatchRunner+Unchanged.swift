import Foundation

extension BatchRunner {
    /// When nothing changed (every item unchanged, none removed, the same items
    /// in the same order with the same fields, and the archive on disk the one
    /// the last run wrote, byte for byte), a run writes nothing but its report: no worker, no
    /// archive. Failures of the source are replayed from the state.
    func runUnchanged(
        started: UInt64, startTime: Date, archivePath: String, fingerprint: String?,
        writeReport: (inout RunReport) throws -> Void
    ) throws -> RunReport? {
        guard let plan, let state, let fingerprint, plan.nothingChanged,
            try state.archiveIsSealed(fingerprint: fingerprint, path: archivePath)
        else { return nil }
        // Every item settles without a job, by its ledger: the known failures from
        // their records, the rest (for --log alone) as unchanged.
        var failures: [FailureRecord] = []
        var settled: [Int: FinishedItem] = [:]
        for position in plan.keptFailures {
            let item = manifest.items[position]
            guard let previous = try state.record(forKey: item.itemKey), previous.failure != nil else { continue }
            let ledger = ledger(position, previous: previous)
            let finished = ledger.settle(
                thumbnail: ledger.reusedThumbnail(recorded: previous, png: nil), outcome: nil,
                date: manifest.modificationDate, dateGuess: nil, storeInPlace: false, sourceStamp: { nil },
                storeStamp: { nil }, logs: hooks.onItem != nil
            ).finished
            guard let failure = finished.failure else { continue }
            failures.append(failure)
            settled[position] = finished
            hooks.onFailure?(failure)
        }
        // --log has one line per item, on a night with nothing to do too.
        if let onItem = hooks.onItem {
            for position in manifest.items.indices {
                if let log = settled[position]?.log {
                    onItem(log)
                } else {
                    let work = plan.work[position]
                    onItem(
                        ledger(position, previous: nil).logEntry(
                            action: ItemAction(work.itemClass), reason: work.reason))
                }
            }
        }
        hooks.onProgress?(manifest.items.count)
        // The same report a run's sink builds, from totals that hold only the known failures.
        var totals = OrderedSink.Totals()
        totals.succeeded = manifest.items.withImageCount - failures.count
        totals.failures = failures
        var report = RunReport(
            totals: totals, manifest: manifest, settings: settings, options: options,
            seconds: Double(Spans.now - started) / 1e9, timings: timings)
        report.take(plan, manifest: manifest)
        report.duplicates = try state.recordedDuplicates()
        report.startTime = ISO8601Format.string(startTime)
        report.memory.parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        report.memory.peakPSSBytes = 0
        report.peakRSSBytes = report.memory.parentPeakRSSBytes
        report.incremental.archiveItemsCopied = 0
        report.incremental.archiveBytesCopied = 0
        try writeReport(&report)
        return report
    }

    /// The ledger of the item at `position`, as the run builds it.
    func ledger(_ position: Int, previous: ItemRecord?) -> ItemLedger {
        var ledger = ItemLedger(
            item: manifest.items[position], index: position, work: plan?.work[position], previous: previous,
            fingerprints: fingerprints, manifestDate: manifest.modificationDate, recordsState: state != nil,
            movedFrom: plan?.moves[position])
        ledger.preferEXIFDate = options.preferEXIFDate
        ledger.timeZone = options.timeZone
        return ledger
    }
}
