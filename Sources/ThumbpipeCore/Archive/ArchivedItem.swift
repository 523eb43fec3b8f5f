import Foundation

/// One item as `items.archive` holds it: the fields `BNRItem`'s `encodeWithCoder:` writes.
public struct ArchivedItem: Sendable, Equatable {
    /// `itemName` (NSString).
    public var itemName: String
    /// `serialNumber` (NSString).
    public var serialNumber: String
    /// `valueInDollars` (encodeInt).
    public var valueInDollars: Int32
    /// `dateCreated` (NSDate).
    public var dateCreated: Date
    /// The dates an archive may hold, in seconds either side of 2001 (NSDate's
    /// reference): ±10,000 years is more than any photo needs.
    public static let dateLimit: TimeInterval = 316_000_000_000
    /// `itemKey` (NSString).
    public var itemKey: String
    /// `thumbnailData` (NSData): the PNG thumbnail; nil when the item's image failed or it has none.
    public var thumbnailData: Data?
    /// Whether the item carried a first-edition `UIImage` thumbnail (under
    /// `thumbnail`), which thumbpipe does not decode: it is regenerated.
    public var hasLegacyThumbnail = false

    /// Creates an item.
    public init(
        itemName: String, serialNumber: String, valueInDollars: Int32, dateCreated: Date, itemKey: String,
        thumbnailData: Data?
    ) {
        self.itemName = itemName
        self.serialNumber = serialNumber
        self.valueInDollars = valueInDollars
        self.dateCreated = dateCreated
        self.itemKey = itemKey
        self.thumbnailData = thumbnailData
    }
}

/// The names NSKeyedArchiver's layout uses.
enum KeyedArchiveKeys {
    static let archiver = "$archiver"
    static let objects = "$objects"
    static let top = "$top"
    static let version = "$version"
    static let root = "root"
    static let null = "$null"
    static let classRef = "$class"
    static let classes = "$classes"
    static let className = "$classname"
    static let arrayObjects = "NS.objects"
    static let time = "NS.time"
    static let archiverName = "NSKeyedArchiver"
    static let versionNumber: Int64 = 100_000

    static let itemName = "itemName"
    static let serialNumber = "serialNumber"
    static let valueInDollars = "valueInDollars"
    static let dateCreated = "dateCreated"
    static let itemKey = "itemKey"
    static let thumbnailData = "thumbnailData"
    /// The first edition's UIImage thumbnail.
    static let legacyThumbnail = "thumbnail"
    static let nsString = "NS.string"
    static let nsData = "NS.data"
}
