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
    /// `--prefer-exif-date`: a photo's own EXIF date wins over its Takeout sidecar's.
    var preferEXIFDate = false
    /// `--time-zone`: the zone of a photo's wall-clock time that names no offset
    /// and has no GPS time stamp beside it (the machine's by default).
    var timeZone = TimeZone.current

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

    /// Whether the plan called it changed by its source and its job found only its
    /// metadata changed (``keepingImage()``).
    private(set) var imageKept = false

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
        ledger.preferEXIFDate = preferEXIFDate
        ledger.timeZone = timeZone
        return ledger
    }

    /// Whether the item is settled without a job: it has no photo, or nothing of it is redone.
    var settlesWithoutJob: Bool {
        if work?.readsMetadata == true { return false }
        if case .move = store { return thumbnail == .reuse }
        return store == .none || (thumbnail == .reuse && store == .keep)
    }

    /// Whether the item's job needs a worker: it makes a thumbnail or a store file
    /// (one that only carries its store file and reuses its thumbnail needs none).
    /// A photo whose sidecars changed needs one to read them (and its header) again.
    var needsWorker: Bool { thumbnail == .make || store == .make || work?.readsMetadata == true }

    /// The job for the item's worker (which is asked for nothing when the item only
    /// carries its store file and reuses its thumbnail).
    func job(source: String) -> ItemJob {
        var job = ItemJob(
            index: index, itemKey: item.itemKey, source: source, makeThumbnail: thumbnail == .make,
            makeStore: store == .make, hashSource: work?.sourceUnchanged != true)
        if work?.mayKeepImage == true { job.recordedImageHash = previous?.imageHash }
        return job
    }

    /// The ledger of a changed item whose job found its image data as recorded
    /// (``ItemOutcome/imageUnchanged``): a metadata change, its thumbnail reused
    /// and its store file kept. Nil unless the plan allowed it.
    func keepingImage() -> ItemLedger? {
        guard var kept = work, kept.mayKeepImage, previous != nil else { return nil }
        kept.itemClass = .metadata
        kept.needsThumbnail = false
        kept.needsStore = false
        kept.reasons = .photoMetadataChanged
        var ledger = ItemLedger(
            item: item, index: index, work: kept, previous: previous, fingerprints: fingerprints,
            manifestDate: manifestDate, recordsState: recordsState, movedFrom: movedFrom)
        ledger.preferEXIFDate = preferEXIFDate
        ledger.timeZone = timeZone
        ledger.imageKept = true
        return ledger
    }

    /// The item's thumbnail once its job is done: the job's, else the reused one;
    /// a failure of the job wins.
    func thumbnailResult(outcome: ItemOutcome, reused: Result<Data, ItemFailure>?) -> Result<Data, ItemFailure>? {
        if let failure = outcome.failure { return .failure(failure) }
        return outcome.thumbnail.map { .success($0) } ?? reused
    }

    /// The item's date, by one rule: the manifest's date; else, for an item not
    /// read this run, the date its record holds; else its Google Takeout sidecar's
    /// `photoTakenTime` (the library's own record, with the user's corrections; after
    /// the photo's own with `--prefer-exif-date`); else the photo's own date taken
    /// (``PhotoMetadata/taken``: EXIF, XMP, IPTC as MWG reconciles them) unless it
    /// lies more than a day after `now`; else its XMP sidecar's date taken; else
    /// the photo file's time (a guess, with the reason the report lists); and for an
    /// item without a photo (or a time), the manifest file's time. A wall-clock time
    /// that names no offset is read in its GPS stamp's zone, else in ``timeZone``.
    /// - Parameter read: the header of a photo read this run (nil when it could not
    ///   be read); nil as a whole when the photo was not read.
    func date(read: SourceHeader??, fileTime: () -> Date?, now: Date) -> ItemDate {
        if let date = item.dateCreated { return ItemDate(date: date) }
        guard item.imagePath != nil else { return ItemDate(date: manifestDate) }
        guard let header = read else {
            return ItemDate(date: previous?.dateCreated.map { Date(timeIntervalSince1970: $0) } ?? manifestDate)
        }
        let own = header?.embedded.taken.map { $0.resolved(in: timeZone) }
        let exif = own.flatMap { $0.date <= now.addingTimeInterval(86_400) ? $0 : nil }
        if let takeout = header?.sidecars.takeoutTaken, !(preferEXIFDate && exif != nil) {
            return ItemDate(date: takeout)
        }
        if let exif { return ItemDate(date: exif.date, zone: exif.zone) }
        if let xmp = header?.sidecars.xmp?.taken?.resolved(in: timeZone) {
            return ItemDate(date: xmp.date, zone: xmp.zone)
        }
        let reason =
            own.map { "EXIF date \(ISO8601Format.string($0.date)) is in the future; the file's time was used" }
            ?? "no EXIF date; the file's time was used"
        return ItemDate(date: fileTime() ?? manifestDate, guess: reason)
    }

    /// The title a photo gives itself, by one rule: its Google Takeout sidecar's
    /// (a title the user gave in Google Photos), else its XMP sidecar's, else its own.
    static func title(of header: SourceHeader) -> String? {
        header.sidecars.takeoutTitle ?? header.sidecars.xmp?.title ?? header.embedded.title
    }

    /// The name the archive holds: the manifest's; an item named after its file
    /// (folder mode) by its photo's title when it has one.
    func archivedName(title: String?) -> String { item.nameFromFile ? (title ?? item.itemName) : item.itemName }
}

/// An item's date and how it was found (``ItemLedger/date(read:fileTime:now:)``).
struct ItemDate: Equatable {
    var date: Date
    /// Why the file's time was used (a guess the report lists), nil otherwise.
    var guess: String? = nil
    /// How the zone of a wall-clock time was decided; nil when the date is not one.
    var zone: TakenTime.Zone? = nil
}
