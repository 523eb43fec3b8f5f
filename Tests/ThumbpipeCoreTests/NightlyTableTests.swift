import Foundation
import Testing

@testable import ThumbpipeCore

/// The guide's Nightly table, row by row, in process: a previous record, the
/// facts gathered of the item tonight and the run's rules go in; the class, what
/// is redone and the reason come out. No file is read and no process started
/// (the CLI suites keep the end-to-end nights).
@Suite("The Nightly table, in process")
struct NightlyTableTests {
    static let path = "/photos/a.jpg"
    static let fingerprints = ItemLedger.Fingerprints(thumbnail: "T1-C1", store: "S1-C1", failure: "F1")

    /// What the last run recorded of `a.jpg`: made with this run's settings and code.
    static var recorded: ItemRecord {
        ItemRecord(
            itemKey: "a", sourcePath: path, sourceSize: 100, sourceModified: 1_000, sourceHash: "h-a",
            thumbnailFingerprint: fingerprints.thumbnail, storeFingerprint: fingerprints.store, dateCreated: 0,
            storeSize: 50, storeModified: 2_000, storeHash: "s-a", failure: nil, seconds: 0.5, itemName: "A",
            fieldsHash: 7)
    }

    /// Tonight's facts when nothing moved: the same stamps.
    static var same: ItemFacts {
        ItemFacts(source: FileStamp(size: 100, modified: 1_000), store: FileStamp(size: 50, modified: 2_000))
    }

    struct Row: Sendable, CustomStringConvertible {
        var name: String
        var path = NightlyTableTests.path
        var previous: @Sendable (inout ItemRecord) -> Void = { _ in }
        var facts: @Sendable (inout ItemFacts) -> Void = { _ in }
        var rules: @Sendable (inout ItemLedger.Rules) -> Void = { _ in }
        var fieldsEdited = false
        var itemClass: ItemClass
        var reason: String
        var thumbnail = false
        var store = false
        var description: String { name }
    }

    static let rows: [Row] = [
        Row(name: "unchanged: the same stamps, settings and code", itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "changed (source): another size", facts: { $0.source = FileStamp(size: 101, modified: 1_000) },
            itemClass: .changed, reason: "source changed", thumbnail: true, store: true),
        Row(
            name: "changed (source): another time", facts: { $0.source = FileStamp(size: 100, modified: 1_001) },
            itemClass: .changed, reason: "source changed", thumbnail: true, store: true),
        Row(
            name: "unchanged: touched, same content (--verify-content), recorded anew",
            facts: {
                $0.source = FileStamp(size: 100, modified: 5_000)
                $0.sourceHash = "h-a"
                $0.storeHash = "s-a"
            }, rules: { $0.verifyContent = true }, itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "changed (source): same stamps, other content (--verify-content)",
            facts: {
                $0.sourceHash = "h-other"
                $0.storeHash = "s-a"
            }, rules: { $0.verifyContent = true }, itemClass: .changed, reason: "source changed", thumbnail: true,
            store: true),
        Row(
            name: "changed (settings): the thumbnail's settings half moved",
            rules: { $0.fingerprints.thumbnail = "T2-C1" }, itemClass: .changed,
            reason: "thumbnail settings changed", thumbnail: true),
        Row(
            name: "changed (settings): the store's settings half moved",
            rules: { $0.fingerprints.store = "S2-C1" }, itemClass: .changed, reason: "store settings changed",
            store: true),
        Row(
            name: "changed (algorithm): only the code's half moved", rules: { $0.fingerprints.thumbnail = "T1-C2" },
            itemClass: .changed, reason: "thumbpipe or libvips upgraded (output version)", thumbnail: true),
        Row(
            name: "changed (output): the store file is missing", facts: { $0.store = nil }, itemClass: .changed,
            reason: "store file missing", store: true),
        Row(
            name: "changed (output): the store file was rewritten",
            facts: { $0.store = FileStamp(size: 50, modified: 9_000) }, itemClass: .changed,
            reason: "store file damaged", store: true),
        Row(
            name: "changed (output): same stamps, other bytes (--verify-content)",
            facts: {
                $0.sourceHash = "h-a"
                $0.storeHash = "s-other"
            }, rules: { $0.verifyContent = true }, itemClass: .changed, reason: "store file damaged", store: true),
        Row(name: "metadata: only the fields", fieldsEdited: true, itemClass: .metadata, reason: "fields edited"),
        Row(
            name: "metadata: a sidecar edited (its date and title read again, nothing decoded)",
            previous: { $0.sidecarStamp = "a.jpg.json 120 1000" }, facts: { $0.sidecars = "a.jpg.json 121 1500" },
            itemClass: .metadata, reason: "sidecars edited"),
        Row(
            name: "metadata: a sidecar appeared beside a photo recorded before sidecars were",
            facts: { $0.sidecars = "a.xmp 300 1200" }, itemClass: .metadata, reason: "sidecars edited"),
        Row(
            name: "unchanged: the sidecars as recorded",
            previous: { $0.sidecarStamp = "a.jpg.json 120 1000" }, facts: { $0.sidecars = "a.jpg.json 120 1000" },
            itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "unchanged: no sidecars, recorded before sidecars were", facts: { $0.sidecars = "" },
            itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "changed (settings) with a sidecar edited: the job reads both",
            previous: { $0.sidecarStamp = "a.jpg.json 120 1000" }, facts: { $0.sidecars = "a.jpg.json 121 1500" },
            rules: { $0.fingerprints.thumbnail = "T2-C1" }, itemClass: .changed, reason: "thumbnail settings changed",
            thumbnail: true),
        Row(
            name: "moved: the same photo under a new path (same size, same hash)", path: "/photos/2024/a.jpg",
            facts: { $0.sourceHash = "h-a" }, itemClass: .moved, reason: "same content under a new path or key"),
        Row(
            name: "changed (source): a new path with other content", path: "/photos/b.jpg",
            facts: { $0.sourceHash = "h-b" }, itemClass: .changed, reason: "source changed", thumbnail: true,
            store: true),
        Row(
            name: "kept (source missing): gone, its last run made it",
            facts: {
                $0.source = nil
                $0.sourceGone = true
            }, itemClass: .kept, reason: "source missing"),
        Row(
            name: "kept even under --force, which cannot redo it",
            facts: {
                $0.source = nil
                $0.sourceGone = true
            }, rules: { $0.force = true }, itemClass: .kept, reason: "source missing"),
        Row(
            name: "--prune-missing: a gone source is redone (and fails)",
            facts: {
                $0.source = nil
                $0.sourceGone = true
            }, rules: { $0.pruneMissing = true }, itemClass: .changed, reason: "source changed", thumbnail: true,
            store: true),
        Row(
            name: "kept (unreadable): there but cannot be stat'ed (a folder above refuses this user)",
            facts: {
                $0.source = nil
                $0.unreadable = .accessDenied
            }, itemClass: .kept, reason: "source cannot be read"),
        Row(
            name: "kept (unreadable): chmod 000 moved its change time, the hash could not be read",
            facts: {
                $0.source = FileStamp(size: 100, modified: 1_000, inode: 5, changed: 9)
                $0.unreadable = .accessDenied
            }, itemClass: .kept, reason: "source cannot be read"),
        Row(
            name: "kept (unreadable) even under --force and --prune-missing: it is there",
            facts: { $0.unreadable = .ioError },
            rules: {
                $0.force = true
                $0.pruneMissing = true
            }, itemClass: .kept, reason: "source cannot be read"),
        Row(
            name: "kept (empty): 0 bytes tonight, being rewritten",
            facts: { $0.source = FileStamp(size: 0, modified: 3_000) }, itemClass: .kept,
            reason: "source is empty (0 bytes)"),
        Row(
            name: "a known failure that is unreadable now: retried (nothing good to keep)",
            previous: { $0.failure = ItemFailure(.decode, "x") },
            facts: {
                $0.source = FileStamp(size: 200, modified: 3_000)
                $0.unreadable = .accessDenied
            }, itemClass: .changed, reason: "source changed", thumbnail: true, store: true),
        Row(
            name: "changed (source): replaced by another file of the same size and time, other content",
            previous: {
                $0.sourceInode = 5
                $0.sourceChanged = 9
            },
            facts: {
                $0.source = FileStamp(size: 100, modified: 1_000, inode: 6, changed: 10)
                $0.sourceHash = "h-other"
            }, itemClass: .changed, reason: "source replaced (same size and time, another inode or change time)",
            thumbnail: true, store: true),
        Row(
            name: "unchanged: a new inode (restored from a backup), the same content, recorded anew",
            previous: {
                $0.sourceInode = 5
                $0.sourceChanged = 9
            },
            facts: {
                $0.source = FileStamp(size: 100, modified: 1_000, inode: 6, changed: 10)
                $0.sourceHash = "h-a"
            }, itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "changed (source): identity moved and the record has no hash to compare",
            previous: {
                $0.sourceInode = 5
                $0.sourceChanged = 9
                $0.sourceHash = ""
            },
            facts: { $0.source = FileStamp(size: 100, modified: 1_000, inode: 5, changed: 11) },
            itemClass: .changed, reason: "source replaced (same size and time, another inode or change time)",
            thumbnail: true, store: true),
        Row(
            name: "unchanged: a record from before schema 4 (identity unknown) is not compared",
            facts: { $0.source = FileStamp(size: 100, modified: 1_000, inode: 6, changed: 10) },
            itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "changed (source back): a kept item's photo is there again",
            previous: { $0.missingSince = 1_700_000_000 }, itemClass: .changed, reason: "source back"),
        Row(
            name: "--force: everything", rules: { $0.force = true }, itemClass: .changed, reason: "--force",
            thumbnail: true, store: true),
        Row(
            name: "a rebuilt state: outputs adopted, made again",
            previous: { $0.thumbnailFingerprint = ItemRecord.rebuilt }, itemClass: .changed,
            reason: "state rebuilt: outputs adopted, not proven", thumbnail: true, store: true),
        Row(
            name: "a known failure, same source and limits: kept as a failure, not retried",
            previous: {
                $0.failure = ItemFailure(.decode, "truncated JPEG")
                $0.failureFingerprint = "F1"
            }, itemClass: .unchanged, reason: "unchanged"),
        Row(
            name: "a known failure under new limits: retried",
            previous: {
                $0.failure = ItemFailure(.decode, "too many pixels")
                $0.failureFingerprint = "F0"
            }, itemClass: .changed, reason: "limits changed since it failed", thumbnail: true, store: true),
        Row(
            name:
                "changed (source), its image data compared first: a photo rewritten whose record knows its image hash",
            previous: { $0.imageHash = "jpeg:1" }, facts: { $0.source = FileStamp(size: 120, modified: 1_500) },
            itemClass: .changed, reason: "source changed (its image data compared first)", thumbnail: true,
            store: true),
        Row(
            name: "changed (source), no comparison: the store file carries the photo's metadata (store.keepMetadata)",
            previous: { $0.imageHash = "jpeg:1" }, facts: { $0.source = FileStamp(size: 120, modified: 1_500) },
            rules: { $0.storeKeepsMetadata = true }, itemClass: .changed, reason: "source changed", thumbnail: true,
            store: true),
        Row(
            name: "changed (source), no comparison: its store file is missing as well",
            previous: { $0.imageHash = "jpeg:1" },
            facts: {
                $0.source = FileStamp(size: 120, modified: 1_500)
                $0.store = nil
            }, itemClass: .changed, reason: "source changed", thumbnail: true, store: true),
        Row(
            name: "changed (source), no comparison: the thumbnail's settings moved as well",
            previous: { $0.imageHash = "jpeg:1" }, facts: { $0.source = FileStamp(size: 120, modified: 1_500) },
            rules: { $0.fingerprints.thumbnail = "T2-C1" }, itemClass: .changed, reason: "source changed",
            thumbnail: true, store: true),
        Row(
            name: "a known failure whose source changed: retried", previous: { $0.failure = ItemFailure(.decode, "x") },
            facts: { $0.source = FileStamp(size: 200, modified: 3_000) }, itemClass: .changed,
            reason: "source changed", thumbnail: true, store: true),
    ]

    @Test("Each row of the table: class, reason and what is redone", arguments: rows)
    func row(_ row: Row) {
        var previous = Self.recorded
        row.previous(&previous)
        var facts = Self.same
        row.facts(&facts)
        var rules = ItemLedger.Rules(fingerprints: Self.fingerprints)
        row.rules(&rules)
        let work = ItemLedger.classify(
            path: row.path, previous: previous, facts: facts, fieldsEdited: row.fieldsEdited, unrecorded: [],
            rules: rules)
        #expect(work.itemClass == row.itemClass)
        #expect(work.reason == row.reason)
        #expect(work.needsThumbnail == row.thumbnail, "thumbnail redone")
        #expect(work.needsStore == row.store, "store redone")
        #expect(work.readsMetadata == (row.reason == "sidecars edited"), "metadata read again")
    }

    @Test("Every class and every reason of the guide's table has a row")
    func coverage() {
        let classes = Set(Self.rows.map(\.itemClass))
        // new and removed are decided by the plan's join of keys, tested below.
        #expect(classes.union([.new, .removed]) == Set(ItemClass.allCases))
        let reasons = Set(Self.rows.map(\.reason))
        for reason in [
            "source changed", "thumbnail settings changed", "store settings changed",
            "thumbpipe or libvips upgraded (output version)", "store file missing", "store file damaged",
            "fields edited", "same content under a new path or key", "source missing", "source back", "--force",
            "state rebuilt: outputs adopted, not proven", "limits changed since it failed", "source cannot be read",
            "source is empty (0 bytes)", "source replaced (same size and time, another inode or change time)",
            "sidecars edited",
        ] {
            #expect(reasons.contains(reason), "no row for \(reason)")
        }
    }

    @Test("A touched source with the same content is recorded anew, not redone")
    func restamp() {
        var facts = Self.same
        facts.source = FileStamp(size: 100, modified: 5_000)
        facts.sourceHash = "h-a"
        facts.storeHash = "s-a"
        let work = ItemLedger.classify(
            path: Self.path, previous: Self.recorded, facts: facts, fieldsEdited: false, unrecorded: [],
            rules: ItemLedger.Rules(fingerprints: Self.fingerprints, verifyContent: true))
        #expect(work.restamp?.stamp == FileStamp(size: 100, modified: 5_000))
        #expect(work.sourceUnchanged)
        // A new inode with the same content: its new identity is recorded, so the next night trusts its stamp.
        var previous = Self.recorded
        previous.sourceInode = 5
        previous.sourceChanged = 9
        var restored = Self.same
        restored.source = FileStamp(size: 100, modified: 1_000, inode: 6, changed: 10)
        restored.sourceHash = "h-a"
        let again = ItemLedger.classify(
            path: Self.path, previous: previous, facts: restored, fieldsEdited: false, unrecorded: [],
            rules: ItemLedger.Rules(fingerprints: Self.fingerprints))
        #expect(again.restamp?.stamp == FileStamp(size: 100, modified: 1_000, inode: 6, changed: 10))
        #expect(
            ItemLedger.needsSourceHash(
                path: Self.path, previous: previous, stamp: restored.source,
                rules: ItemLedger.Rules(fingerprints: Self.fingerprints)), "identity moved: content decides")
    }

    @Test("Which facts are gathered: a hash only where stamps cannot decide, the store only when it would be kept")
    func factsAsked() {
        let rules = ItemLedger.Rules(fingerprints: Self.fingerprints)
        let recorded = Self.recorded
        let sameStamp = FileStamp(size: 100, modified: 1_000)
        #expect(!ItemLedger.needsSourceHash(path: Self.path, previous: recorded, stamp: sameStamp, rules: rules))
        #expect(
            ItemLedger.needsSourceHash(path: "/photos/new/a.jpg", previous: recorded, stamp: sameStamp, rules: rules))
        #expect(
            !ItemLedger.needsSourceHash(
                path: "/photos/new/a.jpg", previous: recorded, stamp: FileStamp(size: 7, modified: 1), rules: rules),
            "another size decides without reading")
        var forced = rules
        forced.force = true
        #expect(!ItemLedger.needsSourceHash(path: Self.path, previous: recorded, stamp: sameStamp, rules: forced))
        var verify = rules
        verify.verifyContent = true
        #expect(ItemLedger.needsSourceHash(path: Self.path, previous: recorded, stamp: sameStamp, rules: verify))
        #expect(ItemLedger.checksStoreFile(path: Self.path, previous: recorded, facts: Self.same, rules: rules))
        var newStore = rules
        newStore.fingerprints.store = "S2-C1"
        #expect(!ItemLedger.checksStoreFile(path: Self.path, previous: recorded, facts: Self.same, rules: newStore))
        var changed = Self.same
        changed.source = FileStamp(size: 1, modified: 1)
        #expect(!ItemLedger.checksStoreFile(path: Self.path, previous: recorded, facts: changed, rules: rules))
    }

    @Test("Items without a photo: unchanged, edited, or changed when they lost theirs")
    func withoutPhoto() {
        #expect(
            ItemLedger.classifyWithoutPhoto(hadPhoto: false, fieldsEdited: false, unrecorded: []).itemClass
                == .unchanged)
        let edited = ItemLedger.classifyWithoutPhoto(hadPhoto: false, fieldsEdited: true, unrecorded: [])
        #expect(edited.itemClass == .metadata && edited.reason == "fields edited")
        let lost = ItemLedger.classifyWithoutPhoto(hadPhoto: true, fieldsEdited: false, unrecorded: [])
        #expect(lost.itemClass == .changed && lost.reason == "image removed")
    }

    @Test("A gone item's photo under a new key: the same content made with this run's settings, not a missing one")
    func movedToNewKey() {
        var gone = Self.recorded
        gone.itemKey = "old"
        var missing = gone
        missing.missingSince = 1
        var otherSettings = gone
        otherSettings.storeFingerprint = "S0-C1"
        let fp = Self.fingerprints
        #expect(ItemLedger.movesFrom([missing, otherSettings, gone], size: 100, hash: "h-a", fingerprints: fp) == 2)
        #expect(ItemLedger.movesFrom([gone], size: 100, hash: "h-b", fingerprints: fp) == nil)
    }

    @Test("--max-removed: the default 10 %, a count, and an empty manifest always refused")
    func maxRemoved() throws {
        func plan(kept: Int, removed: Int) -> IncrementalPlan {
            IncrementalPlan(
                work: Array(
                    repeating: ItemWork(itemClass: .unchanged, needsThumbnail: false, needsStore: false, reasons: []),
                    count: kept),
                removed: (0..<removed).map {
                    IncrementalPlan.RemovedItem(itemKey: "k\($0)", itemName: "", sourcePath: "")
                },
                thumbnailFingerprint: "", storeFingerprint: "")
        }
        try plan(kept: 90, removed: 10).checkRemovals(
            limit: .standard, manifestItems: 90, manifestName: "m", output: "o")
        #expect(throws: ThumbpipeError.self) {
            try plan(kept: 89, removed: 11).checkRemovals(
                limit: .standard, manifestItems: 89, manifestName: "m", output: "o")
        }
        try plan(kept: 89, removed: 11).checkRemovals(
            limit: try RemovalLimit(parsing: "11"), manifestItems: 89, manifestName: "m", output: "o")
        #expect(throws: ThumbpipeError.self) {
            try plan(kept: 0, removed: 1).checkRemovals(
                limit: try RemovalLimit(parsing: "100%"), manifestItems: 0, manifestName: "m", output: "o")
        }
    }
}
