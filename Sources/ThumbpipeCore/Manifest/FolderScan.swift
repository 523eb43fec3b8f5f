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
                .map { "\($0.value) \($0.key)" }
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
    /// (compared case-insensitively) are considered.
    /// - Throws: ``ThumbpipeError`` (66) when a folder cannot be read.
    public static func scan(
        _ folders: [String], recursive: Bool, extensions: Set<String>? = nil,
        formats: ImageFormats = ImageFormats(ImageFormat.photoFormats)
    ) throws -> Result {
        var entries: [Entry] = []
        var result = Result(entries: [])
        let lowered = extensions.map {
            Set($0.map { $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: ".")) })
        }
        for folder in folders {
            let root = absolute(folder)
            guard FileSystem.isFolder(root) else {
                throw ThumbpipeError(.noInput, "\(folder): not a folder")
            }
            let prefix = folders.count > 1 ? URL(fileURLWithPath: root).lastPathComponent + "/" : ""
            var pending = [""]
            while let relative = pending.popLast() {
                let directory = relative.isEmpty ? root : root + "/" + relative
                guard let listed = FileSystem.names(in: directory) else {
                    throw ThumbpipeError(.noInput, "\(directory): cannot read folder: \(Errno.current)")
                }
                var names: [String] = []
                result.hidden += listed.filter { $0.bytes.first == 0x2E }.count
                for entry in listed where entry.bytes.first != 0x2E {
                    if let text = entry.text {
                        names.append(text)
                    } else {
                        // Not valid UTF-8 (an old zip's Latin-1): no path to hand on, but never dropped unsaid.
                        let shown = (relative.isEmpty ? "" : relative + "/") + FileInfo.escaped(entry.bytes)
                        result.badNames.append(prefix + shown)
                    }
                }
                for name in names {
                    let path = directory + "/" + name
                    let childRelative = relative.isEmpty ? name : relative + "/" + name
                    guard let info = FileInfo(path: path, followingLinks: false) else { continue }
                    if info.kind == .directory {
                        if recursive { pending.append(childRelative) } else { result.subfolders += 1 }
                        continue
                    }
                    // A symlink counts when it points at a regular file; folders behind links are not followed.
                    var file = info
                    if info.kind == .symlink {
                        guard let target = FileInfo(path: path), target.kind == .regular else {
                            if FileInfo(path: path)?.kind == .directory { result.symlinkedFolders += 1 }
                            continue
                        }
                        file = target
                    } else if info.kind != .regular {
                        continue
                    }
                    if let lowered {
                        let ext = URL(fileURLWithPath: name).pathExtension.lowercased()
                        guard lowered.contains(ext) else { continue }
                    }
                    let head = Decode.head(path)
                    guard let format = ImageFormat.sniff(head) else {
                        result.skip(prefix + childRelative, ImageFormat.describeOther(head))
                        continue
                    }
                    guard formats.contains(format) else {
                        result.skip(prefix + childRelative, "\(format.displayName) not in --formats")
                        continue
                    }
                    entries.append(Entry(relativePath: prefix + childRelative, path: path, size: file.size))
                }
            }
        }
        entries.sort { Array($0.relativePath.utf8).lexicographicallyPrecedes(Array($1.relativePath.utf8)) }
        result.entries = entries
        result.badNames.sort()
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
        if FileSystem.exists(OutputFolder(root).layout.archive(archiveFileName))
            || FileSystem.exists(OutputFolder(root).layout.meta)
        {
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

    /// The manifest lines (JSONL) of `entries`, with `image` relative to `base`.
    public static func jsonLines(_ entries: [Entry], relativeTo base: String) -> String {
        let folder = absolute(base)
        var text = ""
        for entry in entries {
            text +=
                "{\"itemName\": \(JSONText.quote(entry.itemName)), \"image\": \(JSONText.quote(relativePath(from: folder, to: entry.path))), \"itemKey\": \"\(entry.itemKey)\"}\n"
        }
        return text
    }

    /// The scan of `root` with the previous night's items whose folder is gone or
    /// unreadable added back (an unmounted share, a sub-folder moved away): so they
    /// are `kept (source missing)` as in manifest mode, never removed, and are back
    /// unchanged when the folder is. Only a file deleted from a folder that is still
    /// there is removed. Each item comes back under its recorded path, with the
    /// key and name the scan gave it.
    /// - Returns: the scan with those entries, sorted as a scan sorts, and how many were added.
    public static func keepingVanishedFolders(_ result: Result, root: String, state: RunState?) throws -> (
        Result, added: Int
    ) {
        guard let state else { return (result, 0) }
        let base = absolute(root)
        let present = Set(result.entries.map(\.itemKey))
        var missing: [String] = []
        try state.forEachKey { recorded in
            if recorded.hadSource && !present.contains(recorded.itemKey) { missing.append(recorded.itemKey) }
        }
        var result = result
        var added = 0
        for key in missing {
            guard let record = try state.record(forKey: key), record.sourcePath.hasPrefix(base + "/") else { continue }
            let folder = URL(fileURLWithPath: record.sourcePath).deletingLastPathComponent().path
            // The folder is there and readable: the file itself was deleted, and the item goes.
            if FileSystem.allows(folder, R_OK | X_OK) { continue }
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
            ManifestItem(
                line: index + 1, itemName: entry.itemName, itemKey: entry.itemKey, image: entry.relativePath,
                imagePath: entry.path)
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
