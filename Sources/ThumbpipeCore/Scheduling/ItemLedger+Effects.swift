import Foundation

/// The ledger's decisions around an item's job: what becomes of a reused
/// thumbnail, which store file goes where, and what the file system's answer
/// (a file that appeared, a carried file's hash) means for the item. The runner
/// carries out each ``StoreEffect`` and reports a ``StoreFact``; it decides nothing.
extension ItemLedger {
    /// The previous run's thumbnail of an item whose thumbnail is not redone: its
    /// recorded failure, its PNG from the state, or a failure when the state lost
    /// it or holds something else (`problem`, ``PNGInfo/thumbnailProblem(_:width:height:)``'s
    /// answer) and the item cannot be made again (``remakingThumbnail()``).
    func reusedThumbnail(recorded previous: ItemRecord, png: Data?, problem: String? = nil) -> Result<
        Data, ItemFailure
    > {
        if let recorded = previous.failure { return .failure(recorded) }
        guard let png else {
            return .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state"))
        }
        if let problem {
            return .failure(
                ItemFailure(.decode, "the previous run's thumbnail in its state is damaged (\(problem))"))
        }
        return .success(png)
    }

    /// What the runner does with the item's store file.
    enum StoreEffect: Sendable, Equatable {
        /// Nothing.
        case none
        /// The store file of the key the item moved from, linked (or copied) to the item's name.
        case placeMoved(from: String)
        /// The bytes the job made, written under a temporary name and renamed into
        /// place; `replacing` says whether a file at the name may be replaced.
        case commitWritten(replacing: Bool)
        /// The migrated source itself, placed as the store file (linked or copied).
        case placeCarried
        /// Bytes the job made that do not go into place (the item has no thumbnail).
        case discardWritten
    }

    /// What a ``StoreEffect`` came to.
    enum StoreFact: Sendable, Equatable {
        /// Done as asked (or nothing was asked).
        case done
        /// A file appeared at the store file's name during the run: not replaced.
        case appeared(path: String)
        /// The carried source is in place, with its content hash and stamp.
        case placed(hash: String?, sourceStamp: FileStamp?)
    }

    /// Before the job: a moved item's store file goes to its new name once its
    /// reused thumbnail is known good.
    func storeEffectBeforeJob(reused: Result<Data, ItemFailure>?) -> StoreEffect {
        if case .move(let from) = store, case .success = reused { return .placeMoved(from: from) }
        return .none
    }

    /// After the job: the bytes it wrote go into place only with a thumbnail (an item
    /// is never half made), and over an existing file only one a previous run made
    /// (it has a record, or a killed run claimed the name); a migrated item's store
    /// file is placed unless its source failed.
    /// - Parameter claimedBefore: a killed run claimed the item's store-file name.
    func storeEffectAfterJob(
        outcome: ItemOutcome, thumbnail: Result<Data, ItemFailure>?, claimedBefore: Bool
    ) -> StoreEffect {
        if outcome.storeWritten && outcome.store != nil {
            guard case .success = thumbnail else { return .discardWritten }
            return .commitWritten(replacing: previous != nil || claimedBefore)
        }
        if store == .carry && outcome.failure == nil { return .placeCarried }
        return .none
    }

    /// What the effect's fact means for the item: a file that appeared is a failure
    /// of this run (tried again next run), not written over and not deleted; a
    /// carried file's hash is its store's and, where the job took none, its source's.
    /// - Returns: whether the store file at the item's name must be left alone.
    func apply(
        _ fact: StoreFact, effect: StoreEffect, to outcome: inout ItemOutcome,
        thumbnail: inout Result<Data, ItemFailure>?
    ) -> Bool {
        switch (effect, fact) {
        case (.discardWritten, _):
            outcome.storeWritten = false
        case (.commitWritten, .appeared(let path)):
            outcome.storeWritten = false
            let failure = ItemFailure(
                .write, "\(path) appeared during the run; thumbpipe does not replace a file it did not write",
                transient: true)
            outcome.failure = failure
            thumbnail = .failure(failure)
            return true
        case (.placeCarried, .placed(let hash, let stamp)):
            outcome.storeWritten = true
            outcome.storeHash = hash
            if outcome.sourceStamp == nil { outcome.sourceStamp = stamp }
            if outcome.sourceHash == nil { outcome.sourceHash = hash }
        default:
            break
        }
        return false
    }
}
