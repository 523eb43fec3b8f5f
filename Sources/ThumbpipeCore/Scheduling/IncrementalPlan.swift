import Foundation

/// The plan of an incremental run: per manifest item what to do, and which old items to remove.
public struct IncrementalPlan: Sendable {
    /// One entry per manifest item, in manifest order.
    public var work: [ItemWork]
    /// Items of the previous run that the manifest no longer has (and that did
    /// not move to a new key): their store files and records go.
    public var removed: [RemovedItem]
    /// The fingerprints of the settings that shape thumbnails and store files.
    public var thumbnailFingerprint: String
    public var storeFingerprint: String
    /// Positions of unchanged items whose failure is kept from the previous run.
    public var keptFailures: [Int] = []
    /// What the unchanged items took when they were made, in seconds.
    public var savedSeconds = 0.0
    /// Items that moved to a new key: the position of the item under its new key,
    /// and the key its outputs are taken from (whose record and store-file name go
    /// once they are).
    public var moves: [Int: String] = [:]

    /// An item the previous run had and this manifest has not.
    public struct RemovedItem: Sendable, Equatable, CustomStringConvertible {
        public var itemKey: String
        /// Its name and source path as last recorded ("" when a state of schema 1 or 2 did not record the name).
        public var itemName: String
        public var sourcePath: String
        /// The source as shown to the user (``Manifest/shown(_:)``): relative to the
        /// manifest's folder, as the items it still names are.
        public var source: String

        public init(itemKey: String, itemName: String, sourcePath: String, source: String? = nil) {
            self.itemKey = itemKey
            self.itemName = itemName
            self.sourcePath = sourcePath
            self.source = source ?? sourcePath
        }

        /// `Bike (photos/bike.jpg) KEY`.
        public var description: String { Self.line(itemName: itemName, source: source, itemKey: itemKey) }

        /// A removed item in one line, as the summary, the refusal and the dry run show it.
        static func line(itemName: String, source: String, itemKey: String) -> String {
            "\(itemName.isEmpty ? "(unnamed)" : itemName) (\(source.isEmpty ? "no image" : source)) \(itemKey)"
        }
    }

    /// How many items fall in each class.
    public var counts: [ItemClass: Int] {
        var result = Dictionary(uniqueKeysWithValues: ItemClass.allCases.map { ($0, 0) })
        for entry in work { result[entry.itemClass, default: 0] += 1 }
        result[.removed] = removed.count
        return result
    }

    /// How the changed items changed: `source`, `settings`, `algorithm`, `output`…, with counts.
    public var changeKinds: [String: Int] {
        var result: [String: Int] = [:]
        for entry in work where entry.itemClass == .changed { result[entry.reasons.changeKind, default: 0] += 1 }
        return result
    }

    /// Why the kept items kept their outputs: `source missing`, `unreadable`, `empty`, with counts.
    public var keptKinds: [String: Int] {
        var result: [String: Int] = [:]
        for entry in work where entry.itemClass == .kept {
            let kind =
                entry.reasons.contains(.sourceUnreadable)
                ? "unreadable" : entry.reasons.contains(.sourceEmpty) ? "empty" : "source missing"
            result[kind, default: 0] += 1
        }
        return result
    }

    /// The plan in one line: `3 new, 2 changed (1 source, 1 settings), 1 metadata,
    /// 1 moved, 40 unchanged, 1 removed, 1 kept (source missing)` (classes with no
    /// item left out, but for new, changed, unchanged and removed).
    public var summary: String { Self.summary(counts, changeKinds, kept: keptKinds) }

    /// The line ``summary`` shows, from counts (a run's result keeps them).
    public static func summary(_ counts: [ItemClass: Int], _ kinds: [String: Int], kept: [String: Int]? = nil)
        -> String
    {
        func count(_ c: ItemClass) -> Int { counts[c] ?? 0 }
        var parts = ["\(count(.new)) new"]
        let kindText = kinds.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        parts.append("\(count(.changed)) changed" + (kindText.isEmpty ? "" : " (\(kindText))"))
        if count(.metadata) > 0 { parts.append("\(count(.metadata)) metadata") }
        if count(.moved) > 0 { parts.append("\(count(.moved)) moved") }
        parts.append("\(count(.unchanged)) unchanged")
        parts.append("\(count(.removed)) removed")
        if count(.kept) > 0 {
            let why =
                (kept ?? [:]).filter { $0.key != "source missing" }.isEmpty
                ? "source missing"
                : (kept ?? [:]).sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            parts.append("\(count(.kept)) kept (\(why))")
        }
        return parts.joined(separator: ", ")
    }

    /// Whether nothing at all changed: no item new, changed or removed.
    public var nothingChanged: Bool {
        removed.isEmpty && work.allSatisfy { $0.itemClass == .unchanged && $0.restamp == nil }
    }

    /// Classifies every item against the state of the previous run: one
    /// sequential scan of the state joined with the manifest's keys, then the
    /// full record of only the items with a photo.
    /// - Parameters:
    ///   - state: the previous run's state, or nil for a first run.
    ///   - force: redo everything.
    ///   - verifyContent: re-hash sources and store files instead of trusting size and mtime.
    ///   - pruneMissing: an item whose source is missing loses its outputs (it fails),
    ///     instead of keeping its last good ones.
    public static func make(
        manifest: Manifest, settings: PipelineSettings, state: RunState?, output: OutputFolder, force: Bool,
        verifyContent: Bool, pruneMissing: Bool = false
    ) throws -> IncrementalPlan {
        let rules = ItemLedger.Rules(
            fingerprints: ItemLedger.Fingerprints(
                thumbnail: thumbnailFingerprint(settings), store: storeFingerprint(settings),
                failure: failureFingerprint(settings)),
            force: force, verifyContent: verifyContent, pruneMissing: pruneMissing,
            storeKeepsMetadata: settings.store.keepMetadata)
        let joined = try Joined(manifest: manifest, state: state)
        var planner = Planner(
            manifest: manifest, state: state, rules: rules, storePath: output.layout.store(key:),
            movable: joined.movable)
        for position in manifest.items.indices { try planner.plan(position, joined: joined) }
        var plan = planner.plan
        let goneRecords = Dictionary(joined.gone.map { ($0.itemKey, $0) }, uniquingKeysWith: { first, _ in first })
        plan.removed = joined.goneKeys.filter { !planner.movedFrom.contains($0) }.map { key in
            let path = goneRecords[key]?.sourcePath ?? ""
            return RemovedItem(
                itemKey: key, itemName: goneRecords[key]?.itemName ?? "", sourcePath: path,
                source: manifest.shown(path))
        }
        return plan
    }

    /// The state joined with the manifest's keys: per item whether a record exists
    /// (and had a photo) and its fields' hash; the records of the keys the manifest
    /// no longer has, and those of them whose photo may have moved to a new key.
    struct Joined {
        /// Per manifest position: 0 no record, 1 a record without a photo, 2 one with.
        var previousKind: [UInt8]
        /// Per manifest position: the recorded fields' hash (0 where none is).
        var previousFields: [UInt64]
        var goneKeys: [String] = []
        var gone: [ItemRecord] = []
        /// Gone items whose photo may have moved to a new key, by size.
        var movable: [Int64: [ItemRecord]] = [:]

        init(manifest: Manifest, state: RunState?) throws {
            previousKind = [UInt8](repeating: 0, count: manifest.items.count)
            previousFields = [UInt64](repeating: 0, count: manifest.items.count)
            guard let state else { return }
            let index = manifest.keyIndex
            var goneKeys: [String] = []
            try state.forEachKey { recorded in
                if let position = index.position(of: recorded.itemKey) {
                    previousKind[position] = recorded.hadSource ? 2 : 1
                    previousFields[position] = recorded.fieldsHash
                } else {
                    goneKeys.append(recorded.itemKey)
                }
            }
            self.goneKeys = goneKeys
            gone = try goneKeys.compactMap { try state.record(forKey: $0) }
            for record in gone where !record.sourcePath.isEmpty && record.failure == nil && !record.sourceHash.isEmpty {
                movable[record.sourceSize, default: []].append(record)
            }
        }
    }

    /// Plans one item after another: gathers its facts, has the ledger's pure
    /// rules classify it, and keeps what the plan reports.
    struct Planner {
        let manifest: Manifest
        let state: RunState?
        let rules: ItemLedger.Rules
        let storePath: (String) -> String
        var movable: [Int64: [ItemRecord]]
        var movedFrom: Set<String> = []
        var plan: IncrementalPlan

        init(
            manifest: Manifest, state: RunState?, rules: ItemLedger.Rules, storePath: @escaping (String) -> String,
            movable: [Int64: [ItemRecord]]
        ) {
            self.manifest = manifest
            self.state = state
            self.rules = rules
            self.storePath = storePath
            self.movable = movable
            plan = IncrementalPlan(
                work: [], removed: [], thumbnailFingerprint: rules.fingerprints.thumbnail,
                storeFingerprint: rules.fingerprints.store)
            plan.work.reserveCapacity(manifest.items.count)
        }

        /// Plans the item at `position`.
        mutating func plan(_ position: Int, joined: Joined) throws {
            let items = manifest.items
            let kind = joined.previousKind[position]
            let recordedFields = joined.previousFields[position]
            let fieldsEdited = recordedFields != 0 && recordedFields != items.fieldsHash(at: position)
            let unrecorded: WorkReasons = kind != 0 && recordedFields == 0 ? .fieldsUnrecorded : []
            guard kind != 0 else { return planUnrecorded(position) }
            guard items.hasImage(at: position) else {
                plan.work.append(
                    ItemLedger.classifyWithoutPhoto(
                        hadPhoto: kind == 2, fieldsEdited: fieldsEdited, unrecorded: unrecorded))
                return
            }
            let item = items[position]
            guard let path = item.imagePath, let previous = try state?.record(forKey: item.itemKey) else {
                plan.work.append(ItemWork(itemClass: .new, needsThumbnail: true, needsStore: true, reasons: .new))
                return
            }
            let facts = ItemFacts.gather(
                path: path, previous: previous, storePath: storePath(item.itemKey), rules: rules)
            let work = ItemLedger.classify(
                path: path, previous: previous, facts: facts, fieldsEdited: fieldsEdited, unrecorded: unrecorded,
                rules: rules)
            // What an item not redone took when it was made (a kept failure included).
            if work.sourceUnchanged && !work.needsThumbnail && !work.needsStore && !work.reasons.contains(.sourceBack) {
                plan.savedSeconds += previous.seconds
                if previous.failure != nil { plan.keptFailures.append(position) }
            }
            plan.work.append(work)
        }

        /// An item no record has: moved from a gone item when its photo is one's, else new.
        private mutating func planUnrecorded(_ position: Int) {
            if !movable.isEmpty, let path = manifest.items[position].imagePath,
                let from = ItemFacts.movedSource(path, among: &movable, fingerprints: rules.fingerprints)
            {
                movedFrom.insert(from.key)
                plan.moves[position] = from.key
                plan.work.append(
                    ItemWork(
                        itemClass: .moved, needsThumbnail: false, needsStore: false, reasons: .moved,
                        sourceUnchanged: true, restamp: (path, from.stamp)))
                return
            }
            plan.work.append(ItemWork(itemClass: .new, needsThumbnail: true, needsStore: true, reasons: .new))
        }
    }
}
