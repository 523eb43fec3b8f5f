import Foundation
import Testing

@testable import ThumbpipeCore

/// The item ledger decides, without files or processes, where each output of an
/// item comes from, its date, and what its record and report say.
@Suite("Item ledger: each item's fate, decided in one value")
struct ItemLedgerTests {
    static let fingerprints = ItemLedger.Fingerprints(thumbnail: "T1", store: "S1", failure: "F1")
    static let manifestDate = Date(timeIntervalSince1970: 1_600_000_000)
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let exif = Date(timeIntervalSince1970: 1_500_000_000)
    static let fileTime = Date(timeIntervalSince1970: 1_400_000_000)
    /// The start of an 80×80 RGBA PNG: signature and IHDR.
    static let png = Data(
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [
            0, 0, 0, 80, 0, 0, 0, 80, 8, 6, 0, 0, 0,
        ]
            + [0, 0, 0, 0])

    static func item(image: Bool = true, date: Date? = nil, carried: ManifestItem.Carried? = nil) -> ManifestItem {
        var item = ManifestItem(
            line: 3, itemName: "Bike", serialNumber: "S4", valueInDollars: 12, dateCreated: date, itemKey: "KEY",
            image: image ? "bike.jpg" : nil, imagePath: image ? "/photos/bike.jpg" : nil)
        item.carried = carried
        return item
    }

    static func work(_ itemClass: ItemClass, thumbnail: Bool, store: Bool, _ reasons: WorkReasons) -> ItemWork {
        ItemWork(itemClass: itemClass, needsThumbnail: thumbnail, needsStore: store, reasons: reasons)
    }

    static func previous(failure: ItemFailure? = nil) -> ItemRecord {
        ItemRecord(
            itemKey: "KEY", sourcePath: "/photos/bike.jpg", sourceSize: 10, sourceModified: 20, sourceHash: "H0",
            thumbnailFingerprint: "T0", storeFingerprint: "S0", dateCreated: 1_300_000_000, storeSize: 30,
            storeModified: 40, storeHash: "SH0", failure: failure, seconds: 0.5, itemName: "Bike",
            fieldsHash: ItemRecord.fieldsHash(item()))
    }

    static func ledger(_ item: ManifestItem, _ work: ItemWork?, previous: ItemRecord? = nil) -> ItemLedger {
        ItemLedger(
            item: item, index: 0, work: work, previous: previous, fingerprints: fingerprints,
            manifestDate: manifestDate, recordsState: true)
    }

    static func outcome(header exif: Date?, thumbnail: Data? = png, failure: ItemFailure? = nil) -> ItemOutcome {
        var outcome = failure.map { ItemOutcome(failure: $0) } ?? ItemOutcome()
        outcome.header = SourceHeader(
            width: 4000, height: 3000, orientation: 1, format: "JPEG",
            embedded: PhotoMetadata(taken: exif.map { .instant($0) }), hasAlpha: false, shrink: .none)
        if failure == nil {
            outcome.thumbnail = thumbnail
            outcome.storeWritten = true
            outcome.store = Data([0xFF, 0xD8, 0xFF, 0xD9])
            outcome.storeHash = "SH1"
            outcome.decoded = true
        }
        outcome.sourceHash = "H1"
        outcome.sourceStamp = FileStamp(size: 11, modified: 21)
        return outcome
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var item: ManifestItem
        var work: ItemWork?
        var previous: ItemRecord?
        var thumbnail: ItemLedger.ThumbnailSource
        var store: ItemLedger.StoreSource
        var withoutJob: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "new", item: item(), work: work(.new, thumbnail: true, store: true, .new), thumbnail: .make,
            store: .make, withoutJob: false),
        Case(
            name: "no plan (a run without state)", item: item(), work: nil, thumbnail: .make, store: .make,
            withoutJob: false),
        Case(
            name: "unchanged", item: item(), work: work(.unchanged, thumbnail: false, store: false, .unchanged),
            previous: previous(), thumbnail: .reuse, store: .keep, withoutJob: true),
        Case(
            name: "failed before, unchanged", item: item(),
            work: work(.unchanged, thumbnail: false, store: false, .unchanged),
            previous: previous(failure: ItemFailure(.decode, "truncated")), thumbnail: .reuse, store: .keep,
            withoutJob: true),
        Case(
            name: "source changed", item: item(), work: work(.changed, thumbnail: true, store: true, .sourceChanged),
            previous: previous(), thumbnail: .make, store: .make, withoutJob: false),
        Case(
            name: "thumbnail settings changed", item: item(),
            work: work(.changed, thumbnail: true, store: false, .thumbnailSettingsChanged), previous: previous(),
            thumbnail: .make, store: .keep, withoutJob: false),
        Case(
            name: "store settings changed", item: item(),
            work: work(.changed, thumbnail: false, store: true, .storeSettingsChanged), previous: previous(),
            thumbnail: .reuse, store: .make, withoutJob: false),
        Case(
            name: "carried from an archive with its store file", item: item(carried: .storeFile),
            work: work(.new, thumbnail: true, store: true, .new), thumbnail: .make, store: .carry, withoutJob: false),
        Case(
            name: "carried from an archive without a store file", item: item(image: false, carried: .thumbnail(png)),
            work: work(.new, thumbnail: false, store: false, .noImage), thumbnail: .keepCarried, store: .none,
            withoutJob: true),
        Case(
            name: "source missing: outputs kept", item: item(),
            work: work(.kept, thumbnail: false, store: false, .sourceMissing), previous: previous(), thumbnail: .reuse,
            store: .keep, withoutJob: true),
        Case(
            name: "no photo", item: item(image: false), work: work(.new, thumbnail: false, store: false, .noImage),
            thumbnail: .none, store: .none, withoutJob: true),
    ]

    @Test("Where each output comes from, and whether a job runs", arguments: cases)
    func sources(_ c: Case) {
        let ledger = Self.ledger(c.item, c.work, previous: c.previous)
        #expect(ledger.thumbnail == c.thumbnail)
        #expect(ledger.store == c.store)
        #expect(ledger.settlesWithoutJob == c.withoutJob)
        if let path = c.item.imagePath {
            let job = ledger.job(source: path)
            #expect(job.makeThumbnail == (c.thumbnail == .make))
            #expect(job.makeStore == (c.store == .make), "a carried store file is never encoded")
        }
    }

    @Test(
        "Only items with a photo that are not new read their previous record; only a made item's store file may be replaced"
    )
    func previousRecord() {
        let new = Self.ledger(Self.item(), Self.work(.new, thumbnail: true, store: true, .new))
        let made = Self.outcome(header: nil)
        #expect(
            new.storeEffectAfterJob(outcome: made, thumbnail: .success(Self.png), claimedBefore: false)
                == .commitWritten(replacing: false), "a file at a new item's name appeared during the run")
        #expect(
            new.storeEffectAfterJob(outcome: made, thumbnail: .success(Self.png), claimedBefore: true)
                == .commitWritten(replacing: true), "a killed run's claimed file is thumbpipe's")
        let changed = Self.ledger(
            Self.item(), Self.work(.changed, thumbnail: true, store: true, .sourceChanged), previous: Self.previous())
        #expect(
            changed.storeEffectAfterJob(outcome: made, thumbnail: .success(Self.png), claimedBefore: false)
                == .commitWritten(replacing: true))
        #expect(!ItemLedger.needsPreviousRecord(Self.item(), work: Self.work(.new, thumbnail: true, store: true, .new)))
        #expect(!ItemLedger.needsPreviousRecord(Self.item(), work: nil))
        #expect(
            !ItemLedger.needsPreviousRecord(
                Self.item(image: false), work: Self.work(.changed, thumbnail: false, store: false, .noImage)))
        #expect(
            ItemLedger.needsPreviousRecord(
                Self.item(), work: Self.work(.unchanged, thumbnail: false, store: false, .unchanged)))
    }

    @Test("The date, by one rule: manifest, then the record, then EXIF unless in the future, then the file's time")
    func dates() {
        let read = Self.ledger(Self.item(), Self.work(.new, thumbnail: true, store: true, .new))
        let header = Self.outcome(header: Self.exif).header
        #expect(
            read.date(read: .some(header), fileTime: { Self.fileTime }, now: Self.now)
                == ItemDate(date: Self.exif, zone: .named))
        // In the future by more than a day: the file's time, and why.
        let future = Self.now.addingTimeInterval(2 * 86_400)
        let futureDate = read.date(
            read: .some(Self.outcome(header: future).header), fileTime: { Self.fileTime }, now: Self.now)
        #expect(futureDate.date == Self.fileTime)
        #expect(futureDate.guess?.contains("is in the future; the file's time was used") == true)
        // A day ahead is still believed (a camera clock in another zone).
        let soon = Self.now.addingTimeInterval(86_000)
        #expect(
            read.date(read: .some(Self.outcome(header: soon).header), fileTime: { nil }, now: Self.now).date == soon)
        // No EXIF, or a photo that could not be read: the file's time, else the manifest's.
        #expect(
            read.date(read: .some(nil), fileTime: { Self.fileTime }, now: Self.now)
                == ItemDate(
                    date: Self.fileTime, guess: "no EXIF date; the file's time was used"
                ))
        #expect(read.date(read: .some(nil), fileTime: { nil }, now: Self.now).date == Self.manifestDate)
        // Not read this run: the record's date.
        let kept = Self.ledger(
            Self.item(), Self.work(.unchanged, thumbnail: false, store: false, .unchanged), previous: Self.previous())
        #expect(
            kept.date(read: nil, fileTime: { Self.fileTime }, now: Self.now)
                == ItemDate(
                    date: Date(timeIntervalSince1970: 1_300_000_000)
                ))
        // The manifest's date wins over everything; an item without a photo takes the manifest file's.
        let dated = Date(timeIntervalSince1970: 1_234_567_890)
        let manifestDated = Self.ledger(Self.item(date: dated), nil)
        #expect(
            manifestDated.date(read: .some(header), fileTime: { Self.fileTime }, now: Self.now) == ItemDate(date: dated)
        )
        let noPhoto = Self.ledger(Self.item(image: false), nil)
        #expect(
            noPhoto.date(read: nil, fileTime: { Self.fileTime }, now: Self.now) == ItemDate(date: Self.manifestDate))
    }

    @Test("A new item made by its job: archive entry, record with this run's fingerprints and stamps")
    func settleMade() throws {
        let ledger = Self.ledger(Self.item(), Self.work(.new, thumbnail: true, store: true, .new))
        let outcome = Self.outcome(header: Self.exif)
        let thumbnail = ledger.thumbnailResult(outcome: outcome, reused: nil)
        #expect(
            ledger.storeEffectAfterJob(outcome: outcome, thumbnail: thumbnail, claimedBefore: false)
                == .commitWritten(replacing: false))
        let settled = ledger.settle(
            thumbnail: thumbnail, outcome: outcome, date: Self.exif, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { FileStamp(size: 31, modified: 41) }, logs: true)
        #expect(!settled.deletesStore)
        let finished = settled.finished
        #expect(finished.archived.thumbnailData == Self.png)
        #expect(finished.archived.dateCreated == Self.exif)
        #expect(finished.archived.serialNumber == "S4" && finished.archived.valueInDollars == 12)
        #expect(finished.failure == nil && !finished.forget)
        #expect(finished.log?.action == .new)
        #expect(finished.profile?.format == "JPEG")
        let record = try #require(finished.record)
        #expect(record.thumbnailFingerprint == "T1" && record.storeFingerprint == "S1")
        #expect(record.sourceSize == 11 && record.sourceModified == 21 && record.sourceHash == "H1")
        #expect(record.storeSize == 31 && record.storeModified == 41 && record.storeHash == "SH1")
        #expect(record.dateCreated == Self.exif.timeIntervalSince1970)
        #expect(record.failure == nil)
    }

    @Test(
        "A failure of the source: no thumbnail, the store file deleted, the failure recorded with its own fingerprint")
    func settleFailed() throws {
        let ledger = Self.ledger(
            Self.item(), Self.work(.changed, thumbnail: true, store: true, .sourceChanged), previous: Self.previous())
        let outcome = Self.outcome(header: nil, failure: ItemFailure(.decode, "truncated JPEG"))
        let thumbnail = ledger.thumbnailResult(outcome: outcome, reused: .success(Self.png))
        var written = outcome
        written.storeWritten = true
        written.store = Data([0xFF])
        #expect(
            ledger.storeEffectAfterJob(outcome: written, thumbnail: thumbnail, claimedBefore: false) == .discardWritten,
            "a failed item's store file never goes into place")
        let settled = ledger.settle(
            thumbnail: thumbnail, outcome: outcome, date: Self.fileTime, dateGuess: "no EXIF date", storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { FileStamp(size: 1, modified: 1) }, logs: true)
        #expect(settled.deletesStore)
        #expect(settled.finished.archived.thumbnailData == nil)
        #expect(settled.finished.failure?.message == "truncated JPEG")
        #expect(settled.finished.dateGuess == nil, "a failed item's date is not listed as a guess")
        #expect(settled.finished.log?.action == .failed && settled.finished.log?.reason == "decode: truncated JPEG")
        let record = try #require(settled.finished.record)
        #expect(record.thumbnailFingerprint == "" && record.failureFingerprint == "F1")
        #expect(record.failure == ItemFailure(.decode, "truncated JPEG"), "stored structured: its stage and message")
        #expect(record.storeSize == -1 && record.storeHash == "", "no store file is recorded for a failed item")
    }

    @Test("A timeout or crash is forgotten, to be tried again next run; a migrated store file in place stays")
    func settleTransientAndInPlace() {
        let ledger = Self.ledger(Self.item(carried: .storeFile), Self.work(.new, thumbnail: true, store: true, .new))
        let outcome = Self.outcome(header: nil, failure: ItemFailure(.timeout, "timed out", transient: true))
        #expect(ledger.storeEffectAfterJob(outcome: outcome, thumbnail: nil, claimedBefore: false) == .none)
        let settled = ledger.settle(
            thumbnail: ledger.thumbnailResult(outcome: outcome, reused: nil), outcome: outcome, date: Self.now,
            dateGuess: nil, storeInPlace: true, sourceStamp: { nil }, storeStamp: { nil }, logs: false)
        #expect(settled.finished.forget && settled.finished.record == nil)
        #expect(!settled.deletesStore, "the user's own store file, in place, is never deleted")
        #expect(settled.finished.log == nil)
        var carried = Self.outcome(header: nil)
        carried.storeWritten = false
        carried.store = nil
        #expect(ledger.storeEffectAfterJob(outcome: carried, thumbnail: nil, claimedBefore: false) == .placeCarried)
    }

    @Test("Unchanged items settle from the record: the reused thumbnail or failure, no new record")
    func settleUnchanged() {
        let ledger = Self.ledger(
            Self.item(), Self.work(.unchanged, thumbnail: false, store: false, .unchanged), previous: Self.previous())
        let date = ledger.date(read: nil, fileTime: { nil }, now: Self.now).date
        let settled = ledger.settle(
            thumbnail: .success(Self.png), outcome: nil, date: date, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: true)
        #expect(settled.finished.archived.thumbnailData == Self.png)
        #expect(settled.finished.record == nil, "nothing changed: nothing to record")
        #expect(settled.finished.log?.action == .unchanged)
        let failedBefore = ledger.settle(
            thumbnail: .failure(ItemFailure(.decode, "truncated")), outcome: nil, date: date, dateGuess: nil,
            storeInPlace: false, sourceStamp: { nil }, storeStamp: { nil }, logs: true)
        #expect(
            failedBefore.finished.failure?.stage == .decode && failedBefore.finished.failure?.message == "truncated")
        #expect(failedBefore.finished.log?.action == .failed)
        #expect(failedBefore.finished.failure?.known == nil, "its record had no failure: not a known one")
        let knownLedger = Self.ledger(
            Self.item(), Self.work(.unchanged, thumbnail: false, store: false, .unchanged),
            previous: Self.previous(failure: ItemFailure(.decode, "truncated")))
        let known = knownLedger.settle(
            thumbnail: .failure(ItemFailure(.decode, "truncated")), outcome: nil, date: date, dateGuess: nil,
            storeInPlace: false, sourceStamp: { nil }, storeStamp: { nil }, logs: false)
        #expect(known.finished.failure?.known == true, "replayed from the record: known from an earlier run")
    }

    @Test("A missing source keeps its thumbnail, store file and date, fails of its own kind, and records since when")
    func settleKept() {
        let work = Self.work(.kept, thumbnail: false, store: false, .sourceMissing)
        let ledger = Self.ledger(Self.item(), work, previous: Self.previous())
        let date = ledger.date(read: nil, fileTime: { nil }, now: Self.now).date
        let first = ledger.settle(
            thumbnail: .success(Self.png), outcome: nil, date: date, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: true, now: Self.now)
        #expect(!first.deletesStore)
        #expect(first.finished.archived.thumbnailData == Self.png)
        #expect(first.finished.archived.dateCreated == Date(timeIntervalSince1970: 1_300_000_000))
        #expect(first.finished.failure?.kept == true)
        #expect(first.finished.failure?.message.hasPrefix("source missing since 2023-11-14T22:13:20") == true)
        #expect(first.finished.record?.missingSince == Self.now.timeIntervalSince1970)
        #expect(first.finished.record?.storeHash == "SH0" && first.finished.record?.thumbnailFingerprint == "T0")
        #expect(first.finished.log?.action == .kept)
        // The next night: the same date, nothing to record again.
        var since = Self.previous()
        since.missingSince = Self.now.timeIntervalSince1970
        let later = Self.ledger(Self.item(), work, previous: since).settle(
            thumbnail: .success(Self.png), outcome: nil, date: date, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: false, now: Self.now.addingTimeInterval(86_400))
        #expect(later.finished.record == nil)
        #expect(
            first.finished.failure?.known == nil && later.finished.failure?.known == true, "news the first night only")
        #expect(later.finished.failure?.message.hasPrefix("source missing since 2023-11-14T22:13:20") == true)
        // Its thumbnail lost from the state: it fails, but its store file still stays.
        let lost = ledger.settle(
            thumbnail: .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state")),
            outcome: nil, date: date, dateGuess: nil, storeInPlace: false, sourceStamp: { nil }, storeStamp: { nil },
            logs: false, now: Self.now)
        #expect(!lost.deletesStore)
        // Back: the record forgets since when, and nothing is redone.
        let back = Self.ledger(
            Self.item(), Self.work(.changed, thumbnail: false, store: false, .sourceBack), previous: since)
        #expect(back.settlesWithoutJob)
        let restored = back.settle(
            thumbnail: .success(Self.png), outcome: nil, date: date, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: false, now: Self.now)
        #expect(restored.finished.record?.missingSince == nil && restored.finished.record?.storeHash == "SH0")
        #expect(restored.finished.thumbnail == Self.png, "the state keeps its thumbnail")
    }

    @Test(
        "An unreadable or empty photo keeps its thumbnail, store file and record, and fails saying why, every night"
    )
    func settleUnusable() {
        var unreadable = Self.work(.kept, thumbnail: false, store: false, .sourceUnreadable)
        unreadable.unreadable = EACCES
        let empty = Self.work(.kept, thumbnail: false, store: false, .sourceEmpty)
        for (work, start) in [(unreadable, "cannot be read (Permission denied)"), (empty, "is empty (0 bytes)")] {
            let ledger = Self.ledger(Self.item(), work, previous: Self.previous())
            #expect(ledger.thumbnail == .reuse && ledger.store == .keep && ledger.settlesWithoutJob)
            let settled = ledger.settle(
                thumbnail: .success(Self.png), outcome: nil, date: Self.exif, dateGuess: nil, storeInPlace: false,
                sourceStamp: { nil }, storeStamp: { nil }, logs: true, now: Self.now)
            #expect(!settled.deletesStore && settled.finished.archived.thumbnailData == Self.png)
            #expect(settled.finished.failure?.kept == true && settled.finished.failure?.known == nil)
            #expect(settled.finished.failure?.message.hasPrefix(start) == true, "\(settled.finished.failure!)")
            #expect(settled.finished.record == nil, "not missing: its record stays as it was")
            #expect(settled.finished.log?.action == .kept && settled.finished.log?.reason.hasPrefix(start) == true)
        }
    }

    @Test("An item without a photo: its carried thumbnail kept, recorded unless unchanged, never a store file")
    func settleWithoutPhoto() {
        let carried = Self.ledger(
            Self.item(image: false, carried: .thumbnail(Self.png)),
            Self.work(.new, thumbnail: false, store: false, .noImage))
        let settled = carried.settle(
            thumbnail: nil, outcome: nil, date: Self.manifestDate, dateGuess: nil, storeInPlace: false,
            sourceStamp: { FileStamp(size: 1, modified: 1) }, storeStamp: { nil }, logs: true)
        #expect(settled.finished.archived.thumbnailData == Self.png)
        #expect(!settled.finished.hasImage && !settled.deletesStore)
        #expect(settled.finished.record?.sourceSize == -1, "no photo: no source stamp")
        #expect(settled.finished.log?.reason == "no image")
        let unchanged = Self.ledger(
            Self.item(image: false), Self.work(.unchanged, thumbnail: false, store: false, .unchanged))
        let again = unchanged.settle(
            thumbnail: nil, outcome: nil, date: Self.manifestDate, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: false)
        #expect(again.finished.record == nil && again.finished.archived.thumbnailData == nil)
    }

    @Test("Effects and their facts: a file that appeared fails the item for this run and stays; a carried file's hash")
    func storeFacts() {
        let new = Self.ledger(Self.item(), Self.work(.new, thumbnail: true, store: true, .new))
        var outcome = Self.outcome(header: nil)
        var thumbnail: Result<Data, ItemFailure>? = .success(Self.png)
        let keep = new.apply(
            .appeared(path: "/out/k"), effect: .commitWritten(replacing: false), to: &outcome, thumbnail: &thumbnail)
        #expect(keep, "a file thumbpipe did not write is not deleted either")
        #expect(!outcome.storeWritten && outcome.failure?.transient == true)
        #expect(outcome.failure?.message.hasPrefix("/out/k appeared during the run") == true)
        if case .failure = thumbnail {} else { Issue.record("the item failed: \(String(describing: thumbnail))") }
        let carrying = Self.ledger(Self.item(carried: .storeFile), Self.work(.new, thumbnail: true, store: true, .new))
        var placed = ItemOutcome()
        var none: Result<Data, ItemFailure>? = nil
        let stamp = FileStamp(size: 5, modified: 6)
        #expect(
            !carrying.apply(
                .placed(hash: "CH", sourceStamp: stamp), effect: .placeCarried, to: &placed, thumbnail: &none))
        #expect(placed.storeWritten && placed.storeHash == "CH" && placed.sourceHash == "CH")
        #expect(placed.sourceStamp == stamp)
        var discarded = Self.outcome(header: nil)
        _ = new.apply(.done, effect: .discardWritten, to: &discarded, thumbnail: &thumbnail)
        #expect(!discarded.storeWritten)
    }

    @Test("A reused thumbnail: the recorded failure, the state's PNG, or a failure when the state lost it")
    func reused() {
        let ledger = Self.ledger(
            Self.item(), Self.work(.unchanged, thumbnail: false, store: false, .unchanged), previous: Self.previous())
        #expect(ledger.reusedThumbnail(recorded: Self.previous(), png: Self.png) == .success(Self.png))
        var failed = Self.previous()
        failed.failure = ItemFailure(.decode, "bad")
        #expect(ledger.reusedThumbnail(recorded: failed, png: nil) == .failure(ItemFailure(.decode, "bad")))
        #expect(
            ledger.reusedThumbnail(recorded: Self.previous(), png: nil)
                == .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state")))
        #expect(ledger.storeEffectBeforeJob(reused: .success(Self.png)) == .none, "not a moved item")
    }
}

/// An upgrade that changes an output's bytes redoes exactly that output.
@Suite("Output versions are part of the fingerprints")
struct OutputVersionTests {
    @Test(
        "A thumbnail version bump moves only the thumbnail's fingerprint; a store bump only the store's; libvips both")
    func bumps() {
        let settings = PipelineSettings()
        let base = OutputVersions(thumbnail: 1, store: 1, libvips: "8.14.1")
        func prints(_ v: OutputVersions) -> (String, String) {
            (
                IncrementalPlan.thumbnailFingerprint(settings, versions: v),
                IncrementalPlan.storeFingerprint(settings, versions: v)
            )
        }
        let (t0, s0) = prints(base)
        var thumbnail = base
        thumbnail.thumbnail = 2
        #expect(prints(thumbnail).0 != t0 && prints(thumbnail).1 == s0)
        var store = base
        store.store = 2
        #expect(prints(store).0 == t0 && prints(store).1 != s0)
        var vips = base
        vips.libvips = "8.15.0"
        #expect(prints(vips).0 != t0 && prints(vips).1 != s0)
        // This build's fingerprints are those of its own versions and libvips.
        #expect(OutputVersions.current.libvips == LibVips.version)
        #expect(
            IncrementalPlan.thumbnailFingerprint(settings)
                == IncrementalPlan.thumbnailFingerprint(settings, versions: .current))
    }
}

extension ItemLedgerTests {
    @Test("Metadata: no job, the reused outputs, the record takes the new name and fields; the log says metadata")
    func settleMetadata() throws {
        var edited = Self.item()
        edited.itemName = "Red Bike"
        let work = Self.work(.metadata, thumbnail: false, store: false, .fieldsChanged)
        let ledger = Self.ledger(edited, work, previous: Self.previous())
        #expect(ledger.thumbnail == .reuse && ledger.store == .keep && ledger.settlesWithoutJob)
        let date = ledger.date(read: nil, fileTime: { nil }, now: Self.now).date
        let settled = ledger.settle(
            thumbnail: .success(Self.png), outcome: nil, date: date, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { nil }, logs: true)
        #expect(settled.finished.archived.itemName == "Red Bike" && settled.finished.archived.thumbnailData == Self.png)
        let record = try #require(settled.finished.record)
        #expect(record.itemName == "Red Bike" && record.fieldsHash == ItemRecord.fieldsHash(edited))
        #expect(record.thumbnailFingerprint == "T0" && record.storeHash == "SH0", "its outputs' facts stay")
        #expect(settled.finished.log?.action == .metadata)
    }

    @Test(
        "A recorded thumbnail gone or damaged: made again as a changed item (a moved one's store file too); a kept or failed item is not"
    )
    func remaking() throws {
        let damaged = "the state's thumbnail missing or damaged"
        func remade(_ work: ItemWork) throws -> ItemLedger {
            try #require(Self.ledger(Self.item(), work, previous: Self.previous()).remakingThumbnail())
        }
        let unchanged = try remade(Self.work(.unchanged, thumbnail: false, store: false, .unchanged))
        #expect(unchanged.thumbnail == .make && unchanged.store == .keep && !unchanged.settlesWithoutJob)
        #expect(unchanged.work?.itemClass == .changed && unchanged.work?.reason == damaged)
        #expect(unchanged.work?.reasons.changeKind == "output" && unchanged.remadeFrom == .unchanged)
        let job = unchanged.job(source: "/photos/bike.jpg")
        #expect(job.makeThumbnail && !job.makeStore, "the store file stays")
        let settled = unchanged.settle(
            thumbnail: .success(Self.png), outcome: Self.outcome(header: nil), date: Self.exif, dateGuess: nil,
            storeInPlace: false, sourceStamp: { nil }, storeStamp: { FileStamp(size: 30, modified: 40) }, logs: true)
        #expect(settled.finished.remadeFrom == .unchanged && settled.finished.archived.thumbnailData == Self.png)
        #expect(settled.finished.record?.thumbnailFingerprint == "T1")
        #expect(settled.finished.log?.action == .changed && settled.finished.log?.reason == damaged)

        let metadata = try remade(Self.work(.metadata, thumbnail: false, store: false, .fieldsChanged))
        #expect(metadata.thumbnail == .make && metadata.store == .keep)
        #expect(metadata.work?.reason == "fields edited, \(damaged)" && metadata.remadeFrom == .metadata)

        var newKey = Self.item()
        newKey.itemKey = "NEWKEY"
        let moved = try #require(
            ItemLedger(
                item: newKey, index: 0, work: Self.work(.moved, thumbnail: false, store: false, .moved),
                previous: Self.previous(), fingerprints: Self.fingerprints, manifestDate: Self.manifestDate,
                recordsState: true, movedFrom: "KEY"
            ).remakingThumbnail())
        #expect(
            moved.thumbnail == .make && moved.store == .make,
            "a moved store file is placed only beside a good thumbnail")
        #expect(moved.storeEffectBeforeJob(reused: nil) == .none && moved.remadeFrom == .moved)

        let storeRedone = try remade(Self.work(.changed, thumbnail: false, store: true, .storeSettingsChanged))
        #expect(storeRedone.thumbnail == .make && storeRedone.store == .make)
        #expect(storeRedone.work?.reasons.changeKind == "settings" && storeRedone.remadeFrom == .changed)

        let kept = Self.ledger(
            Self.item(), Self.work(.kept, thumbnail: false, store: false, .sourceMissing), previous: Self.previous())
        #expect(kept.remakingThumbnail() == nil, "its photo is missing")
        #expect(
            kept.reusedThumbnail(recorded: Self.previous(), png: Data([0]), problem: "not a PNG")
                == .failure(ItemFailure(.decode, "the previous run's thumbnail in its state is damaged (not a PNG)")))
        var failed = Self.previous()
        failed.failure = ItemFailure(.decode, "bad")
        #expect(
            Self.ledger(
                Self.item(), Self.work(.unchanged, thumbnail: false, store: false, .unchanged), previous: failed
            )
            .remakingThumbnail() == nil, "a recorded failure has no thumbnail to lose")
        #expect(
            Self.ledger(Self.item(), Self.work(.new, thumbnail: true, store: true, .new)).remakingThumbnail() == nil,
            "nothing reused")
    }

    @Test("A record's times that no run records are a damaged state: dates past ±10,000 years, a duration not one")
    func recordTimes() {
        #expect(Self.previous().timeProblem == nil)
        let cases: [(String, (inout ItemRecord) -> Void, String?)] = [
            (
                "year 1 and year 9999",
                {
                    $0.dateCreated = -62_135_596_800; $0.missingSince = 253_402_300_799
                }, nil
            ),
            ("1e308", { $0.dateCreated = 1e308 }, "date_created 1e+308 is not a date"),
            ("-1e308", { $0.missingSince = -1e308 }, "missing_since -1e+308 is not a date"),
            ("NaN", { $0.dateCreated = .nan }, "date_created nan is not a date"),
            ("negative seconds", { $0.seconds = -1 }, "seconds -1.0 is not a duration"),
            ("infinite seconds", { $0.seconds = .infinity }, "seconds inf is not a duration"),
        ]
        for (name, change, expected) in cases {
            var record = Self.previous()
            change(&record)
            #expect(record.timeProblem == expected, "\(name)")
        }
    }

    @Test(
        "Moved: the old key's outputs under the new key, no job; the record is the old one under the new key and path")
    func settleMoved() throws {
        var work = Self.work(.moved, thumbnail: false, store: false, .moved)
        work.restamp = ("/photos/red-bike.jpg", FileStamp(size: 10, modified: 99))
        var moved = Self.item()
        moved.itemKey = "NEWKEY"
        let ledger = ItemLedger(
            item: moved, index: 0, work: work, previous: Self.previous(), fingerprints: Self.fingerprints,
            manifestDate: Self.manifestDate, recordsState: true, movedFrom: "KEY")
        #expect(ledger.thumbnail == .reuse && ledger.store == .move(from: "KEY") && ledger.settlesWithoutJob)
        let settled = ledger.settle(
            thumbnail: .success(Self.png), outcome: nil, date: Self.exif, dateGuess: nil, storeInPlace: false,
            sourceStamp: { nil }, storeStamp: { FileStamp(size: 30, modified: 77) }, logs: true)
        let record = try #require(settled.finished.record)
        #expect(
            record.itemKey == "NEWKEY" && record.sourcePath == "/photos/red-bike.jpg" && record.sourceModified == 99)
        #expect(record.sourceHash == "H0" && record.storeHash == "SH0" && record.storeModified == 77)
        #expect(settled.finished.archived.itemKey == "NEWKEY" && settled.finished.log?.action == .moved)
        #expect(!settled.deletesStore)
    }

    @Test("Fingerprints say why they differ: settings, or only the code's version (an upgrade)")
    func fingerprintChange() {
        var settings = PipelineSettings()
        let now = IncrementalPlan.thumbnailFingerprint(settings)
        var bumped = OutputVersions.current
        bumped.thumbnail += 1
        #expect(Fingerprint.change(from: now, to: now) == nil)
        #expect(
            Fingerprint.change(from: IncrementalPlan.thumbnailFingerprint(settings, versions: bumped), to: now) == .code
        )
        settings.thumbnail.scale = 3
        #expect(Fingerprint.change(from: now, to: IncrementalPlan.thumbnailFingerprint(settings)) == .settings)
        #expect(Fingerprint.change(from: "0123456789abcdef", to: now) == .settings, "a record of the older form")
        var work = ItemWork(itemClass: .changed, needsThumbnail: true, needsStore: false, reasons: .codeChanged)
        #expect(work.reasons.changeKind == "algorithm")
        work.reasons = [.thumbnailSettingsChanged, .codeChanged]
        #expect(work.reasons.changeKind == "settings")
    }
}
