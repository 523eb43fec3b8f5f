import Foundation

/// The ledger's first decision: an item's class and what to redo, from its
/// previous record and the facts gathered about it (``ItemFacts``). Pure: the
/// README's Nightly table is table-tested here, in process.
extension ItemLedger {
    /// The run's rules for classifying: its fingerprints and flags.
    struct Rules: Sendable, Equatable {
        var fingerprints: Fingerprints
        /// `--force`: redo everything (but what a missing source cannot redo).
        var force = false
        /// `--verify-content`: content decides, not stamps.
        var verifyContent = false
        /// `--prune-missing`: a missing source's outputs go.
        var pruneMissing = false
        /// `store.keepMetadata`: the store file carries the photo's metadata, so a
        /// photo whose metadata alone changed is redone all the same.
        var storeKeepsMetadata = false
    }

    /// Whether an item whose source is gone keeps what its last run made (an
    /// unmounted share, a moved folder), even under `--force`, which cannot redo it.
    static func keepsMissingSource(path: String, previous: ItemRecord, facts: ItemFacts, rules: Rules) -> Bool {
        facts.source == nil && facts.sourceGone && !rules.pruneMissing && previous.failure == nil
            && previous.sourcePath == path
    }

    /// Why an item whose photo is there but cannot be used tonight keeps what its
    /// last run made: it cannot be read (a permission glitch on a share), or it is
    /// empty (being rewritten). Never for an item whose record is a failure (there is
    /// nothing good to keep), nor for a photo that was empty when it was recorded.
    static func keepsUnusableSource(previous: ItemRecord, facts: ItemFacts) -> WorkReasons? {
        guard previous.failure == nil, !facts.sourceGone else { return nil }
        if facts.unreadable != nil || facts.source == nil { return .sourceUnreadable }
        if facts.source?.size == 0 && previous.sourceSize != 0 { return .sourceEmpty }
        return nil
    }

    /// Whether the source's stamp (or path) differs from the record's.
    static func stampChanged(path: String, previous: ItemRecord, stamp: FileStamp?) -> Bool {
        previous.sourcePath != path || stamp?.size != previous.sourceSize || stamp?.modified != previous.sourceModified
    }

    /// Whether the source keeps its path, size and time but is another file, or
    /// was changed in place with its time set back: its inode or change time moved
    /// (where the record knows them).
    static func identityChanged(path: String, previous: ItemRecord, stamp: FileStamp?) -> Bool {
        guard let stamp, !stampChanged(path: path, previous: previous, stamp: stamp) else { return false }
        let recorded = FileStamp(
            size: previous.sourceSize, modified: previous.sourceModified, inode: previous.sourceInode,
            changed: previous.sourceChanged)
        return recorded.identityDiffers(from: stamp)
    }

    /// Whether content must decide: always with `--verify-content`; otherwise for a
    /// source under a new path with the recorded size (a move is no reason to decode).
    /// Never under `--force` or for a rebuilt record, which redo the item anyway, nor
    /// when the record has no hash to compare with.
    static func needsSourceHash(path: String, previous: ItemRecord, stamp: FileStamp?, rules: Rules) -> Bool {
        guard !rules.force, !previous.isRebuilt, !previous.sourceHash.isEmpty else { return false }
        return contentDecides(path: path, previous: previous, stamp: stamp, rules: rules)
    }

    /// Whether content, not the stamp, decides if the source is the same: with
    /// `--verify-content`, for a source under a new path with the recorded size,
    /// or for one whose identity changed under the recorded stamp.
    static func contentDecides(path: String, previous: ItemRecord, stamp: FileStamp?, rules: Rules) -> Bool {
        rules.verifyContent
            || (stampChanged(path: path, previous: previous, stamp: stamp) && previous.sourcePath != path
                && stamp?.size == previous.sourceSize)
            || identityChanged(path: path, previous: previous, stamp: stamp)
    }

    /// The source's verdict: changed, or the same (by stamp, or by content under
    /// a new stamp or path: then recorded anew, and moved when its path changed).
    static func sourceVerdict(path: String, previous: ItemRecord, facts: ItemFacts, rules: Rules) -> (
        changed: Bool, restamp: (path: String, stamp: FileStamp)?, moved: Bool
    ) {
        let stampChanged =
            stampChanged(path: path, previous: previous, stamp: facts.source)
            || identityChanged(path: path, previous: previous, stamp: facts.source)
        guard contentDecides(path: path, previous: previous, stamp: facts.source, rules: rules) else {
            return (stampChanged, nil, false)
        }
        let same = !previous.sourceHash.isEmpty && facts.sourceHash == previous.sourceHash
        guard stampChanged && same, let stamp = facts.source else { return (!same, nil, false) }
        return (false, (path, stamp), previous.sourcePath != path)
    }

    /// Whether the store file must be looked at: the source is the same, the item
    /// did not fail, and its store settings did not change (else it is made again).
    static func checksStoreFile(path: String, previous: ItemRecord, facts: ItemFacts, rules: Rules) -> Bool {
        guard !rules.force, !previous.isRebuilt, previous.failure == nil,
            Fingerprint.change(from: previous.storeFingerprint, to: rules.fingerprints.store) == nil
        else { return false }
        return !sourceVerdict(path: path, previous: previous, facts: facts, rules: rules).changed
            || mayKeepImage(previous: previous, rules: rules)
    }

    /// Whether a changed photo may be the same image under new metadata (a title
    /// written into it): its record knows its image-data hash, and its store file
    /// does not carry the metadata. Its job then compares the hashes first.
    static func mayKeepImage(previous: ItemRecord, rules: Rules) -> Bool {
        previous.imageHash != nil && previous.failure == nil && !rules.storeKeepsMetadata
    }

    /// Among gone items of the photo's size, the one whose photo it is: the same
    /// content, made with this run's settings and code, and not missing.
    static func movesFrom(_ candidates: [ItemRecord], size: Int64, hash: String, fingerprints: Fingerprints) -> Int? {
        candidates.firstIndex {
            $0.sourceSize == size && $0.sourceHash == hash && $0.thumbnailFingerprint == fingerprints.thumbnail
                && $0.storeFingerprint == fingerprints.store && $0.missingSince == nil
        }
    }

    /// An item without a photo: unchanged, edited, or changed when it lost its photo.
    /// - Parameter hadPhoto: its record had one.
    static func classifyWithoutPhoto(hadPhoto: Bool, fieldsEdited: Bool, unrecorded: WorkReasons) -> ItemWork {
        let reasons: WorkReasons = hadPhoto ? .imageRemoved : (fieldsEdited ? .fieldsChanged : .noImage)
        return ItemWork(
            itemClass: hadPhoto ? .changed : (fieldsEdited ? .metadata : .unchanged), needsThumbnail: false,
            needsStore: false, reasons: reasons.union(unrecorded))
    }

    /// An item with a photo and a previous record: its class, what to redo and why.
    /// - Parameters:
    ///   - fieldsEdited: its name or fields differ from the recorded ones.
    ///   - unrecorded: `.fieldsUnrecorded` when the record holds no hash of them.
    static func classify(
        path: String, previous: ItemRecord, facts: ItemFacts, fieldsEdited: Bool, unrecorded: WorkReasons,
        rules: Rules
    ) -> ItemWork {
        if keepsMissingSource(path: path, previous: previous, facts: facts, rules: rules) {
            return ItemWork(itemClass: .kept, needsThumbnail: false, needsStore: false, reasons: .sourceMissing)
        }
        if let unusable = keepsUnusableSource(previous: previous, facts: facts) {
            var work = ItemWork(itemClass: .kept, needsThumbnail: false, needsStore: false, reasons: unusable)
            work.unreadable = unusable == .sourceUnreadable ? (facts.unreadable ?? .accessDenied).rawValue : 0
            return work
        }
        if rules.force || previous.isRebuilt {
            return ItemWork(
                itemClass: .changed, needsThumbnail: true, needsStore: true,
                reasons: rules.force ? .forced : .stateRebuilt)
        }
        let source = sourceVerdict(path: path, previous: previous, facts: facts, rules: rules)
        if source.changed {
            let replaced =
                identityChanged(path: path, previous: previous, stamp: facts.source) && !rules.verifyContent
            var work = ItemWork(
                itemClass: .changed, needsThumbnail: true, needsStore: true,
                reasons: replaced ? .sourceReplaced : .sourceChanged)
            // Nothing but the photo changed (settings, code, store file all as recorded):
            // its job may find that only its metadata did.
            if mayKeepImage(previous: previous, rules: rules) {
                let other = redone(previous: previous, facts: facts, rules: rules)
                work.mayKeepImage = !other.thumbnail && !other.store
            }
            return work
        }
        var (needsThumbnail, needsStore, reasons) = redone(previous: previous, facts: facts, rules: rules)
        // A source back after missing: nothing to redo, but its record forgets since when.
        if !needsThumbnail && !needsStore && previous.missingSince != nil { reasons.insert(.sourceBack) }
        let changed = needsThumbnail || needsStore || reasons.contains(.sourceBack)
        let sidecarsEdited = !changed && sidecarsChanged(previous: previous, facts: facts)
        let itemClass: ItemClass =
            changed ? .changed : source.moved ? .moved : fieldsEdited || sidecarsEdited ? .metadata : .unchanged
        if source.moved { reasons.insert(.moved) }
        if fieldsEdited { reasons.insert(.fieldsChanged) }
        if sidecarsEdited { reasons.insert(.sidecarsChanged) }
        var work = ItemWork(
            itemClass: itemClass, needsThumbnail: needsThumbnail, needsStore: needsStore,
            reasons: (reasons.isEmpty ? .unchanged : reasons).union(unrecorded), sourceUnchanged: true,
            restamp: source.restamp)
        work.readsMetadata = sidecarsEdited
        return work
    }

    /// Whether the photo's sidecars are not the ones recorded: one appeared,
    /// changed or went. A record from before sidecars were recorded (nil) knows of
    /// none: a photo with sidecars then is read again once, to record them.
    static func sidecarsChanged(previous: ItemRecord, facts: ItemFacts) -> Bool {
        guard let now = facts.sidecars, previous.failure == nil else { return false }
        return now != (previous.sidecarStamp ?? "")
    }

    /// What of an item whose source is the same must be redone, and why: a kept
    /// failure is retried only under new limits; a good item's outputs whose
    /// fingerprint moved are redone, and its store file when it is missing or damaged.
    static func redone(previous: ItemRecord, facts: ItemFacts, rules: Rules) -> (
        thumbnail: Bool, store: Bool, reasons: WorkReasons
    ) {
        var reasons: WorkReasons = []
        var needsThumbnail: Bool
        var needsStore: Bool
        if previous.failure != nil {
            // A failure is kept while neither its source nor the limits change.
            let retry = previous.failureFingerprint != rules.fingerprints.failure
            if retry { reasons.insert(.limitsChanged) }
            needsThumbnail = retry
            needsStore = retry
        } else {
            let thumbnailChange = Fingerprint.change(
                from: previous.thumbnailFingerprint, to: rules.fingerprints.thumbnail)
            let storeChange = Fingerprint.change(from: previous.storeFingerprint, to: rules.fingerprints.store)
            needsThumbnail = thumbnailChange != nil
            needsStore = storeChange != nil
            if thumbnailChange == .settings { reasons.insert(.thumbnailSettingsChanged) }
            if storeChange == .settings { reasons.insert(.storeSettingsChanged) }
            if thumbnailChange == .code || storeChange == .code { reasons.insert(.codeChanged) }
        }
        if previous.failure == nil && !needsStore {
            if facts.store == nil {
                needsStore = true
                reasons.insert(.storeFileMissing)
            } else if facts.store?.size != previous.storeSize || facts.store?.modified != previous.storeModified
                || (rules.verifyContent && facts.storeHash != previous.storeHash)
            {
                needsStore = true
                reasons.insert(.storeFileDamaged)
            }
        }
        return (needsThumbnail, needsStore, reasons)
    }
}
