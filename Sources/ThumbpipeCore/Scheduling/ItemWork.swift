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
    /// The thumbnail the state holds for it is missing or is not one thumbpipe
    /// made (found when the run reads it, not by the plan): made again.
    public static let recordedThumbnailDamaged = WorkReasons(rawValue: 1 << 18)
    /// The photo is there but cannot be read tonight (permissions, an I/O error):
    /// its last good outputs are kept and it is reported as a failure.
    public static let sourceUnreadable = WorkReasons(rawValue: 1 << 19)
    /// The photo is there but empty (0 bytes), as while it is being rewritten:
    /// its last good outputs are kept and it is reported as a failure.
    public static let sourceEmpty = WorkReasons(rawValue: 1 << 20)
    /// The photo keeps its size and time but is another file, or was changed in
    /// place (its inode or change time moved): its content decides.
    public static let sourceReplaced = WorkReasons(rawValue: 1 << 21)
    /// A sidecar of the photo (Takeout JSON, XMP) appeared, changed or went: its
    /// date and title are read again (the header and sidecars, no decode).
    public static let sidecarsChanged = WorkReasons(rawValue: 1 << 22)
    /// The photo changed, but only in its metadata (a title or date written into
    /// it): its image data hashes as recorded, so its outputs are kept, its metadata read.
    public static let photoMetadataChanged = WorkReasons(rawValue: 1 << 23)

    private static let texts: [(WorkReasons, String)] = [
        (.new, "new"), (.unchanged, "unchanged"), (.noImage, "no image"), (.imageRemoved, "image removed"),
        (.forced, "--force"), (.sourceChanged, "source changed"), (.limitsChanged, "limits changed since it failed"),
        (.thumbnailSettingsChanged, "thumbnail settings changed"), (.storeSettingsChanged, "store settings changed"),
        (.storeFileMissing, "store file missing"), (.storeFileDamaged, "store file damaged"),
        (.sourceMissing, "source missing"), (.sourceBack, "source back"),
        (.stateRebuilt, "state rebuilt: outputs adopted, not proven"),
        (.codeChanged, "thumbpipe or libvips upgraded (output version)"), (.fieldsChanged, "fields edited"),
        (.moved, "same content under a new path or key"),
        (.recordedThumbnailDamaged, "the state's thumbnail missing or damaged"),
        (.sourceUnreadable, "source cannot be read"), (.sourceEmpty, "source is empty (0 bytes)"),
        (.sourceReplaced, "source replaced (same size and time, another inode or change time)"),
        (.sidecarsChanged, "sidecars edited"), (.photoMetadataChanged, "photo changed, image data the same"),
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
        if !isDisjoint(with: [.sourceChanged, .imageRemoved, .sourceReplaced]) { return "source" }
        if !isDisjoint(with: [.thumbnailSettingsChanged, .storeSettingsChanged, .limitsChanged]) { return "settings" }
        if contains(.codeChanged) { return "algorithm" }
        if !isDisjoint(with: [.storeFileMissing, .storeFileDamaged, .recordedThumbnailDamaged]) { return "output" }
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
    /// For a kept item whose source cannot be read: why (the `errno` of the
    /// attempt), so its failure can say so; 0 otherwise.
    var unreadable: Int32 = 0
    /// Its photo's header and sidecars are read again (its metadata), nothing decoded.
    public var readsMetadata = false
    /// Its photo changed but may be the same image (``ItemLedger/mayKeepImage(previous:rules:)``):
    /// its job compares image-data hashes before it makes anything.
    public var mayKeepImage = false

    /// Why, in a few words, for `--dry-run`.
    public var reason: String { reasons.text + (mayKeepImage ? " (its image data compared first)" : "") }
}
