import Foundation

/// One item's way through a run, in two halves around its job: ``prepare(_:slot:supervisor:)``
/// builds its ``ItemLedger`` and submits the job the ledger asks for;
/// ``complete(_:slot:supervisor:)`` takes the job's outcome, puts its store file in
/// place as the ledger says, and has the ledger settle it. The ledger decides;
/// these carry out what only the file system and the workers can do.
extension BatchRunner {
    /// An item whose job is with a worker (or that needs none), and what
    /// finishing it needs.
    struct PendingItem {
        var ledger: ItemLedger
        var reused: Result<Data, ItemFailure>?
        var job: ItemJob
        var ticket: Supervisor.Ticket?
    }

    enum Prepared {
        case finished(FinishedItem)
        case pending(PendingItem)
    }

    /// The first half of an item, before its job: its ledger decides; items settled
    /// without a job finish here, the rest have their job submitted.
    func prepare(_ index: Int, slot: Int, supervisor: Supervisor) throws -> Prepared {
        let item = manifest.items[index]
        let work = plan?.work[index]
        // The previous run's record (of the key it moved from, for a moved item):
        // looked up here, one item at a time, not kept by the plan.
        let movedFrom = plan?.moves[index]
        let previous =
            ItemLedger.needsPreviousRecord(item, work: work)
            ? try state?.record(forKey: movedFrom ?? item.itemKey) : nil
        let ledger = ledger(index, previous: previous)
        let reused = previous.flatMap { previous in
            ledger.thumbnail == .reuse
                ? ledger.reusedThumbnail(
                    recorded: previous,
                    png: previous.failure == nil ? try? state?.thumbnail(forKey: movedFrom ?? item.itemKey) : nil)
                : nil
        }
        _ = try store.carryOut(
            ledger.storeEffectBeforeJob(reused: reused), key: item.itemKey, source: item.imagePath, bytes: nil,
            claim: claim)
        guard let path = item.imagePath, !ledger.settlesWithoutJob else {
            let (date, _) = ledger.date(read: nil, fileTime: { nil }, now: Date())
            return .finished(settle(ledger, thumbnail: reused, outcome: nil, date: date, dateGuess: nil))
        }
        let job = ledger.job(source: path)
        let ticket = job.makeThumbnail || job.makeStore ? try supervisor.submit(job, slot: slot) : nil
        return .pending(PendingItem(ledger: ledger, reused: reused, job: job, ticket: ticket))
    }

    /// The second half of an item, after its job: its store file put in place (or
    /// not), then settled by its ledger.
    func complete(_ pending: PendingItem, slot: Int, supervisor: Supervisor) throws -> FinishedItem {
        let ledger = pending.ledger
        let item = ledger.item
        let job = pending.job
        var outcome = ItemOutcome()
        if let ticket = pending.ticket {
            outcome = try supervisor.outcome(of: ticket, slot: slot)
            // The worker's own time (before the parent's write is added), for the utilisation.
            let busy = outcome.spans.totals.values.reduce(0, +)
            slotClocks.withLock {
                $0[slot].busySeconds += busy
                $0[slot].waitingSeconds += Double(outcome.waitedNanoseconds ?? 0) / 1e9
            }
        }
        // A worker's failed write (its memory file hit a file-size limit, memory ran out): the run's, named by its target.
        if let message = outcome.writeError {
            throw ThumbpipeError(.ioError, "\(store.path(forKey: item.itemKey)): \(message)")
        }
        var thumbnail = ledger.thumbnailResult(outcome: outcome, reused: pending.reused)
        let effect = ledger.storeEffectAfterJob(
            outcome: outcome, thumbnail: thumbnail, claimedBefore: claimedBefore.contains(item.itemKey))
        let bytes = outcome.store
        outcome.store = nil
        var spans = Spans()
        let fact = try spans.measure(.write) {
            try store.carryOut(effect, key: item.itemKey, source: item.imagePath, bytes: bytes, claim: claim)
        }
        if effect != .none && effect != .discardWritten { outcome.spans.append(spans) }
        let keepStore = ledger.apply(fact, effect: effect, to: &outcome, thumbnail: &thumbnail)
        // After the parent's write, so the trace has the same spans as the report.
        trace?.record(
            outcome.spans, worker: slot, itemKey: item.itemKey, line: item.line,
            source: outcome.header.map {
                (
                    URL(fileURLWithPath: job.source).lastPathComponent, $0.format,
                    Double($0.width) * Double($0.height) / 1e6, outcome.bytesRead, outcome.storePath?.rawValue
                )
            })
        let (date, guess) = ledger.date(
            read: .some(outcome.header), fileTime: { Self.modificationDate(job.source) }, now: Date())
        return settle(
            ledger, thumbnail: thumbnail, outcome: outcome, date: date, dateGuess: guess, keepStore: keepStore)
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

    static func modificationDate(_ path: String) -> Date? { FileInfo(path: path)?.modificationDate }

    /// Notes a store-file name about to be placed, when the run keeps a state.
    func claim(_ key: String) { if state != nil { options.output.claim(key) } }
}
