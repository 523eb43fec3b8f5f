import Foundation

/// An existing Documents folder as the input (`thumbpipe run OLD/items.archive`):
/// every archived item keeps its fields and key; its image is its store file
/// `OLD/<itemKey>`, which is carried over byte for byte while the thumbnail is
/// made again with the current settings. Items without a store file keep their
/// archived thumbnail. The archive may come from the app (Apple's
/// NSKeyedArchiver), not only from thumbpipe.
public enum ArchiveInput {
    /// What an archive brings.
    public struct Result: Sendable {
        public var manifest: Manifest
        /// Items without a store file, whose archived thumbnail is kept.
        public var keptThumbnails: Int
        /// Items from the book's first edition (a UIImage thumbnail) regenerated from their store file.
        public var legacyThumbnails: Int
    }

    /// Whether `path` looks like an items archive rather than a manifest.
    public static func isArchive(_ path: String) -> Bool {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY) else { return false }
        var head = [UInt8](repeating: 0, count: 8)
        return (try? file.read(into: &head, at: 0)) == 8 && head == Array("bplist00".utf8)
    }

    /// Reads the archive at `path` as a manifest.
    /// - Throws: ``ThumbpipeError`` (66/65) when it cannot be read or is not an items archive.
    public static func read(_ path: String) throws -> Result {
        let reader = try KeyedArchiveReader(path: path)
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var items: [ManifestItem] = []
        var kept = 0
        var legacy = 0
        var keys = Set<String>()
        for position in 0..<reader.count {
            let archived = try reader.validItem(at: position)
            guard keys.insert(archived.itemKey).inserted else {
                throw ThumbpipeError(
                    .dataError, "\(path): item \(position + 1): itemKey '\(archived.itemKey)' is used twice")
            }
            var item = ManifestItem(
                line: position + 1, itemName: archived.itemName, serialNumber: archived.serialNumber,
                valueInDollars: archived.valueInDollars, dateCreated: archived.dateCreated, itemKey: archived.itemKey)
            let store = OutputFolder(folder.isEmpty ? "." : folder).layout.store(key: archived.itemKey)
            if let info = FileInfo(path: store), info.kind == .regular, info.size > 0 {
                item.image = archived.itemKey
                item.imagePath = store
                item.carried = .storeFile
                if archived.hasLegacyThumbnail { legacy += 1 }
            } else if let png = archived.thumbnailData {
                item.carried = .thumbnail(png)
                kept += 1
            }
            items.append(item)
        }
        let mtime =
            FileInfo(path: path)?.referenceModificationDate ?? Date(timeIntervalSince1970: 0)
        return Result(
            manifest: Manifest(path: path, items: items, warnings: [], modificationDate: mtime), keptThumbnails: kept,
            legacyThumbnails: legacy)
    }
}
