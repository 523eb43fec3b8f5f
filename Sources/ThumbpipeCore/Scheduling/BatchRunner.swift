import Foundation
import Synchronization

/// Runs a manifest through the pipeline: `jobs` slots, each driving one
/// worker process through ``Supervisor``, an ``OrderedSink`` that writes the
/// archive and the state in manifest order, and the incremental plan deciding
/// per item what is redone.
public final class BatchRunner: Sendable {
    let manifest: Manifest
    private let settings: PipelineSettings
    private let options: RunOptions
    let plan: IncrementalPlan?
    let state: RunState?
    private let trace: TraceWriter?
    let hooks: RunHooks
    private let store: ImageStore
    private let fingerprints: ItemLedger.Fingerprints
    /// Store-file names a killed run claimed (its files, not strangers'), read before this run claims any.
    private let claimedBefore: Set<String>
    /// The per-stage timings of this run.
    public let timings = StageTimings()

    /// Prepares a run of `manifest` with `settings`.
    /// - Parameters:
    ///   - plan: what to redo per item; nil redoes everything.
    ///   - state: where finished items are recorded, so later runs (and a resumed one) can skip them.
    ///   - trace: where stage spans go, when a trace was asked for.
    public init(
        manifest: Manifest, settings: PipelineSettings, options: RunOptions, plan: IncrementalPlan? = nil,
        state: RunState? = nil, trace: TraceWriter? = nil, hooks: RunHooks = RunHooks()
    ) {
        self.manifest = manifest
        self.settings = settings
        self.options = options
        self.plan = plan
        self.state = state
        self.trace = trace
        self.hooks = hooks
        store = ImageStore(folder: options.outputFolder, settings: settings.store)
        fingerprints = ItemLedger.Fingerprints(settings: settings, plan: plan)
        claimedBefore = OutputGuard.claims(in: options.outputFolder)
    }

    /// Runs every item; writes store files, then the report, then `items.archive`.
    /// - Parameters:
    ///   - cancel: a set flag kills the workers at once and leaves nothing partial.
    ///   - writeReport: called with the result before the archive is renamed into place.
    /// - Throws: ``ThumbpipeError`` for failures of the run itself (71/73/74), or
    ///   ``RunCancelled`` when `cancel` was set.
    public func run(cancel: CancellationFlag = CancellationFlag(), writeReport: (RunResult) throws -> Void = { _ in })
        throws -> RunResult
    {
        let started = Spans.now
        let startTime = Date()
        let lock = try options.lock ?? OutputFolder.prepare(options.outputFolder)
        let archivePath = options.outputFolder + "/" + settings.archive.fileName
        let fingerprint = state == nil ? nil : IncrementalPlan.archiveFingerprint(manifest, settings)
        if let unchanged = try runUnchanged(
            started: started, startTime: startTime, archivePath: archivePath, fingerprint: fingerprint,
            writeReport: writeReport)
        {
            withExtendedLifetime(lock) {}
            return unchanged
        }
        let supervisor = try Supervisor(
            executable: options.workerExecutable, settings: settings, outputFolder: options.outputFolder,
            sandbox: options.sandbox)
        defer { supervisor.reapExiting() }
        let items = manifest.items
        let planned = plan?.work
        let dispenser = Dispenser(
            count: items.count, window: options.window, isLight: { !items.hasImage(at: $0) },
            weight: { position in
                // A photo's file size stands for its cost; nothing to redo costs nothing.
                if let item = planned?[position], !item.needsThumbnail && !item.needsStore { return 0 }
                return items[position].imagePath.map { Int(ItemJobRunner.fileSize($0)) } ?? 0
            })
        let sink = OrderedSink(
            writer: try KeyedArchiveWriter(
                path: archivePath, className: settings.archive.className, itemCount: manifest.items.count,
                indexPath: state == nil ? nil : ArchiveIndex.path(in: options.outputFolder)),
            state: state, timings: timings, hooks: hooks, dispenser: dispenser)
        let fatal = Mutex<(any Error)?>(nil)
        cancel.onCancel {
            dispenser.stop()
            supervisor.cancel()
        }
        let sampler = MemorySampler(workers: { supervisor.workerPids }, progress: { sink.archivedCount })
        let done = DispatchGroup()
        for slot in 0..<options.jobs {
            done.enter()
            let thread = Thread { [self] in
                defer { done.leave() }
                do {
                    try work(slot: slot, dispenser: dispenser, sink: sink, supervisor: supervisor)
                } catch {
                    fatal.withLock { if $0 == nil { $0 = error } }
                    dispenser.stop()
                }
            }
            thread.name = "thumbpipe-slot-\(slot + 1)"
            thread.start()
        }
        done.wait()
        let (sampledPeak, timeline) = sampler.stop()
        supervisor.shutDown()

        let failure: (any Error)? = cancel.signal != 0 ? RunCancelled(signal: cancel.signal) : fatal.withLock { $0 }
        if let error = failure {
            sink.abandonArchive()
            trace?.abandon()
            try? state?.commit()
            TemporaryFile.removeStale(in: options.outputFolder)
            TemporaryFile.removeStale(in: OutputFolder.workFolder(options.outputFolder))
            throw error
        }
        if let plan {
            // Items gone from the manifest lose their store file, as deleteImageForKey: does.
            for key in plan.removed { store.delete(forKey: key) }
            try state?.remove(keys: plan.removed)
        }
        try state?.commit()
        if state != nil { OutputGuard.clearClaims(in: options.outputFolder) }
        let totals = sink.totals
        var result = RunResult(
            total: manifest.items.count, succeeded: totals.succeeded,
            withoutImage: manifest.items.count - manifest.items.withImageCount, failures: totals.failures,
            warnings: totals.warnings, seconds: Double(Spans.now - started) / 1e9, sourceBytes: totals.sourceBytes)
        result.decodedItems = totals.decodedItems
        result.startTime = startTime
        result.timeline = timeline
        result.slowest = totals.profiles.slowest
        result.datesFromFileTime = totals.dateGuesses
        result.datesFromFileTimeCount = totals.dateGuessCount
        result.sample = totals.profiles.sample
        result.parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        result.workersPeakRSSBytes = supervisor.workersPeakRSSBytes
        result.largestWorkerPeakRSSBytes = supervisor.largestWorkerPeakRSSBytes
        result.peakRSSBytes = max(sampledPeak, result.parentPeakRSSBytes, result.largestWorkerPeakRSSBytes)
        result.peakPSSBytes = sampler.proportionalPeak
        if let plan {
            result.classes = plan.counts
            result.timeSavedSeconds = plan.savedSeconds
        } else {
            result.classes = [.new: manifest.items.count]
        }
        timings.record([.archive: totals.archiveSeconds])
        (result.archiveItemsCopied, result.archiveBytesCopied) = sink.archiveCopies
        let archiveHash: String
        do {
            try writeReport(result)
            try trace?.finish()
            archiveHash = try sink.finishArchive()
        } catch {
            sink.abandonArchive()
            throw error
        }
        if let state, let fingerprint, let stamp = FileStamp(path: archivePath) {
            // What the next run compares to know it has nothing to write.
            try state.setMeta("archiveFingerprint", fingerprint)
            try state.setMeta("archiveStamp", "\(stamp.size):\(stamp.modified)")
            try state.setMeta("archiveHash", archiveHash)
            try state.commit()
        }
        TemporaryFile.syncFolder(options.outputFolder)
        result.seconds = Double(Spans.now - started) / 1e9
        withExtendedLifetime(lock) {}
        return result
    }

    // MARK: - One item

    /// One slot's loop: items from the dispenser to the sink, with the next
    /// item's job already queued at the worker while the slot waits for the
    /// one before (so the worker goes from item to item without waiting for
    /// the parent's bookkeeping).
    private func work(slot: Int, dispenser: Dispenser, sink: OrderedSink, supervisor: Supervisor) throws {
        var inFlight: PendingItem? = nil
        func finishInFlight() throws {
            guard let pending = inFlight else { return }
            inFlight = nil
            try sink.deliver([try complete(pending, slot: slot, supervisor: supervisor)])
        }
        while true {
            var handout = dispenser.take(waiting: inFlight == nil)
            if case .full = handout {
                try finishInFlight()
                handout = dispenser.take(waiting: true)
            }
            guard case .positions(let positions) = handout else { break }
            var finished: [FinishedItem] = []
            for position in positions {
                switch try prepare(position, slot: slot, supervisor: supervisor) {
                case .finished(let item):
                    finished.append(item)
                case .pending(let pending):
                    try finishInFlight()
                    inFlight = pending
                }
            }
            if !finished.isEmpty { try sink.deliver(finished) }
        }
        try finishInFlight()
    }

    /// An item whose job is with a worker (or that needs none), and what
    /// finishing it needs.
    private struct PendingItem {
        var ledger: ItemLedger
        var reused: Result<Data, ItemFailure>?
        var job: ItemJob
        var ticket: Supervisor.Ticket?
    }

    private enum Prepared {
        case finished(FinishedItem)
        case pending(PendingItem)
    }

    /// The first half of an item, before its job: its ledger decides; items settled
    /// without a job finish here, the rest have their job submitted.
    private func prepare(_ index: Int, slot: Int, supervisor: Supervisor) throws -> Prepared {
        let item = manifest.items[index]
        let work = plan?.work[index]
        // The previous run's record: looked up here, one item at a time, not kept by the plan.
        let previous =
            ItemLedger.needsPreviousRecord(item, work: work) ? try state?.record(forKey: item.itemKey) : nil
        let ledger = ItemLedger(
            item: item, index: index, work: work, previous: previous, fingerprints: fingerprints,
            manifestDate: manifest.modificationDate, recordsState: state != nil)
        let reused = ledger.thumbnail == .reuse ? previous.map { reusedThumbnail(item, previous: $0) } : nil
        guard let path = item.imagePath, !ledger.settlesWithoutJob else {
            let (date, _) = ledger.date(read: nil, fileTime: { nil }, now: Date())
            return .finished(settle(ledger, thumbnail: reused, outcome: nil, date: date, dateGuess: nil))
        }
        let job = ledger.job(
            source: path, temporaryPath: TemporaryFile.name(in: OutputFolder.workFolder(options.outputFolder)))
        let ticket = job.makeThumbnail || job.makeStore ? try supervisor.submit(job, slot: slot) : nil
        return .pending(PendingItem(ledger: ledger, reused: reused, job: job, ticket: ticket))
    }

    /// The second half of an item, after its job: its store file put in place (or
    /// not), then settled by its ledger.
    private func complete(_ pending: PendingItem, slot: Int, supervisor: Supervisor) throws -> FinishedItem {
        let ledger = pending.ledger
        let item = ledger.item
        let job = pending.job
        var outcome = ItemOutcome()
        if let ticket = pending.ticket { outcome = try supervisor.outcome(of: ticket, slot: slot) }
        if let message = outcome.writeError { throw ThumbpipeError(.ioError, message) }
        trace?.record(
            outcome.spans, worker: slot, itemKey: item.itemKey, line: item.line,
            source: outcome.header.map {
                (
                    URL(fileURLWithPath: job.source).lastPathComponent, $0.format,
                    Double($0.width) * Double($0.height) / 1e6, outcome.bytesRead
                )
            })
        var thumbnail = ledger.thumbnailResult(outcome: outcome, reused: pending.reused)
        var appeared = false
        if outcome.storeWritten {
            if ledger.keepsWrittenStore(thumbnail) {
                var spans = Spans()
                if state != nil { OutputGuard.claim(item.itemKey, in: options.outputFolder) }
                let target = store.path(forKey: item.itemKey)
                try spans.measure(.write) {
                    appeared = try !TemporaryFile.commitClosed(
                        job.temporaryPath, to: target,
                        replacing: ledger.replacesStoreFile(claimedBefore: claimedBefore.contains(item.itemKey)))
                }
                outcome.spans.append(spans)
                if appeared {
                    outcome.storeWritten = false
                    let failure = ItemFailure(
                        .write, "\(target) appeared during the run; thumbpipe does not replace a file it did not write",
                        transient: true)
                    outcome.failure = failure
                    thumbnail = .failure(failure)
                }
            } else {
                unlink(job.temporaryPath)
                outcome.storeWritten = false
            }
        }
        if ledger.placesCarriedStore(outcome) {
            var spans = Spans()
            let target = store.path(forKey: item.itemKey)
            try spans.measure(.write) {
                if state != nil { OutputGuard.claim(item.itemKey, in: options.outputFolder) }
                _ = try Merge.place(job.source, at: target)
            }
            outcome.spans.append(spans)
            outcome.storeWritten = true
            outcome.storeHash = ContentHash.file(target)
            if outcome.sourceStamp == nil { outcome.sourceStamp = FileStamp(path: job.source) }
            if outcome.sourceHash == nil { outcome.sourceHash = outcome.storeHash }
        }
        let (date, guess) = ledger.date(
            read: .some(outcome.header), fileTime: { Self.modificationDate(job.source) }, now: Date())
        return settle(ledger, thumbnail: thumbnail, outcome: outcome, date: date, dateGuess: guess, keepStore: appeared)
    }

    /// Settles an item by its ledger with the facts only the file system knows,
    /// and deletes its store file when the ledger says so.
    private func settle(
        _ ledger: ItemLedger, thumbnail: Result<Data, ItemFailure>?, outcome: ItemOutcome?, date: Date,
        dateGuess: String?, keepStore: Bool = false
    ) -> FinishedItem {
        let item = ledger.item
        let target = store.path(forKey: item.itemKey)
        let inPlace =
            item.carried == .storeFile
            && item.imagePath.flatMap(OutputGuard.realPath) == OutputGuard.realPath(target)
        let settlement = ledger.settle(
            thumbnail: thumbnail, outcome: outcome, date: date, dateGuess: dateGuess, storeInPlace: inPlace,
            sourceStamp: { item.imagePath.flatMap { FileStamp(path: $0) } }, storeStamp: { FileStamp(path: target) },
            logs: hooks.onItem != nil)
        // A file that appeared at the store file's name is not ours to delete either.
        if settlement.deletesStore && !keepStore { store.delete(forKey: item.itemKey) }
        return settlement.finished
    }

    /// The previous run's thumbnail (or failure) of an item whose thumbnail is not redone.
    private func reusedThumbnail(_ item: ManifestItem, previous: ItemRecord) -> Result<Data, ItemFailure> {
        if let recorded = previous.failure { return .failure(recorded) }
        if let png = try? state?.thumbnail(forKey: item.itemKey) { return .success(png) }
        return .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state"))
    }

    static func modificationDate(_ path: String) -> Date? { FileInfo(path: path)?.modificationDate }
}
