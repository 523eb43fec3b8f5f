import Foundation

/// How an item compares with what the previous run into the same folder did.
public enum ItemClass: String, Sendable, CaseIterable {
    /// Not in the previous run.
    case new
    /// Its source, the settings or the code that shaped an output changed, or an
    /// output is missing or damaged: what changed is redone.
    case changed
    /// Only its fields (name, serial number, value, date) changed: nothing is
    /// decoded, the archive is written with the new fields.
    case metadata
    /// The same photo (by content) under a new path or a new key: its thumbnail
    /// and store file are reused (the store file linked to its new name), nothing decoded.
    case moved
    /// Nothing to redo: its thumbnail and store file are reused.
    case unchanged
    /// In the previous run but not in this manifest: its store file is deleted.
    case removed
    /// Its source is missing (moved, unmounted): its last good thumbnail, store
    /// file and date are kept, and it is reported (a failure of its own kind).
    case kept
}

/// What a run did with one item, as `--log`, the dry run and the report name it:
/// its plan's class, or `failed`.
public enum ItemAction: String, Sendable, Codable, CaseIterable {
    case new, changed, metadata, moved, unchanged, removed, kept, failed

    /// The action of an item that went as its plan said.
    public init(_ itemClass: ItemClass) {
        switch itemClass {
        case .new: self = .new
        case .changed: self = .changed
        case .metadata: self = .metadata
        case .moved: self = .moved
        case .unchanged: self = .unchanged
        case .removed: self = .removed
        case .kept: self = .kept
        }
    }
}

/// Why an item is in its class, for `--dry-run`: a few bits instead of a string per item.
public struct WorkReasons: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let new = WorkReasons(rawValue: 1 << 0)
    public static let unchanged = WorkReasons(rawValue: 1 << 1)
    public static let noImage = WorkReasons(rawValue: 1 << 2)
    public static let imageRemoved = WorkReasons(rawValue: 1 << 3)
    public static let forced = WorkReasons(rawValue: 1 << 4)
    public static let sourceChanged = WorkReasons(rawValue: 1 << 5)
    public static let limitsChanged = WorkReasons(rawValue: 1 << 6)
    public static let thumbnailSettingsChanged = WorkReasons(rawValue: 1 << 7)
    public static let storeSettingsChanged = WorkReasons(rawValue: 1 << 8)
    public static let storeFileMissing = WorkReasons(rawValue: 1 << 9)
    public static let storeFileDamaged = WorkReasons(rawValue: 1 << 10)
    public static let sourceMissing = WorkReasons(rawValue: 1 << 11)
    public static let sourceBack = WorkReasons(rawValue: 1 << 12)
    public static let stateRebuilt = WorkReasons(rawValue: 1 << 13)
    public static let codeChanged = WorkReasons(rawValue: 1 << 14)
    public static let fieldsChanged = WorkReasons(rawValue: 1 << 15)
    public static let moved = WorkReasons(rawValue: 1 << 16)
    /// The record holds no hash of the item's fields yet (a state of schema 1 or 2):
    /// the item is recorded again, so the next edit of them is seen.
    static let fieldsUnrecorded = WorkReasons(rawValue: 1 << 17)

    private static let texts: [(WorkReasons, String)] = [
        (.new, "new"), (.unchanged, "unchanged"), (.noImage, "no image"), (.imageRemoved, "image removed"),
        (.forced, "--force"), (.sourceChanged, "source changed"), (.limitsChanged, "limits changed since it failed"),
        (.thumbnailSettingsChanged, "thumbnail settings changed"), (.storeSettingsChanged, "store settings changed"),
        (.storeFileMissing, "store file missing"), (.storeFileDamaged, "store file damaged"),
        (.sourceMissing, "source missing"), (.sourceBack, "source back"),
        (.stateRebuilt, "state rebuilt: outputs adopted, not proven"),
        (.codeChanged, "thumbpipe or libvips upgraded (output version)"), (.fieldsChanged, "fields edited"),
        (.moved, "same content under a new path or key"),
    ]

    /// The reasons in words, e.g. `thumbnail settings changed, store file missing`.
    public var text: String {
        Self.texts.filter { contains($0.0) }.map(\.1).joined(separator: ", ")
    }

    /// What a changed item changed by, in one word, for the counts:
    /// `source`, `settings`, `algorithm` (an upgrade) or `output` (a store file
    /// missing or damaged), or `forced` / `rebuilt`.
    public var changeKind: String {
        if contains(.forced) { return "forced" }
        if contains(.stateRebuilt) { return "rebuilt" }
        if !isDisjoint(with: [.sourceChanged, .imageRemoved]) { return "source" }
        if !isDisjoint(with: [.thumbnailSettingsChanged, .storeSettingsChanged, .limitsChanged]) { return "settings" }
        if contains(.codeChanged) { return "algorithm" }
        if !isDisjoint(with: [.storeFileMissing, .storeFileDamaged]) { return "output" }
        return "source back"
    }
}

/// What a run must do for one item: a few bytes, so a plan of a million items stays small.
public struct ItemWork: Sendable {
    /// The item's class.
    public var itemClass: ItemClass
    /// Whether the thumbnail must be made (else it comes from the state).
    public var needsThumbnail: Bool
    /// Whether the store file must be written (else the one on disk is kept).
    public var needsStore: Bool
    /// Why.
    public var reasons: WorkReasons
    /// Whether the source is known to be the one the previous run recorded (so
    /// its recorded content hash still holds and need not be recomputed).
    public var sourceUnchanged = false
    /// With `--verify-content`: the source's new path and stamp, when only they
    /// changed (touched, copied, restored) and its content did not: recorded, not redone.
    var restamp: (path: String, stamp: FileStamp)? = nil

    /// Why, in a few words, for `--dry-run`.
    public var reason: String { reasons.text }
}

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

        /// `Bike (photos/bike.jpg) KEY`.
        public var description: String {
            let name = itemName.isEmpty ? "(unnamed)" : itemName
            return "\(name) (\(sourcePath.isEmpty ? "no image" : sourcePath)) \(itemKey)"
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

    /// The plan in one line: `3 new, 2 changed (1 source, 1 settings), 1 metadata,
    /// 1 moved, 40 unchanged, 1 removed, 1 kept (source missing)` (classes with no
    /// item left out, but for new, changed, unchanged and removed).
    public var summary: String { Self.summary(counts, changeKinds) }

    /// The line ``summary`` shows, from counts (a run's result keeps them).
    public static func summary(_ counts: [ItemClass: Int], _ kinds: [String: Int]) -> String {
        func count(_ c: ItemClass) -> Int { counts[c] ?? 0 }
        var parts = ["\(count(.new)) new"]
        let kindText = kinds.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        parts.append("\(count(.changed)) changed" + (kindText.isEmpty ? "" : " (\(kindText))"))
        if count(.metadata) > 0 { parts.append("\(count(.metadata)) metadata") }
        if count(.moved) > 0 { parts.append("\(count(.moved)) moved") }
        parts.append("\(count(.unchanged)) unchanged")
        parts.append("\(count(.removed)) removed")
        if count(.kept) > 0 { parts.append("\(count(.kept)) kept (source missing)") }
        return parts.joined(separator: ", ")
    }

    /// The fingerprint of what shapes a thumbnail: every setting that shapes it
    /// (``SettingDescription/shapes``) and the versions of the code that makes it
    /// (``OutputVersions``).
    public static func thumbnailFingerprint(_ settings: PipelineSettings, versions: OutputVersions = .current)
        -> String
    {
        Fingerprint.make(
            settings: "thumbnail|\(settings.fingerprintText(of: .thumbnail))",
            code: "thumbnail v\(versions.thumbnail)|vips \(versions.libvips)")
    }

    /// The fingerprint of the archive a run of `manifest` writes: every field of
    /// every item in order, the manifest's time (the date of items without a
    /// photo) and the settings that shape items. With every item unchanged, an
    /// equal fingerprint means the archive on disk is already the one to write.
    public static func archiveFingerprint(_ manifest: Manifest, _ settings: PipelineSettings) -> String {
        var hash = ContentHash.Streaming()
        func add(_ text: String) {
            var bytes = Array(text.utf8)
            bytes.append(0)
            bytes.withUnsafeBytes { hash.update($0) }
        }
        add(thumbnailFingerprint(settings))
        add(storeFingerprint(settings))
        add(settings.fingerprintText(of: .archive))
        add(String(manifest.modificationDate.timeIntervalSince1970))
        // The packed items: every field of every item, in order.
        manifest.items.withPackedBytes { hash.update($0) }
        return String(hash.finish(), radix: 16)
    }

    /// Whether nothing at all changed: no item new, changed or removed.
    public var nothingChanged: Bool {
        removed.isEmpty && work.allSatisfy { $0.itemClass == .unchanged && $0.restamp == nil }
    }

    /// The fingerprint a failed item is recorded with: what shapes its thumbnail
    /// and every limit that can make it fail. A failure is kept while the source
    /// and these stay the same.
    public static func failureFingerprint(_ settings: PipelineSettings) -> String {
        ContentHash.hex("failure|\(thumbnailFingerprint(settings))|\(settings.fingerprintText(of: .failure))")
    }

    /// The fingerprint of what shapes a store file: every setting that shapes it
    /// and the versions of the code that makes it (``OutputVersions``).
    public static func storeFingerprint(_ settings: PipelineSettings, versions: OutputVersions = .current) -> String {
        Fingerprint.make(
            settings: "store|\(settings.fingerprintText(of: .store))",
            code: "store v\(versions.store)|vips \(versions.libvips)")
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
        manifest: Manifest, settings: PipelineSettings, state: RunState?, outputFolder: String, force: Bool,
        verifyContent: Bool, pruneMissing: Bool = false
    ) throws -> IncrementalPlan {
        let thumbnailFP = thumbnailFingerprint(settings)
        let storeFP = storeFingerprint(settings)
        let failureFP = failureFingerprint(settings)
        let items = manifest.items
        // What the state has of each manifest item: 0 nothing, 1 a record without a photo, 2 one with.
        var previousKind = [UInt8](repeating: 0, count: items.count)
        // The recorded fields' hash, where one is recorded.
        var previousFields = [String?](repeating: nil, count: items.count)
        var gone: [RecordedKey] = []
        if let state {
            let index = manifest.keyIndex
            try state.forEachKey { recorded in
                if let position = index.position(of: recorded.itemKey) {
                    previousKind[position] = recorded.hadSource ? 2 : 1
                    if !recorded.fieldsHash.isEmpty { previousFields[position] = recorded.fieldsHash }
                } else {
                    gone.append(recorded)
                }
            }
        }
        // Gone items whose photo may have moved to a new key: by size, then by content.
        var movable: [Int64: [RecordedKey]] = [:]
        for recorded in gone where recorded.hadSource && !recorded.failed && !recorded.sourceHash.isEmpty {
            movable[recorded.sourceSize, default: []].append(recorded)
        }
        var movedFrom: Set<String> = []
        var plan = IncrementalPlan(work: [], removed: [], thumbnailFingerprint: thumbnailFP, storeFingerprint: storeFP)
        plan.work.reserveCapacity(items.count)
        for position in items.indices {
            let kind = previousKind[position]
            let fieldsEdited = previousFields[position].map { $0 != ItemRecord.fieldsHash(items[position]) } ?? false
            let unrecorded: WorkReasons = kind != 0 && previousFields[position] == nil ? .fieldsUnrecorded : []
            guard kind != 0 else {
                if !movable.isEmpty, let path = items[position].imagePath, let state,
                    let from = try Self.movedSource(
                        path, among: &movable, state: state, thumbnail: thumbnailFP, store: storeFP)
                {
                    movedFrom.insert(from.key)
                    plan.moves[position] = from.key
                    plan.work.append(
                        ItemWork(
                            itemClass: .moved, needsThumbnail: false, needsStore: false, reasons: .moved,
                            sourceUnchanged: true, restamp: (path, from.stamp)))
                    continue
                }
                plan.work.append(ItemWork(itemClass: .new, needsThumbnail: true, needsStore: true, reasons: .new))
                continue
            }
            guard items.hasImage(at: position) else {
                let same = kind == 1
                let reasons: WorkReasons = same ? (fieldsEdited ? .fieldsChanged : .noImage) : .imageRemoved
                plan.work.append(
                    ItemWork(
                        itemClass: same ? (fieldsEdited ? .metadata : .unchanged) : .changed, needsThumbnail: false,
                        needsStore: false, reasons: reasons.union(unrecorded)))
                continue
            }
            let item = items[position]
            guard let path = item.imagePath, let previous = try state?.record(forKey: item.itemKey) else {
                plan.work.append(ItemWork(itemClass: .new, needsThumbnail: true, needsStore: true, reasons: .new))
                continue
            }
            let stamp = FileStamp(path: path)
            if stamp == nil && !pruneMissing && previous.failure == nil && previous.sourcePath == path
                && access(path, F_OK) != 0
            {
                // Gone for now (an unmounted share, a moved folder): keep what it made,
                // even under --force, which cannot redo it.
                plan.work.append(
                    ItemWork(itemClass: .kept, needsThumbnail: false, needsStore: false, reasons: .sourceMissing))
                continue
            }
            if force || previous.isRebuilt {
                plan.work.append(
                    ItemWork(
                        itemClass: .changed, needsThumbnail: true, needsStore: true,
                        reasons: force ? .forced : .stateRebuilt))
                continue
            }
            var sourceChanged =
                previous.sourcePath != path || stamp?.size != previous.sourceSize
                || stamp?.modified != previous.sourceModified
            var restamp: (path: String, stamp: FileStamp)? = nil
            var moved = false
            if verifyContent || (sourceChanged && previous.sourcePath != path && stamp?.size == previous.sourceSize) {
                // Content decides, not timestamps: a touched, restored or moved file with
                // the same bytes is the same source under a new stamp (a new path is
                // checked even without --verify-content: a move is no reason to decode).
                let same = !previous.sourceHash.isEmpty && ContentHash.file(path) == previous.sourceHash
                if sourceChanged && same, let stamp {
                    restamp = (path, stamp)
                    moved = previous.sourcePath != path
                }
                sourceChanged = !same
            }
            if sourceChanged {
                plan.work.append(
                    ItemWork(itemClass: .changed, needsThumbnail: true, needsStore: true, reasons: .sourceChanged))
                continue
            }
            var reasons: WorkReasons = []
            var needsThumbnail: Bool
            var needsStore: Bool
            if previous.failure != nil {
                // A failure is kept while neither its source nor the limits change.
                let retry = previous.failureFingerprint != failureFP
                if retry { reasons.insert(.limitsChanged) }
                needsThumbnail = retry
                needsStore = retry
            } else {
                let thumbnailChange = Fingerprint.change(from: previous.thumbnailFingerprint, to: thumbnailFP)
                let storeChange = Fingerprint.change(from: previous.storeFingerprint, to: storeFP)
                needsThumbnail = thumbnailChange != nil
                needsStore = storeChange != nil
                if thumbnailChange == .settings { reasons.insert(.thumbnailSettingsChanged) }
                if storeChange == .settings { reasons.insert(.storeSettingsChanged) }
                if thumbnailChange == .code || storeChange == .code { reasons.insert(.codeChanged) }
            }
            if previous.failure == nil && !needsStore {
                let storePath = outputFolder + "/" + item.itemKey
                let storeStamp = FileStamp(path: storePath)
                if storeStamp == nil {
                    needsStore = true
                    reasons.insert(.storeFileMissing)
                } else if storeStamp?.size != previous.storeSize || storeStamp?.modified != previous.storeModified
                    || (verifyContent && ContentHash.file(storePath) != previous.storeHash)
                {
                    needsStore = true
                    reasons.insert(.storeFileDamaged)
                }
            }
            // A source back after missing: nothing to redo, but its record forgets since when.
            if !needsThumbnail && !needsStore && previous.missingSince != nil { reasons.insert(.sourceBack) }
            let changed = needsThumbnail || needsStore || reasons.contains(.sourceBack)
            if !changed {
                plan.savedSeconds += previous.seconds
                if previous.failure != nil { plan.keptFailures.append(position) }
            }
            let itemClass: ItemClass =
                changed ? .changed : moved ? .moved : fieldsEdited ? .metadata : .unchanged
            if moved { reasons.insert(.moved) }
            if fieldsEdited { reasons.insert(.fieldsChanged) }
            plan.work.append(
                ItemWork(
                    itemClass: itemClass, needsThumbnail: needsThumbnail, needsStore: needsStore,
                    reasons: (reasons.isEmpty ? .unchanged : reasons).union(unrecorded), sourceUnchanged: true,
                    restamp: restamp))
        }
        plan.removed = gone.filter { !movedFrom.contains($0.itemKey) }.map {
            RemovedItem(itemKey: $0.itemKey, itemName: $0.itemName, sourcePath: $0.sourcePath)
        }
        return plan
    }

    /// The gone item whose photo `path` is, by size and then content, if any
    /// (made with this run's settings and code, so its outputs are this run's):
    /// taken out of `movable`, with the photo's stamp.
    private static func movedSource(
        _ path: String, among movable: inout [Int64: [RecordedKey]], state: RunState, thumbnail: String, store: String
    ) throws -> (key: String, stamp: FileStamp)? {
        guard let stamp = FileStamp(path: path), let candidates = movable[stamp.size], !candidates.isEmpty,
            let hash = ContentHash.file(path)
        else { return nil }
        for (i, candidate) in candidates.enumerated() where candidate.sourceHash == hash {
            guard let record = try state.record(forKey: candidate.itemKey), record.failure == nil,
                record.thumbnailFingerprint == thumbnail, record.storeFingerprint == store, record.missingSince == nil
            else { continue }
            movable[stamp.size]?.remove(at: i)
            return (candidate.itemKey, stamp)
        }
        return nil
    }
}

/// An output's fingerprint: a hash of the settings that shape it and a hash of
/// the versions of the code that makes it (``OutputVersions``), as
/// `SETTINGS-CODE`, so a run can say whether an output is redone for a settings
/// change or for an upgrade.
enum Fingerprint {
    static func make(settings: String, code: String) -> String {
        ContentHash.hex(settings) + "-" + ContentHash.hex(code)
    }

    /// What moved between a recorded fingerprint and the current one.
    enum Change { case settings, code }

    /// Why `recorded` is not `current`: nil when equal; `.code` when only the
    /// code's half moved (an upgrade); `.settings` otherwise (a record of an older form too).
    static func change(from recorded: String, to current: String) -> Change? {
        guard recorded != current else { return nil }
        let old = recorded.split(separator: "-")
        let new = current.split(separator: "-")
        if old.count == 2, new.count == 2, old[0] == new[0] { return .code }
        return .settings
    }
}

/// How many of the previous run's items one run may remove (`--max-removed N|P%`).
public struct RemovalLimit: Sendable, Equatable {
    /// A count, or a percentage of the previous items.
    public var count: Int?
    public var percent: Double?

    /// The default: 10 % of the previous items.
    public static let standard = RemovalLimit(count: nil, percent: 10)

    /// Parses `N` or `P%`.
    /// - Throws: ``ThumbpipeError`` (64) for anything else.
    public init(parsing text: String) throws {
        let bad = ThumbpipeError(
            .usage, "--max-removed takes a count (e.g. 25) or a percentage (e.g. 20%), not '\(text)'")
        if text.hasSuffix("%") {
            guard let value = Double(text.dropLast()), value.isFinite, value >= 0, value <= 100 else { throw bad }
            percent = value
        } else {
            guard let value = Int(text), value >= 0 else { throw bad }
            count = value
        }
    }

    init(count: Int?, percent: Double?) {
        self.count = count
        self.percent = percent
    }

    /// The most items that may go, of `previous`.
    func allowed(of previous: Int) -> Int {
        if let count { return count }
        return Int((Double(previous) * (percent ?? 10) / 100).rounded(.down))
    }

    var text: String {
        if let count { return String(count) }
        let p = percent ?? 10
        return (p == p.rounded() ? String(Int(p)) : String(p)) + "%"
    }
}

extension IncrementalPlan {
    /// Refuses a plan that would remove more of the previous items than `limit`
    /// allows, and always one whose manifest is empty over a folder with items:
    /// the wrong or an empty manifest must not empty last night's folder.
    /// - Throws: ``ThumbpipeError`` (65) naming the count and the flag.
    public func checkRemovals(limit: RemovalLimit, manifestItems: Int, manifestName: String, output: String) throws {
        let previous = removed.count + work.reduce(0) { $0 + ($1.itemClass == .new ? 0 : 1) }
        guard !removed.isEmpty else { return }
        if manifestItems == 0 {
            throw ThumbpipeError(
                .dataError,
                "\(manifestName) has no items: it would remove all \(previous) items from \(output); refusing "
                    + "(delete \(output) to start over)")
        }
        let allowed = limit.allowed(of: previous)
        if removed.count > allowed {
            throw ThumbpipeError(
                .dataError,
                "\(manifestName) would remove \(removed.count) of the \(previous) items in \(output), more than "
                    + "--max-removed \(limit.text) allows; pass --max-removed \(removed.count) if that is meant:\n"
                    + Self.list(removed, limit: 20))
        }
    }

    /// Removed items, one a line (`  Bike (photos/bike.jpg) KEY`), at most `limit`, then how many more.
    public static func list(_ items: [RemovedItem], limit: Int) -> String {
        var lines = items.prefix(limit).map { "  \($0.description)" }
        if items.count > limit { lines.append("  … and \(items.count - limit) more") }
        return lines.joined(separator: "\n")
    }
}
