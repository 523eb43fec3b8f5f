import Foundation

/// What the file system says of one item with a photo and a previous record:
/// its source's stamp (and whether its name exists at all), its content hash
/// when classifying needs it, and its store file's stamp and hash. Gathered by
/// ``gather(path:previous:storePath:rules:)``, every `stat` and hash once, so
/// that ``ItemLedger/classify(path:previous:facts:fieldsEdited:unrecorded:rules:)``
/// reads no file.
struct ItemFacts: Sendable, Equatable {
    /// The source's stamp; nil when it is not a regular file that can be stat'ed.
    var source: FileStamp?
    /// The source's name does not exist (gone, not merely unreadable).
    var sourceGone = false
    /// Why the source, which is there, cannot be read (it or a folder above it
    /// refuses this user, an I/O error); nil when it can be, or was not tried.
    var unreadable: Errno?
    /// The source's content hash, when asked for.
    var sourceHash: String?
    /// The store file's stamp, when it was looked at.
    var store: FileStamp?
    /// The store file's content hash (with `--verify-content`).
    var storeHash: String?
    /// The photo's sidecars (``Sidecars/stamp(for:)``), when its own stamp is the
    /// recorded one (a photo that is redone has them read anyway).
    var sidecars: String?

    /// Gathers what classifying the item needs, asking the ledger's pure rules
    /// which facts those are: the source's stamp always, whether its name exists
    /// only when it cannot be stat'ed, its hash only when its stamp cannot decide,
    /// whether it can be read only when it would be read (hashed, or redone), and
    /// the store file only when the source is the same and the store would be kept.
    static func gather(path: String, previous: ItemRecord, storePath: String, rules: ItemLedger.Rules) -> ItemFacts {
        var facts = ItemFacts(source: FileStamp(path: path))
        if facts.source == nil {
            let error = FileSystem.statError(path)
            facts.sourceGone = error == .noEntry || error == Errno(rawValue: ENOTDIR)
            if !facts.sourceGone { facts.unreadable = error }
        }
        if ItemLedger.keepsMissingSource(path: path, previous: previous, facts: facts, rules: rules) { return facts }
        guard facts.source != nil else { return facts }
        if previous.failure == nil && !rules.force
            && !ItemLedger.stampChanged(path: path, previous: previous, stamp: facts.source)
        {
            facts.sidecars = Sidecars.stamp(for: path)
        }
        if ItemLedger.needsSourceHash(path: path, previous: previous, stamp: facts.source, rules: rules) {
            facts.sourceHash = ContentHash.file(path)
            if facts.sourceHash == nil { facts.unreadable = FileSystem.readError(path) }
        } else if ItemLedger.stampChanged(path: path, previous: previous, stamp: facts.source) || rules.force {
            // It will be read by its job: one that cannot be is kept, not failed and emptied.
            facts.unreadable = FileSystem.readError(path)
        }
        guard ItemLedger.checksStoreFile(path: path, previous: previous, facts: facts, rules: rules) else {
            return facts
        }
        facts.store = FileStamp(path: storePath)
        if rules.verifyContent, let store = facts.store, store.size == previous.storeSize,
            store.modified == previous.storeModified
        {
            facts.storeHash = ContentHash.file(storePath)
        }
        return facts
    }

    /// The gone item whose photo `path` is, by size and then content, if any
    /// (``ItemLedger/movesFrom(_:size:hash:fingerprints:)`` decides among the
    /// candidates): taken out of `movable`, with the photo's stamp.
    static func movedSource(
        _ path: String, among movable: inout [Int64: [ItemRecord]], fingerprints: ItemLedger.Fingerprints
    ) -> (key: String, stamp: FileStamp)? {
        guard let stamp = FileStamp(path: path), let candidates = movable[stamp.size], !candidates.isEmpty,
            let hash = ContentHash.file(path),
            let index = ItemLedger.movesFrom(candidates, size: stamp.size, hash: hash, fingerprints: fingerprints)
        else { return nil }
        let key = candidates[index].itemKey
        movable[stamp.size]?.remove(at: index)
        return (key, stamp)
    }
}
