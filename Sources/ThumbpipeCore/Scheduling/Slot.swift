import Foundation

/// One worker slot of a run: it takes items from the dispenser and delivers them
/// to the sink, each in two halves around its job. ``prepare(_:)`` builds the
/// item's ``ItemLedger`` and submits the job the ledger asks for; ``complete(_:)``
/// takes the job's outcome, carries out the store effects the ledger decides, and
/// has the ledger settle it. The ledger decides; the slot carries out what only
/// the file system and the workers can do.
struct Slot {
    let runner: BatchRunner
    let slot: Int
    let dispenser: Dispenser
    let sink: OrderedSink
    let supervisor: Supervisor

    private var manifest: Manifest { runner.manifest }
    private var plan: IncrementalPlan? { runner.plan }
    private var state: RunState? { runner.state }
    private var store: ImageStore { runner.store }
    private var options: RunOptions { runner.options }
    private var hooks: RunHooks { runner.hooks }
    private var trace: TraceWriter? { runner.trace }

    /// One slot's loop: items from the dispenser to the sink, with the next
    /// item's job already queued at the worker while the slot waits for the
    /// one before (so the worker goes from item to item without waiting for
    /// the parent's bookkeeping).
    func run() throws {
        var inFlight: PendingItem? = nil
        func finishInFlight() throws {
            guard let pending = inFlight else { return }
            inFlight = nil
            try sink.deliver([try complete(pending)])
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
                switch try prepare(position) {
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
    struct PendingItem {
        var ledger: ItemLedger
        var reused: Result<Data, ItemFailure>?
        var job: ItemJob
        var ticket: Supervisor.Ticket?
        /// The recorded thumbnail, kept when the job finds the photo's image data as recorded.
        var keepable: Data? = nil
    }

    enum Prepared {
        case finished(FinishedItem)
        case pending(PendingItem)
    }

    /// The first half of an item, before its job: its ledger decides; items settled
    /// without a job finish here, the rest have their job submitted.
    func prepare(_ index: Int) throws -> Prepared {
        let item = manifest.items[index]
        let work = plan?.work[index]
        // The previous run's record (of the key it moved from, for a moved item):
        // looked up here, one item at a time, not kept by the plan.
        let movedFrom = plan?.moves[index]
        let previous =
            ItemLedger.needsPreviousRecord(item, work: work)
            ? try state?.record(forKey: movedFrom ?? item.itemKey) : nil
        var ledger = runner.ledger(index, previous: previous)
        var reused: Result<Data, ItemFailure>? = nil
        if let previous, ledger.thumbnail == .reuse {
            // The state's thumbnail goes into the archive as it is, so it is checked
            // first; one that is gone or damaged is made again when the photo is there.
            let (png, problem) = recordedThumbnail(previous, key: movedFrom ?? item.itemKey)
            if problem != nil, let remade = ledger.remakingThumbnail() {
                ledger = remade
            } else {
                reused = ledger.reusedThumbnail(recorded: previous, png: png, problem: problem)
            }
        }
        // A changed photo that may be the same image: its thumbnail is reused if its
        // job finds so, and only a good one is worth the comparison.
        var keepable: Data? = nil
        if let previous, work?.mayKeepImage == true {
            let (png, problem) = recordedThumbnail(previous, key: item.itemKey)
            if problem == nil { keepable = png }
        }
        _ = try store.carryOut(
            ledger.storeEffectBeforeJob(reused: reused), key: item.itemKey, source: item.imagePath, bytes: nil,
            claim: claim)
        guard let path = item.imagePath, !ledger.settlesWithoutJob else {
            let date = ledger.date(read: nil, fileTime: { nil }, now: Date()).date
            return .finished(settle(ledger, thumbnail: reused, outcome: nil, date: date, dateGuess: nil))
        }
        var job = ledger.job(source: path)
        if keepable == nil { job.recordedImageHash = nil }
        // Its sidecars' bytes, for the worker to read its date from (a fact, gathered here).
        if ledger.needsWorker { (job.sidecars, job.sidecarStamp) = Sidecars.read(for: path) }
        let ticket = ledger.needsWorker ? try supervisor.submit(job, slot: slot) : nil
        return .pending(PendingItem(ledger: ledger, reused: reused, job: job, ticket: ticket, keepable: keepable))
    }

    /// The state's thumbnail of `key` and what is wrong with it (nil when nothing
    /// is; "missing" when the state has none); none for a recorded failure.
    private func recordedThumbnail(_ previous: ItemRecord, key: String) -> (png: Data?, problem: String?) {
        guard previous.failure == nil else { return (nil, nil) }
        let png = try? state?.thumbnail(forKey: key)
        let problem =
            png.map {
                PNGInfo.thumbnailProblem(
                    $0, width: runner.settings.thumbnail.pixelWidth, height: runner.settings.thumbnail.pixelHeight)
            } ?? "missing"
        return (png, problem)
    }

    /// The second half of an item, after its job: its store file put in place (or
    /// not), then settled by its ledger.
    func complete(_ pending: PendingItem) throws -> FinishedItem {
        var ledger = pending.ledger
        var reused = pending.reused
        let item = ledger.item
        let job = pending.job
        var outcome = ItemOutcome()
        if let ticket = pending.ticket {
            outcome = try supervisor.outcome(of: ticket, slot: slot)
            // Only its metadata changed: a metadata item, its outputs kept.
            if outcome.imageUnchanged, outcome.failure == nil, let png = pending.keepable,
                let kept = ledger.keepingImage()
            {
                ledger = kept
                reused = .success(png)
            }
            // The worker's own time (before the parent's write is added), for the utilisation.
            let busy = outcome.spans.totals.values.reduce(0, +)
            runner.slotClocks.withLock {
                $0[slot].busySeconds += busy
                $0[slot].waitingSeconds += Double(outcome.waitedNanoseconds ?? 0) / 1e9
            }
        }
        // A worker's failed write (its memory file hit a file-size limit, memory ran out): the run's, named by its target.
        if let message = outcome.writeError {
            throw ThumbpipeError(.ioError, "\(store.path(forKey: item.itemKey)): \(message)")
        }
        var thumbnail = ledger.thumbnailResult(outcome: outcome, reused: reused)
        let effect = ledger.storeEffectAfterJob(
            outcome: outcome, thumbnail: thumbnail, claimedBefore: runner.claimedBefore.contains(item.itemKey))
        let bytes = outcome.store
        outcome.store = nil
        var spans = Spans()
        let fact = try spans.measure(.write) {
            try store.carryOut(effect, key: item.itemKey, source: item.imagePath, bytes: bytes, claim: claim)
        }
        if effect != .none && effect != .discardWritten { outcome.spans.append(spans) }
        let keepStore = ledger.apply(fact, effect: effect, to: &outcome, thumbnail: &thumbnail)
        var storeBytes: Int64 = 0
        if case .commitWritten = effect, fact == .done { storeBytes = Int64(bytes?.count ?? 0) }
        // After the parent's write, so the trace has the same spans as the report.
        trace?.record(
            outcome.spans, worker: slot, itemKey: item.itemKey, line: item.line,
            source: outcome.header.map {
                (
                    URL(fileURLWithPath: job.source).lastPathComponent, $0.format,
                    Double($0.width) * Double($0.height) / 1e6, outcome.bytesRead, outcome.storeRoute
                )
            })
        let dated = ledger.date(
            read: .some(outcome.header), fileTime: { Self.modificationDate(job.source) }, now: Date())
        var finished = settle(
            ledger, thumbnail: thumbnail, outcome: outcome, date: dated.date, dateGuess: dated.guess,
            keepStore: keepStore)
        finished.storeBytesWritten = storeBytes
        finished.zoneAssumed = dated.zone == .assumed && finished.failure == nil
        // The sidecars as the job read them: a later edit is a metadata change.
        if outcome.header != nil, let stamp = job.sidecarStamp { finished.record?.sidecarStamp = stamp }
        return finished
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
            logs: hooks.onItem != nil, storeAppeared: keepStore)
        if settlement.deletesStore { store.delete(forKey: item.itemKey) }
        return settlement.finished
    }

    static func modificationDate(_ path: String) -> Date? { FileInfo(path: path)?.modificationDate }

    /// Notes a store-file name about to be placed, when the run keeps a state.
    func claim(_ key: String) { if state != nil { options.output.claim(key) } }
}
