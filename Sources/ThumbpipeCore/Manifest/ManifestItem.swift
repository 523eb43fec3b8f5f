import Foundation

/// One item of a manifest: the fields Homepwner's `BNRItem` archives, plus where its photo is.
public struct ManifestItem: Sendable, Equatable {
    /// The manifest line the item starts on (from 1; the header is line 1 of a CSV).
    public var line: Int
    /// The item's name (required).
    public var itemName: String
    /// Its serial number, `""` by default.
    public var serialNumber: String
    /// Its value in whole dollars, `0` by default.
    public var valueInDollars: Int32
    /// When it was created; nil means "from the photo's EXIF, else the file's mtime".
    public var dateCreated: Date?
    /// Its key, which names its store file.
    public var itemKey: String
    /// The image path as written in the manifest, if any.
    public var image: String?
    /// The image path resolved against the manifest's folder.
    public var imagePath: String?
    /// Whether the name is the photo's file name, not one a manifest gave (folder
    /// mode): the photo's own title, when it has one, is archived instead.
    public var nameFromFile = false
    /// For an item migrated from an existing archive (`run OLD/items.archive`):
    /// what it carries over instead of making it.
    public var carried: Carried?

    /// What a migrated item brings from its old folder.
    public enum Carried: Sendable, Equatable {
        /// Its store file, carried over byte for byte (the image is that file).
        case storeFile
        /// No store file: its archived thumbnail, kept untouched.
        case thumbnail(Data)
    }

    /// Creates an item.
    public init(
        line: Int, itemName: String, serialNumber: String = "", valueInDollars: Int32 = 0,
        dateCreated: Date? = nil, itemKey: String, image: String? = nil, imagePath: String? = nil
    ) {
        self.line = line
        self.itemName = itemName
        self.serialNumber = serialNumber
        self.valueInDollars = valueInDollars
        self.dateCreated = dateCreated
        self.itemKey = itemKey
        self.image = image
        self.imagePath = imagePath
    }

    /// Whether `key` can name a file in the output folder: `[A-Za-z0-9][A-Za-z0-9._-]{0,254}`.
    public static func isSafeKey(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        func alnum(_ c: UInt8) -> Bool {
            (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
        }
        guard alnum(bytes[0]) else { return false }
        return bytes.dropFirst().allSatisfy { alnum($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }
    }

    /// The default key: the upper-case name-based UUID (v5) of the image path as
    /// written and the item name, so re-runs keep their keys.
    public static func defaultKey(image: String?, itemName: String) -> String {
        NameBasedUUID.make((image ?? "") + "\u{0}" + itemName)
    }
}
