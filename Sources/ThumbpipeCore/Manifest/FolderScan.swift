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
        /// Regular files skipped because their content is not an image.
        public var skipped: Int
    }

    /// Scans `folders` (and their sub-folders when `recursive`); hidden files and
    /// folders are skipped, and with `extensions` only files with one of them
    /// (compared case-insensitively) are considered.
    /// - Throws: ``ThumbpipeError`` (66) when a folder cannot be read.
    public static func scan(_ folders: [String], recursive: Bool, extensions: Set<String>? = nil) throws -> Result {
        var entries: [Entry] = []
        var skipped = 0
        let lowered = extensions.map {
            Set($0.map { $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: ".")) })
        }
        for folder in folders {
            let root = absolute(folder)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ThumbpipeError(.noInput, "\(folder): not a folder")
            }
            let prefix = folders.count > 1 ? URL(fileURLWithPath: root).lastPathComponent + "/" : ""
            var pending = [""]
            while let relative = pending.popLast() {
                let directory = relative.isEmpty ? root : root + "/" + relative
                let names: [String]
                do {
                    names = try FileManager.default.contentsOfDirectory(atPath: directory)
                } catch {
                    throw ThumbpipeError(
                        .noInput, "\(directory): cannot read folder: \(ThumbpipeError.describe(error))")
                }
                for name in names where !name.hasPrefix(".") {
                    let path = directory + "/" + name
                    let childRelative = relative.isEmpty ? name : relative + "/" + name
                    guard let info = FileInfo(path: path, followingLinks: false) else { continue }
                    if info.kind == .directory {
                        if recursive { pending.append(childRelative) }
                        continue
                    }
                    // A symlink counts when it points at a regular file; folders behind links are not followed.
                    if info.kind == .symlink {
                        guard FileInfo(path: path)?.kind == .regular else { continue }
                    } else if info.kind != .regular {
                        continue
                    }
                    if let lowered {
                        let ext = URL(fileURLWithPath: name).pathExtension.lowercased()
                        guard lowered.contains(ext) else { continue }
                    }
                    if ImageFormat.sniff(Decode.head(path)) == nil {
                        skipped += 1
                        continue
                    }
                    entries.append(Entry(relativePath: prefix + childRelative, path: path))
                }
            }
        }
        entries.sort { Array($0.relativePath.utf8).lexicographicallyPrecedes(Array($1.relativePath.utf8)) }
        return Result(entries: entries, skipped: skipped)
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

    /// The manifest `run DIR` runs: the same items, keys and fields as `scan DIR` then `run`.
    public static func manifest(_ result: Result, name: String) -> Manifest {
        let items = result.entries.enumerated().map { index, entry in
            ManifestItem(
                line: index + 1, itemName: entry.itemName, itemKey: entry.itemKey, image: entry.relativePath,
                imagePath: entry.path)
        }
        return Manifest(path: name, items: items, warnings: [], modificationDate: Date())
    }

    /// `path` made absolute against the current directory, without `.` or `..`.
    static func absolute(_ path: String) -> String {
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path)
            : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
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
