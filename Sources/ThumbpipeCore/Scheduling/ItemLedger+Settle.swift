import Foundation

/// The ledger's last decision: what an item comes to once its job is done (or
/// when it needs none): its archive entry, its state record, and what the report
/// and the log say. Pure, as the rest of the ledger: the facts only the file
/// system knows come in as values or closures called only when a record needs them.
extension ItemLedger {
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
    ///   - storeAppeared: a file appeared at the store file's name during the run
    ///     (``StoreFact/appeared(path:)``): not ours, so never deleted.
    ///   - now: the run's time (when a source is first found missing).
    func settle(
        thumbnail: Result<Data, ItemFailure>?, outcome: ItemOutcome?, date: Date, dateGuess: String?,
        storeInPlace: Bool, sourceStamp: () -> FileStamp?, storeStamp: () -> FileStamp?, logs: Bool,
        storeAppeared: Bool = false, now: Date = Date()
    ) -> Settlement {
        guard item.imagePath != nil else {
            return settleWithoutPhoto(date: date, sourceStamp: sourceStamp, storeStamp: storeStamp, logs: logs)
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
        // (but a migrated store file in place is the user's, and stays, as does a
        // file that appeared at its name).
        let deletesStore =
            failure != nil && !(item.carried == .storeFile && storeInPlace) && work?.itemClass != .kept
            && !storeAppeared
        if failure != nil { png = nil }
        var finished = FinishedItem(
            index: index, archived: archived(date: date, png: png, title: title(read: outcome)), thumbnail: png,
            hasImage: true)
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
        if let outcome {
            settleMade(&finished, outcome: outcome, failure: failure, sourceStamp: sourceStamp, storeStamp: storeStamp)
        } else if failure == nil {
            finished.record = restoredRecord(storeStamp: storeStamp)
        }
        return Settlement(finished: finished, deletesStore: deletesStore)
    }

    /// An item without a photo: its carried thumbnail kept when it is one thumbpipe
    /// could have made, its record written only when it changed.
    private func settleWithoutPhoto(
        date: Date, sourceStamp: () -> FileStamp?, storeStamp: () -> FileStamp?, logs: Bool
    ) -> Settlement {
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

    /// The record of an item settled without a job, when it must change: a source
    /// back after missing forgets since when; a source touched, restored or moved
    /// with the same content takes its new path and stamp (and, moved to a new
    /// key, that key); edited fields take the new name and fields. Nil when the
    /// record stays as it is.
    private func restoredRecord(storeStamp: () -> FileStamp?) -> ItemRecord? {
        let fields = ItemRecord.fieldsHash(item)
        guard recordsState, var restored = previous,
            restored.missingSince != nil || work?.restamp != nil || restored.fieldsHash != fields
                || restored.itemKey != item.itemKey
        else { return nil }
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
        return restored
    }

    /// What a job's outcome adds: its warnings, timings and profile, and the
    /// record (or, for a failure of this run's circumstances, that it is forgotten).
    private func settleMade(
        _ finished: inout FinishedItem, outcome: ItemOutcome, failure: ItemFailure?, sourceStamp: () -> FileStamp?,
        storeStamp: () -> FileStamp?
    ) {
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
                thumbnail: finished.thumbnail)
        }
        finished.remadeFrom = remadeFrom
        finished.imageKept = imageKept
        guard recordsState else { return }
        if failure?.transient == true {
            // A circumstance of this run (a timeout, a crash): tried again next run.
            finished.forget = true
        } else {
            finished.record = record(
                outcome: outcome, failure: failure, date: finished.archived.dateCreated, sourceStamp: sourceStamp,
                storeStamp: storeStamp)
        }
    }

    /// An item whose source is missing, unreadable or empty tonight: archived with
    /// its last good thumbnail and date, its store file kept, and reported as a
    /// failure that says why. A missing one is kept since the night it was first
    /// missed (recorded then, so later nights say the same date); an unreadable or
    /// empty one leaves its record as it was, so it is unchanged once it is back.
    private func settleKept(previous: ItemRecord, png: Data, date: Date, logs: Bool, now: Date) -> Settlement {
        let since = Date(timeIntervalSince1970: previous.missingSince ?? now.timeIntervalSince1970)
        var finished = FinishedItem(
            index: index, archived: archived(date: date, png: png, title: previous.title), thumbnail: png,
            hasImage: true)
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

    /// The photo's title: as read by the job, else as recorded when it was last read.
    private func title(read outcome: ItemOutcome?) -> String? {
        guard let header = outcome?.header else { return previous?.title }
        return Self.title(of: header)
    }

    private func archived(date: Date, png: Data?, title: String? = nil) -> ArchivedItem {
        ArchivedItem(
            itemName: archivedName(title: title), serialNumber: item.serialNumber, valueInDollars: item.valueInDollars,
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
        var record = ItemRecord(
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
        record.title = title(read: outcome)
        record.imageHash = outcome?.header?.imageHash ?? (work?.sourceUnchanged == true ? previous?.imageHash : nil)
        return record
    }
}
