import Foundation

/// What a previous run recorded about one item, to decide what a new run must redo.
public struct ItemRecord: Sendable, Equatable {
    /// The item's key.
    public var itemKey: String
    /// The source path it was made from ("" for items without an image).
    public var sourcePath: String
    /// The source's size in bytes and modification time in nanoseconds.
    public var sourceSize: Int64
    public var sourceModified: Int64
    /// XXH64 of the source's bytes.
    public var sourceHash: String
    /// Fingerprints of the settings that shaped the thumbnail and the store file
    /// ("" for the thumbnail of a failed item).
    public var thumbnailFingerprint: String
    public var storeFingerprint: String
    /// The date the item was archived with (EXIF or file time), seconds since 1970.
    public var dateCreated: Double?
    /// The store file's size, modification time (ns) and XXH64, when one was written.
    public var storeSize: Int64
    public var storeModified: Int64
    public var storeHash: String
    /// Why the item failed, when it did (a failure of the source: circumstances
    /// of a run are never recorded).
    public var failure: ItemFailure?
    /// How long the item took, in seconds (for the time a re-run saves).
    public var seconds: Double
    /// Since when (seconds since 1970) its source has been missing while its last
    /// good outputs are kept; nil while the source is there.
    public var missingSince: Double? = nil
    /// The limits a failure was met under (``IncrementalPlan/failureFingerprint(_:)``):
    /// it is kept while they and the source stay the same.
    public var failureFingerprint = ""
    /// The item's name when it was recorded (what a removed or kept item is reported by).
    public var itemName = ""
    /// ``ItemRecord/fieldsHash(_:)`` of the item's archived fields when it was
    /// recorded (0 when unknown): a different one is a metadata edit.
    public var fieldsHash: UInt64 = 0
    /// The source's inode and inode change time (ns) when it was recorded; 0 when
    /// not known (a state of schema 1 to 3): a replacement with the same size and
    /// time shows in them.
    public var sourceInode: UInt64 = 0
    public var sourceChanged: Int64 = 0
    /// The title the photo gave itself (embedded, or in a sidecar) when it was
    /// last read; nil without one (or before schema 5). An item named after its
    /// file (folder mode) is archived by it.
    public var title: String? = nil
    /// The photo's sidecars when they were last read (``Sidecars/stamp(for:)``):
    /// another is a metadata edit; nil when not known (before schema 5).
    public var sidecarStamp: String? = nil
    /// The hash of the photo's image data without its metadata when it was last
    /// read (``ImageDataHash``): a photo changed only in its metadata keeps its
    /// outputs. Nil for formats without one, and before schema 6.
    public var imageHash: String? = nil

    /// A time no run records, read back from a damaged or crafted state: a date or
    /// a missing-since past ``ArchivedItem/dateLimit`` (what an archive's reader
    /// takes as a date), or an item's seconds not a duration. Nil when all hold.
    var timeProblem: String? {
        let dates: [(String, Double?)] = [("date_created", dateCreated), ("missing_since", missingSince)]
        for case (let column, let value?) in dates
        where !(abs(value - Date.timeIntervalBetween1970AndReferenceDate) < ArchivedItem.dateLimit) {
            return "\(column) \(value) is not a date"
        }
        guard seconds >= 0, seconds < 1e9 else { return "seconds \(seconds) is not a duration" }
        return nil
    }

    /// The hash of what an item archives besides its photo (``ItemList/fieldsHash(at:)``).
    public static func fieldsHash(_ item: ManifestItem) -> UInt64 { ItemList.fieldsHash(of: item) }
}

/// An item whose photo another item has too.
public struct DuplicateItem: Sendable, Codable, Equatable {
    public var itemKey: String
    public var itemName: String

    /// Groups of names that share one content, for one terminal line: at most
    /// `groups` groups of at most `names` names each, each longer group with
    /// its count ("a = b = c = d (+26 more)"), "…" when groups are left out. A
    /// collection of copies stays one readable line.
    public static func line(_ groups: [[String]], groups limit: Int = 5, names: Int = 4) -> String {
        let shown = groups.prefix(limit).map { group in
            group.prefix(names).joined(separator: " = ")
                + (group.count > names ? " (+\(group.count - names) more)" : "")
        }
        return shown.joined(separator: "; ") + (groups.count > limit ? "; …" : "")
    }
}

/// What the state's one sequential scan gives of a recorded item: just enough
/// to classify it (its full record is read only where the plan needs it).
public struct RecordedKey: Sendable {
    public var itemKey: String
    /// Whether the item had a photo.
    public var hadSource: Bool
    /// Its recorded ``ItemRecord/fieldsHash``, 0 when none is recorded.
    public var fieldsHash: UInt64
}

/// A file's size and modification time, as the fast path compares them, and
/// its identity (inode and change time), which tells a file replaced by another
/// of the same size and time from the one recorded.
struct FileStamp: Equatable, Codable, Sendable {
    var size: Int64
    var modified: Int64
    /// The inode, 0 when not known (a record from before schema 4).
    var inode: UInt64 = 0
    /// The inode's change time in nanoseconds, 0 when not known.
    var changed: Int64 = 0

    init(size: Int64, modified: Int64, inode: UInt64 = 0, changed: Int64 = 0) {
        self.size = size
        self.modified = modified
        self.inode = inode
        self.changed = changed
    }

    init?(path: String) {
        guard let info = FileInfo(path: path), info.kind == .regular else { return nil }
        self.init(info)
    }

    /// The stamp of a file already stat'ed.
    init(_ info: FileInfo) {
        size = info.size
        modified = info.modified
        inode = info.inode
        changed = info.changed
    }

    /// Whether `other` is another file than this one's, or this one changed since
    /// (another inode or change time), where both are known.
    func identityDiffers(from other: FileStamp) -> Bool {
        inode != 0 && other.inode != 0 && (inode != other.inode || changed != other.changed)
    }
}
