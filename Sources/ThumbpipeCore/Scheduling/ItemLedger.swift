import Foundation

/// What happens to one item between the plan and the archive, decided in one place.
///
/// Built from the manifest item, its planned work and the previous run's record,
/// it states where each output comes from, what the item's worker is asked to do,
/// the item's date, and, once the job is done, the archive entry, the state record
/// and what the report and the log say. It opens no file and starts no process:
/// the runner gathers the facts (the job's outcome; the stamps a record needs,
/// through the closures ``settle(thumbnail:outcome:date:dateGuess:storeInPlace:sourceStamp:storeStamp:logs:now:)``
/// calls only when it makes one) and carries out what the ledger settles (store
/// files put in place or deleted). Classifying an item
/// (``classify(path:previous:facts:fieldsEdited:unrecorded:rules:)``) is as pure.
struct ItemLedger: Sendable {
    /// Where the item's thumbnail comes from.
    enum ThumbnailSource: Sendable, Equatable {
        /// Made by the item's job.
        case make
        /// The previous run's, from the state (or its failure, when it failed).
        case reuse
        /// The archived thumbnail of a migrated item that has no store file.
        case keepCarried
        /// None.
        case none
    }

    /// Where the item's store file comes from.
    enum StoreSource: Sendable, Equatable {
        /// Encoded by the item's job.
        case make
        /// A migrated archive's store file, placed as it is.
        case carry
        /// The one the previous run wrote, kept.
        case keep
        /// The store file of the item this one moved from (same photo, another
        /// key), linked (or copied) to this item's name.
        case move(from: String)
        /// None: the item has no photo.
        case none
    }

    /// The settings' fingerprints a record carries.
    struct Fingerprints: Sendable, Equatable {
        var thumbnail: String
        var store: String
        /// What a failed item's record carries instead of ``thumbnail``.
        var failure: String

        init(thumbnail: String, store: String, failure: String) {
            self.thumbnail = thumbnail
            self.store = store
            self.failure = failure
        }

        /// A run's fingerprints: the plan's, else the settings'.
        init(settings: PipelineSettings, plan: IncrementalPlan?) {
            thumbnail = plan?.thumbnailFingerprint ?? IncrementalPlan.thumbnailFingerprint(settings)
            store = plan?.storeFingerprint ?? IncrementalPlan.storeFingerprint(settings)
            failure = IncrementalPlan.failureFingerprint(settings)
        }
    }

    let item: ManifestItem
    let index: Int
    let work: ItemWork?
    let previous: ItemRecord?
    let fingerprints: Fingerprints
    /// The manifest file's time: the date of items that have no other.
    let manifestDate: Date
    /// Whether the run keeps a state (records are made only then).
    let recordsState: Bool

    /// Where the thumbnail comes from.
    let thumbnail: ThumbnailSource
    /// Where the store file comes from.
    let store: StoreSource

    /// Whether the previous run's record is needed: only an item with a photo
    /// that the plan does not call new has one worth reading.
    static func needsPreviousRecord(_ item: ManifestItem, work: ItemWork?) -> Bool {
        item.imagePath != nil && work != nil && work?.itemClass != .new
    }

    /// The key a moved item had (its photo's record), when it moved to a new one.
    let movedFrom: String?

    /// The class the plan gave an item that is made again because its recorded
    /// thumbnail could not be reused (``remakingThumbnail()``); nil otherwise.
    private(set) var remadeFrom: ItemClass? = nil

    /// The item's `--log` line, naming its old key when it moved to a new one.
    func logEntry(action: ItemAction, reason: String, milliseconds: Double = 0) -> ItemLogEntry {
        var entry = ItemLogEntry(item, action: action, reason: reason, milliseconds: milliseconds)
        if let movedFrom, movedFrom != item.itemKey {
            entry.movedFrom = movedFrom
            entry.reason = "\(reason) (\(movedFrom) → \(item.itemKey))"
        }
        return entry
    }

    init(
        item: ManifestItem, index: Int, work: ItemWork?, previous: ItemRecord?, fingerprints: Fingerprints,
        manifestDate: Date, recordsState: Bool, movedFrom: String? = nil
    ) {
        self.item = item
        self.index = index
        self.work = work
        self.previous = previous
        self.fingerprints = fingerprints
        self.manifestDate = manifestDate
        self.recordsState = recordsState
        self.movedFrom = movedFrom
        guard item.imagePath != nil else {
            if case .thumbnail = item.carried { thumbnail = .keepCarried } else { thumbnail = .none }
            store = .none
            return
        }
        if work?.needsThumbnail ?? true {
            thumbnail = .make
        } else {
            thumbnail = previous == nil ? .none : .reuse
        }
        if work?.needsStore ?? true {
            store = item.carried == .storeFile ? .carry : .make
        } else {
            store = movedFrom.map { .move(from: $0) } ?? .keep
        }
    }

    /// The ledger of an item whose recorded thumbnail cannot be reused (the state
    /// lost it, or holds bytes that are not a thumbnail thumbpipe made): a changed
    /// item whose thumbnail its job makes again from the photo, and a moved item's
    /// store file too (one is linked to its new name only beside a good thumbnail).
    /// Nil when the photo cannot be read (a kept item) or nothing is reused: the
    /// item then fails as ``reusedThumbnail(recorded:png:problem:)`` says.
    func remakingThumbnail() -> ItemLedger? {
        guard thumbnail == .reuse, var redone = work, redone.itemClass != .kept, previous?.failure == nil else {
            return nil
        }
        if case .move = store { redone.needsStore = true }
        redone.needsThumbnail = true
        redone.itemClass = .changed
        redone.reasons.remove(.unchanged)
        redone.reasons.insert(.recordedThumbnailDamaged)
        var ledger = ItemLedger(
            item: item, index: index, work: redone, previous: previous, fingerprints: fingerprints,
            manifestDate: manifestDate, recordsState: recordsState, movedFrom: movedFrom)
        ledger.remadeFrom = work?.itemClass
        return ledger
    }

    /// Whether the item is settled without a job: it has no photo, or nothing of it is redone.
    var settlesWithoutJob: Bool {
        if case .move = store { return thumbnail == .reuse }
        return store == .none || (thumbnail == .reuse && store == .keep)
    }

    /// The job for the item's worker (which is asked for nothing when the item only
    /// carries its store file and reuses its thumbnail).
    func job(source: String) -> ItemJob {
        ItemJob(
            index: index, itemKey: item.itemKey, source: source, makeThumbnail: thumbnail == .make,
            makeStore: store == .make, hashSource: work?.sourceUnchanged != true)
    }

    /// The item's thumbnail once its job is done: the job's, else the reused one;
    /// a failure of the job wins.
    func thumbnailResult(outcome: ItemOutcome, reused: Result<Data, ItemFailure>?) -> Result<Data, ItemFailure>? {
        if let failure = outcome.failure { return .failure(failure) }
        return outcome.thumbnail.map { .success($0) } ?? reused
    }

    /// The item's date, by one rule: the manifest's date; else, for an item not
    /// read this run, the date its record holds; else the photo's EXIF
    /// DateTimeOriginal unless it lies more than a day after `now`; else the photo
    /// file's time (a guess, with the reason the report lists); and for an item
    /// without a photo (or a time), the manifest file's time.
    /// - Parameter read: the header of a photo read this run (nil when it could not
    ///   be read); nil as a whole when the photo was not read.
    func date(read: SourceHeader??, fileTime: () -> Date?, now: Date) -> (date: Date, guess: String?) {
        if let date = item.dateCreated { return (date, nil) }
        guard item.imagePath != nil else { return (manifestDate, nil) }
        guard let header = read else {
            return (previous?.dateCreated.map { Date(timeIntervalSince1970: $0) } ?? manifestDate, nil)
        }
        let exif = header?.dateTimeOriginal
        if let exif, exif <= now.addingTimeInterval(86_400) { return (exif, nil) }
        let reason =
            exif.map { "EXIF date \(ISO8601Format.string($0)) is in the future; the file's time was used" }
            ?? "no EXIF date; the file's time was used"
        return (fileTime() ?? manifestDate, reason)
    }

    /// What the item comes to: its archive entry, its state record (or that it is
    /// forgotten), and the facts the report and the log keep.
    /// - Parameters:
    ///   - thumbnail: the thumbnail or failure (``thumbnailResult(outcome:reused:)``,
    ///     or the reused one when no job ran).
    ///   - outcome: what the job did; nil when no job ran.
    ///   - storeInPlace: the item's migrated store file already is its store file
    ///     (a failure then leaves it, as it is the user's).
    ///   - sourceStamp: the photo's stamp, when the job did not take one.
    ///   - storeStamp: the store file's stamp after this item's writes.
    ///   - logs: whether a `--log` entry is wanted.
    ///   - now: the run's time (when a source is first found missing).
    func settle(
        thumbnail: Result<Data, ItemFailure>?, outcome: ItemOutcome?, date: Date, dateGuess: String?,
        storeInPlace: Bool, sourceStamp: () -> FileStamp?, storeStamp: () -> FileStamp?, logs: Bool,
        now: Date = Date()
    ) -> Settlement {
        guard item.imagePath != nil else {
            var kept: Data? = nil
            var refused: String? = nil
            if case .thumbnail(let png) = item.carried {
                // Carried as it is, so only what thumbpipe itself could have made.
                if let size = PNGInfo.size(png), (1...4096).contains(size.width), (1...4096).contains(size.height) {
                    kept = png
                } else {
                    refused =
                        PNGInfo.size(png).map { "its archived thumbnail claims \($0.width)×\($0.height) pixels" }
                        ?? "its archived thumbnail is not a PNG"
                }
            }
            var finished = FinishedItem(index: index, archived: archived(date: date, png: kept), hasImage: false)
            if let refused {
                finished.failure = FailureRecord(
                    line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                    stage: .decode, message: "\(refused) (1 to 4096 pixels a side); it is not carried over")
            }
            // An item without a photo costs its archive record: the state is written
            // only when it changed (or its fields were never recorded).
            if recordsState && (work?.itemClass != .unchanged || work?.reasons.contains(.fieldsUnrecorded) == true) {
                finished.record = record(
                    outcome: nil, failure: nil, date: finished.archived.dateCreated, sourceStamp: sourceStamp,
                    storeStamp: storeStamp)
            }
            if logs {
                finished.log = ItemLogEntry(
                    item, action: ItemAction(work?.itemClass ?? .new), reason: work?.reason ?? "no image")
            }
            return Settlement(finished: finished, deletesStore: false)
        }
        if work?.itemClass == .kept, let previous, case .success(let png) = thumbnail {
            return settleKept(previous: previous, png: png, date: date, logs: logs, now: now)
        }
        var png: Data? = nil
        var failure: ItemFailure? = nil
        switch thumbnail {
        case .success(let data): png = data
        case .failure(let f): failure = f
        case nil: break
        }
        // An item without a usable image has no store file, not even an old one
        // (but a migrated store file in place is the user's, and stays).
        let deletesStore =
            failure != nil && !(item.carried == .storeFile && storeInPlace) && work?.itemClass != .kept
        if failure != nil { png = nil }
        var finished = FinishedItem(
            index: index, archived: archived(date: date, png: png), thumbnail: png, hasImage: true)
        if logs {
            finished.log = logEntry(
                action: failure == nil ? ItemAction(work?.itemClass ?? .new) : .failed,
                reason: failure?.line ?? work?.reason ?? "new",
                milliseconds: outcome.map { StageTimings.round($0.spans.totals.values.reduce(0, +) * 1000) } ?? 0)
        }
        if let failure {
            finished.failure = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
            // Replayed from the record, not found tonight.
            if outcome == nil && previous?.failure != nil { finished.failure?.known = true }
        } else if let dateGuess {
            finished.dateGuess = DateGuess(
                itemKey: item.itemKey, line: item.line, source: item.image ?? "", reason: dateGuess)
        }
        guard let outcome else {
            // A source back after missing: the record forgets since when. A source
            // touched, restored or moved with the same content: the record takes its
            // new path and stamp (and, moved to a new key, that key). Edited fields:
            // the record takes the new name and fields.
            let fields = ItemRecord.fieldsHash(item)
            if recordsState, failure == nil, var restored = previous,
                restored.missingSince != nil || work?.restamp != nil || restored.fieldsHash != fields
                    || restored.itemKey != item.itemKey
            {
                restored.missingSince = nil
                if let restamp = work?.restamp {
                    restored.sourcePath = restamp.path
                    restored.sourceSize = restamp.stamp.size
                    restored.sourceModified = restamp.stamp.modified
                    restored.sourceInode = restamp.stamp.inode
                    restored.sourceChanged = restamp.stamp.changed
                }
                if case .move = store, let stamp = storeStamp() {
                    restored.storeSize = stamp.size
                    restored.storeModified = stamp.modified
                }
                restored.itemKey = item.itemKey
                restored.itemName = item.itemName
                restored.fieldsHash = fields
                finished.record = restored
            }
            return Settlement(finished: finished, deletesStore: deletesStore)
        }
        if failure == nil && !outcome.warnings.isEmpty {
            finished.warning = WarningRecord(
                itemKey: item.itemKey, line: item.line, source: item.image ?? "", messages: outcome.warnings)
        }
        finished.spans = outcome.spans.totals
        finished.bytesRead = outcome.bytesRead
        finished.decoded = outcome.decoded
        if outcome.decoded, let header = outcome.header {
            let stages = Dictionary(
                uniqueKeysWithValues: finished.spans.map { ($0.key.rawValue, StageTimings.round($0.value)) })
            finished.profile = ItemProfile(
                itemKey: item.itemKey, itemName: item.itemName, line: item.line, position: index,
                source: item.image ?? "", format: header.format, width: header.width, height: header.height,
                bytes: outcome.bytesRead, path: outcome.storeRoute, stages: stages,
                seconds: StageTimings.round(finished.spans.values.reduce(0, +)),
                thumbnail: png)
        }
        finished.remadeFrom = remadeFrom
        if recordsState {
            if failure?.transient == true {
                // A circumstance of this run (a timeout, a crash): tried again next run.
                finished.forget = true
            } else {
                finished.record = record(
                    outcome: outcome, failure: failure, date: finished.archived.dateCreated, sourceStamp: sourceStamp,
                    storeStamp: storeStamp)
            }
        }
        return Settlement(finished: finished, deletesStore: deletesStore)
    }

    /// An item whose source is missing, unreadable or empty tonight: archived with
    /// its last good thumbnail and date, its store file kept, and reported as a
    /// failure that says why. A missing one is kept since the night it was first
    /// missed (recorded then, so later nights say the same date); an unreadable or
    /// empty one leaves its record as it was, so it is unchanged once it is back.
    private func settleKept(previous: ItemRecord, png: Data, date: Date, logs: Bool, now: Date) -> Settlement {
        let since = Date(timeIntervalSince1970: previous.missingSince ?? now.timeIntervalSince1970)
        var finished = FinishedItem(
            index: index, archived: archived(date: date, png: png), thumbnail: png, hasImage: true)
        let kept = "its last good thumbnail and store file are kept"
        let why: String
        var message: String
        if work?.reasons.contains(.sourceUnreadable) == true {
            why = "cannot be read (\(Errno(rawValue: work?.unreadable ?? EACCES)))"
            message = "\(why): \(kept); check its permissions (it is done again once it can be read)"
        } else if work?.reasons.contains(.sourceEmpty) == true {
            why = "is empty (0 bytes)"
            message = "\(why), perhaps while it is being written: \(kept) (it is done again once it has bytes)"
        } else {
            why = "source missing since \(ISO8601Format.string(since))"
            message = "\(why): \(kept) (--prune-missing drops them)"
        }
        var failure = FailureRecord(
            line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "", stage: .decode,
            message: message)
        failure.kept = true
        if previous.missingSince != nil { failure.known = true }
        finished.failure = failure
        if recordsState && previous.missingSince == nil && work?.reasons.contains(.sourceMissing) == true {
            var record = previous
            record.missingSince = since.timeIntervalSince1970
            finished.record = record
        }
        if logs { finished.log = logEntry(action: .kept, reason: why) }
        return Settlement(finished: finished, deletesStore: false)
    }

    /// What ``settle(thumbnail:outcome:date:dateGuess:storeInPlace:sourceStamp:storeStamp:logs:now:)`` decided.
    struct Settlement {
        /// The archive entry, the record and the report's and log's facts.
        var finished: FinishedItem
        /// The item's store file must go (it failed).
        var deletesStore: Bool
    }

    private func archived(date: Date, png: Data?) -> ArchivedItem {
        ArchivedItem(
            itemName: item.itemName, serialNumber: item.serialNumber, valueInDollars: item.valueInDollars,
            dateCreated: item.dateCreated ?? date, itemKey: item.itemKey, thumbnailData: png)
    }

    /// What the state records of an item this run redid.
    private func record(
        outcome: ItemOutcome?, failure: ItemFailure?, date: Date, sourceStamp: () -> FileStamp?,
        storeStamp: () -> FileStamp?
    ) -> ItemRecord {
        let source = outcome?.sourceStamp ?? (item.imagePath == nil ? nil : sourceStamp())
        let stored = failure == nil ? storeStamp() : nil
        let storeHash = outcome?.storeWritten == true ? outcome?.storeHash : previous?.storeHash
        return ItemRecord(
            itemKey: item.itemKey, sourcePath: item.imagePath ?? "", sourceSize: source?.size ?? -1,
            sourceModified: source?.modified ?? -1,
            sourceHash: outcome?.sourceHash ?? (work?.sourceUnchanged == true ? previous?.sourceHash : nil) ?? "",
            thumbnailFingerprint: failure != nil ? "" : fingerprints.thumbnail,
            storeFingerprint: fingerprints.store,
            dateCreated: date.timeIntervalSince1970, storeSize: stored?.size ?? -1,
            storeModified: stored?.modified ?? -1, storeHash: stored == nil ? "" : storeHash ?? "",
            failure: failure, seconds: outcome?.spans.totals.values.reduce(0, +) ?? 0,
            failureFingerprint: failure != nil ? fingerprints.failure : "", itemName: item.itemName,
            fieldsHash: ItemRecord.fieldsHash(item), sourceInode: source?.inode ?? 0,
            sourceChanged: source?.changed ?? 0)
    }
}
