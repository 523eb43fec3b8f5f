import Foundation

/// Finds the images in folders and makes a manifest of them, for users who have
/// a folder of photos and no manifest (`thumbpipe scan`, `thumbpipe run DIR`).
///
/// Images are told from other files by their content (their first bytes), not
/// by their names. Each item's key is derived from the file's path relative to
/// the folder it was found in, so a re-scan, a manifest saved elsewhere and
/// `run DIR` all keep the same keys (and so the same store files).
public enum FolderScan {
    /// One image found.
    public struct Entry: Sendable, Equatable {
        /// The path relative to the scanned folder (prefixed with the folder's
        /// name when several folders were scanned).
        public var relativePath: String
        /// The absolute path.
        public var path: String
        /// The file's size in bytes, as the scan saw it (the link's target for a symlink).
        public var size: Int64

        /// The item name: the file name without its extension.
        public var itemName: String {
            let name = URL(fileURLWithPath: relativePath).lastPathComponent
            guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
            return String(name[..<dot])
        }

        /// The item key, from the relative path.
        public var itemKey: String { NameBasedUUID.make("scan\u{0}" + relativePath) }
    }

    /// What a scan found.
    public struct Result: Sendable {
        /// The images, sorted by relative path.
        public var entries: [Entry]
        /// Regular files skipped, by what they are: `MP4 video`, `PDF not in --formats`…
        public var skippedKinds: [String: Int] = [:]
        /// Files skipped because their names are not valid UTF-8, escaped (`caf\xe9.jpg`).
        public var badNames: [String] = []
        /// The first ``listedLimit`` skipped files, by relative path, each with what it is.
        public var skippedFiles: [(path: String, kind: String)] = []
        /// Hidden files and folders (names starting with a dot), not looked into.
        public var hidden = 0
        /// Folders behind symlinks, not followed.
        public var symlinkedFolders = 0
        /// Sub-folders left out for want of `-r`.
        public var subfolders = 0
        /// Sub-folders that could not be read, each with why (`2021/Trip: Permission
        /// denied`): their photos are not listed, and items recorded from them are kept.
        public var unreadableFolders: [String] = []
        /// Folders behind symlinks that were followed (with `-r`).
        public var followedLinks = 0
        /// Empty (0-byte) files of an image's name or none: not listed as photos, but an
        /// item recorded from one is kept, as a photo being rewritten is (``keepingVanishedFolders(_:root:state:pruneMissing:)``).
        public var emptyFiles: [Entry] = []
        /// Files listed although they cannot be read (their item fails and says why).
        public var unreadableFiles = 0
        /// Files folded into another's item: an Apple export's edit into its original,
        /// a byte-identical copy into the first of its copies.
        public var folded: [Folded] = []

        /// How many skipped files are named one by one (the rest counted).
        public static let listedLimit = 200

        mutating func skip(_ path: String, _ kind: String) {
            skippedKinds[kind, default: 0] += 1
            if skippedFiles.count < Self.listedLimit { skippedFiles.append((path, kind)) }
        }

        /// How many files were skipped.
        public var skipped: Int { skippedKinds.values.reduce(0, +) + badNames.count }

        /// `3 files skipped: 1 MP4 video, 1 PDF not in --formats, 1 name not UTF-8`, or nil.
        public var skippedSummary: String? {
            guard skipped > 0 else { return nil }
            var kinds = skippedKinds.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
                .map { FolderScan.counted($0.value, $0.key) }
            if !badNames.isEmpty {
                kinds.append(
                    "\(badNames.count) with a name that is not UTF-8 (\(badNames.prefix(5).joined(separator: ", ")))")
            }
            return "\(skipped) file\(skipped == 1 ? "" : "s") skipped: " + kinds.joined(separator: ", ")
        }
    }

    /// Scans `folders` (and their sub-folders when `recursive`) for files whose
    /// signature is a format of `formats` (the worker's own check); hidden files
    /// and folders are skipped, and with `extensions` only files with one of them
    /// (compared case-insensitively) are considered. With `recursive`, a folder
    /// behind a symlink is followed once (a link back into the tree, or to a folder
    /// already scanned, is counted, not followed); a sub-folder that cannot be read
    /// is named in the result and the scan goes on.
    /// - Throws: ``ThumbpipeError`` (66) when a folder given cannot be read.
    public static func scan(
        _ folders: [String], recursive: Bool, extensions: Set<String>? = nil,
        formats: ImageFormats = ImageFormats(ImageFormat.photoFormats)
    ) throws -> Result {
        var walk = FolderWalk(
            recursive: recursive, formats: formats,
            extensions: extensions.map {
                Set($0.map { $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: ".")) })
            })
        for folder in folders {
            let root = absolute(folder)
            guard FileSystem.isFolder(root) else {
                throw ThumbpipeError(.noInput, "\(folder): not a folder")
            }
            guard FileSystem.names(in: root) != nil else {
                throw ThumbpipeError(.noInput, "\(folder): cannot read folder: \(Errno.current)")
            }
            try walk.walk(
                root: root, prefix: folders.count > 1 ? URL(fileURLWithPath: root).lastPathComponent + "/" : "")
        }
        var result = walk.result
        result.entries.sort { Array($0.relativePath.utf8).lexicographicallyPrecedes(Array($1.relativePath.utf8)) }
        result.badNames.sort()
        result.unreadableFolders.sort()
        pairingCompanions(&result)
        foldingEdits(&result)
        foldingCopies(&result)
        return result
    }

    /// Refuses a folder `run DIR` cannot mean (64 or 66, with what to type instead):
    /// an output folder (`did you mean: run DIR/items.archive`); an output `-o`
    /// inside the scanned tree (its store files would be scanned as photos next
    /// night); a folder with no images (66, not a plan that removes everything),
    /// or with images only in sub-folders without `-r` (66, with the hint).
    public static func checkRunInput(
        _ folder: String, result: Result, recursive: Bool, output: String, archiveFileName: String,
        formats: ImageFormats
    ) throws {
        let root = absolute(folder)
        let asOutput = OutputFolder(root).layout
        if FileSystem.exists(asOutput.archive(archiveFileName)) || FileSystem.exists(asOutput.meta) {
            throw ThumbpipeError(
                .usage,
                "\(folder) is a thumbpipe output folder, not a folder of photos; did you mean: thumbpipe run \(folder.hasSuffix("/") ? folder : folder + "/")\(archiveFileName)"
            )
        }
        let out = absolute(output)
        let resolvedOut = OutputGuard.realPath(out) ?? out
        let resolvedRoot = OutputGuard.realPath(root) ?? root
        if resolvedOut == resolvedRoot || (recursive && resolvedOut.hasPrefix(resolvedRoot + "/")) {
            throw ThumbpipeError(
                .usage,
                "-o \(output) is inside the scanned folder \(folder)\(recursive ? " (with -r)" : ""): its store files would be taken for photos on the next run; choose an output folder outside it"
            )
        }
        guard result.entries.isEmpty else { return }
        if !recursive, let deeper = try? scan([folder], recursive: true, formats: formats), !deeper.entries.isEmpty {
            throw ThumbpipeError(
                .noInput, "no images directly in \(folder); \(deeper.entries.count) in sub-folders: add -r")
        }
        throw ThumbpipeError(
            .noInput,
            "\(folder) has no images\(result.skippedSummary.map { " (\($0))" } ?? ""); nothing to run")
    }

    /// The entries that are byte-identical to another, in groups: sizes first
    /// (as the scan saw them), then the content hash of only the files that share a size.
    public static func duplicates(_ entries: [Entry]) -> [[Entry]] {
        let bySize = Dictionary(grouping: entries, by: \.size)
        var groups: [[Entry]] = []
        for (_, same) in bySize where same.count > 1 {
            var byHash: [String: [Entry]] = [:]
            for entry in same {
                if let hash = ContentHash.file(entry.path) { byHash[hash, default: []].append(entry) }
            }
            groups += byHash.values.filter { $0.count > 1 }
        }
        return groups.sorted { $0[0].relativePath < $1[0].relativePath }
    }

    /// The manifest lines (JSONL) of `entries`, with `image` relative to `base`:
    /// each named by its photo's title when `metadata` (one per entry) has one,
    /// else by its file name, with its description when it has one.
    public static func jsonLines(
        _ entries: [Entry], relativeTo base: String, metadata: [ScanMetadata.Read]? = nil
    ) -> String {
        let folder = absolute(base)
        var text = ""
        for (index, entry) in entries.enumerated() {
            let album = Self.folder(of: entry.relativePath)
            let read = metadata.flatMap { index < $0.count ? $0[index] : nil }
            text +=
                "{\"itemName\": \(JSONText.quote(read?.title ?? entry.itemName)), \"image\": \(JSONText.quote(relativePath(from: folder, to: entry.path))), \"itemKey\": \"\(entry.itemKey)\""
                + (album.isEmpty ? "" : ", \"folder\": \(JSONText.quote(album))")
                + (read?.description.map { ", \"description\": \(JSONText.quote($0))" } ?? "")
                + (read?.place.map { ", \"latitude\": \($0.latitude), \"longitude\": \($0.longitude)" } ?? "") + "}\n"
        }
        return text
    }

    /// The scan of `root` with the previous night's items it no longer finds but
    /// must not lose: those whose folder is gone or unreadable (an unmounted share,
    /// a sub-folder moved away), so they are `kept (source missing)` as in manifest
    /// mode and back unchanged when the folder is; and those whose photo is empty
    /// tonight (being rewritten), kept by the ledger. Not added back: a file deleted
    /// from a folder that is still there (removed), a photo found again by content
    /// under a new path (a renamed folder: the plan's `moved`), and, with
    /// `--prune-missing`, any missing one (removed). Each comes back under its
    /// recorded path, with the key and name the scan gave it.
    /// - Returns: the scan with those entries, sorted as a scan sorts, and how many were added.
    public static func keepingVanishedFolders(
        _ result: Result, root: String, state: RunState?, pruneMissing: Bool = false
    ) throws -> (Result, added: Int) {
        guard let state else { return (result, 0) }
        let base = absolute(root)
        let present = Set(result.entries.map(\.itemKey))
        var recorded = Set<String>()
        var missing: [String] = []
        try state.forEachKey { key in
            recorded.insert(key.itemKey)
            if key.hadSource && !present.contains(key.itemKey) { missing.append(key.itemKey) }
        }
        let empty = Dictionary(result.emptyFiles.map { ($0.itemKey, $0) }, uniquingKeysWith: { a, _ in a })
        var arrivals = Arrivals(result.entries.filter { !recorded.contains($0.itemKey) })
        var result = result
        var added = 0
        for key in missing {
            guard let record = try state.record(forKey: key) else { continue }
            if let entry = empty[key] {
                result.entries.append(entry)
                added += 1
                continue
            }
            guard !pruneMissing, record.sourcePath.hasPrefix(base + "/") else { continue }
            let folder = URL(fileURLWithPath: record.sourcePath).deletingLastPathComponent().path
            // The folder is there and readable: the file itself was deleted, and the item goes.
            if FileSystem.allows(folder, R_OK | X_OK) { continue }
            if arrivals.takes(record) { continue }
            let entry = Entry(
                relativePath: relativePath(from: base, to: record.sourcePath), path: record.sourcePath,
                size: record.sourceSize)
            guard entry.itemKey == key else { continue }
            result.entries.append(entry)
            added += 1
        }
        if added > 0 { result.entries.sort { $0.relativePath < $1.relativePath } }
        return (result, added)
    }

    /// The photos a scan found that no record has: where a vanished item's photo may
    /// have gone (a renamed folder), told by size, then by content, each taken once.
    struct Arrivals {
        private var bySize: [Int64: [Entry]]
        private var hashes: [String: String] = [:]

        init(_ entries: [Entry]) { bySize = Dictionary(grouping: entries, by: \.size) }

        /// Whether a new photo has `record`'s content (the photo moved): it is taken.
        mutating func takes(_ record: ItemRecord) -> Bool {
            guard !record.sourceHash.isEmpty, record.failure == nil, var candidates = bySize[record.sourceSize]
            else { return false }
            for (index, entry) in candidates.enumerated() {
                let hash = hashes[entry.path] ?? ContentHash.file(entry.path)
                hashes[entry.path] = hash
                if hash == record.sourceHash {
                    candidates.remove(at: index)
                    bySize[record.sourceSize] = candidates
                    return true
                }
            }
            return false
        }
    }

    /// The photos a manifest made by `scan` has ever named, kept beside it
    /// (`items.jsonl.seen`, one JSON string a line, paths as the manifest writes them):
    /// what `scan --update` leaves out, so a line the user deleted stays deleted.
    public enum Seen {
        /// The file beside `manifest`.
        public static func path(for manifest: String) -> String { manifest + ".seen" }

        /// The paths recorded for `manifest` (empty when it has no such file).
        public static func read(for manifest: String) -> Set<String> {
            guard let data = FileDescriptor.contents(ofRegularFile: path(for: manifest), limit: 1 << 30) else {
                return []
            }
            var seen = Set<String>()
            for line in data.split(separator: UInt8(ascii: "\n")) {
                if case .string(let text)? = try? JSONParser.parse(Array(line)) { seen.insert(text) }
            }
            return seen
        }

        /// Records `paths` for `manifest` (atomically).
        public static func write(_ paths: Set<String>, for manifest: String) throws {
            let text = paths.sorted().map { JSONText.quote($0) + "\n" }.joined()
            try TemporaryFile.write(Data(text.utf8), to: path(for: manifest))
        }

        /// A scan's entries as `manifest` names them (relative to its folder).
        public static func names(_ entries: [Entry], manifest: String) -> [String] {
            let folder = absolute(URL(fileURLWithPath: manifest).deletingLastPathComponent().path)
            return entries.map { relativePath(from: folder, to: $0.path) }
        }
    }

    /// The manifest `run DIR` runs: the same items, keys and fields as `scan DIR` then `run`.
    public static func manifest(_ result: Result, name: String) -> Manifest {
        let items = result.entries.enumerated().map { index, entry in
            var item = ManifestItem(
                line: index + 1, itemName: entry.itemName, itemKey: entry.itemKey, image: entry.relativePath,
                imagePath: entry.path)
            item.nameFromFile = true
            return item
        }
        var manifest = Manifest(path: name, items: items, warnings: [], modificationDate: Date())
        manifest.folder = absolute(name)
        return manifest
    }

    /// `path` made absolute against the current directory, without `.` or `..`.
    public static func absolute(_ path: String) -> String {
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path)
            : URL(fileURLWithPath: FileSystem.currentFolder).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// The relative path from folder `base` to `path` (both absolute).
    static func relativePath(from base: String, to path: String) -> String {
        let from = base.split(separator: "/")
        let to = path.split(separator: "/")
        var common = 0
        while common < from.count && common < to.count && from[common] == to[common] { common += 1 }
        let ups = Array(repeating: "..", count: from.count - common)
        let parts = ups + to[common...].map(String.init)
        return parts.isEmpty ? "." : parts.joined(separator: "/")
    }
}

/// JSON string literals for the text thumbpipe writes.
enum JSONText {
    /// `text` as a JSON string literal.
    static func quote(_ text: String) -> String { "\"" + escape(text) + "\"" }

    /// `text` escaped for the inside of a JSON string literal.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
