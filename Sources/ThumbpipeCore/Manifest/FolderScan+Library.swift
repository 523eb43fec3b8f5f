import Foundation

/// What a photo library's export says beyond its files, read from names alone
/// (never a byte of a sidecar): an Apple export's edit and its original are one
/// item; a Live Photo's video and an `.AAE` beside a still are its companions;
/// byte-identical copies are one item; items that share a name across folders
/// are said once.
extension FolderScan {
    /// One item made of several files: the photo kept and the ones folded into it.
    public struct Folded: Sendable, Equatable, Codable {
        /// The relative path of the photo the item is made from.
        public var kept: String
        /// The relative paths of the files it stands for too.
        public var others: [String]
        /// Why: `edit of`, `copy of`.
        public var reason: String
    }

    /// An Apple export's edit (`IMG_E0001.JPG`) of an original in the same folder
    /// (`IMG_0001.HEIC`): the original's name without the `E`, or nil.
    static func originalName(ofEdit name: String) -> String? {
        let stem = URL(fileURLWithPath: name).deletingPathExtension().lastPathComponent
        guard let underscore = stem.lastIndex(of: "_") else { return nil }
        let tail = stem[stem.index(after: underscore)...]
        guard tail.count >= 2, tail.first == "E", tail.dropFirst().allSatisfy(\.isASCII),
            tail.dropFirst().allSatisfy(\.isNumber)
        else { return nil }
        return String(stem[...underscore]) + tail.dropFirst()
    }

    /// The folder of a relative path ("" at the top).
    static func folder(of relative: String) -> String {
        guard let slash = relative.lastIndex(of: "/") else { return "" }
        return String(relative[..<slash])
    }

    /// The stem of a relative path: its folder and name without the extension, lower-cased.
    static func stemKey(_ relative: String) -> String {
        (folder(of: relative) + "/" + URL(fileURLWithPath: relative).deletingPathExtension().lastPathComponent)
            .lowercased()
    }

    /// Folds an Apple export's edits into their originals: the item keeps the
    /// original's key and name, and its photo is the edit.
    static func foldingEdits(_ result: inout Result) {
        var byStem: [String: Int] = [:]
        for (index, entry) in result.entries.enumerated() { byStem[stemKey(entry.relativePath)] = index }
        var drop = Set<Int>()
        for (index, edit) in result.entries.enumerated() {
            let name = URL(fileURLWithPath: edit.relativePath).lastPathComponent
            guard let original = originalName(ofEdit: name) else { continue }
            let folder = folder(of: edit.relativePath)
            guard let at = byStem[(folder + "/" + original).lowercased()], at != index, !drop.contains(at) else {
                continue
            }
            let originalPath = result.entries[at].relativePath
            result.entries[at].path = edit.path
            result.entries[at].size = edit.size
            result.folded.append(Folded(kept: originalPath, others: [edit.relativePath], reason: "edit of"))
            drop.insert(index)
        }
        result.entries = result.entries.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
    }

    /// Byte-identical photos (same size, then the same content hash) are one item:
    /// the first by path is kept, the others are listed.
    static func foldingCopies(_ result: inout Result) {
        var drop = Set<String>()
        for group in duplicates(result.entries) {
            let sorted = group.sorted { $0.relativePath < $1.relativePath }
            result.folded.append(
                Folded(kept: sorted[0].relativePath, others: sorted.dropFirst().map(\.relativePath), reason: "copy of"))
            drop.formUnion(sorted.dropFirst().map(\.relativePath))
        }
        if !drop.isEmpty { result.entries.removeAll { drop.contains($0.relativePath) } }
    }

    /// Names a still's companions among the skipped files: a Live Photo's video
    /// (`IMG_0001.MOV` beside `IMG_0001.HEIC`) and an Apple edit's instructions
    /// (`IMG_0001.AAE`, `IMG_O0001.AAE`), as paired rather than merely skipped.
    static func pairingCompanions(_ result: inout Result) {
        let stills = Set(result.entries.map { stemKey($0.relativePath) })
        // The names each photo's sidecars may have (Sidecars), by folder.
        var sidecars = Set<String>()
        for entry in result.entries {
            let name = URL(fileURLWithPath: entry.relativePath).lastPathComponent
            let folder = folder(of: entry.relativePath)
            for candidate in Sidecars.takeoutNames(for: name) + Sidecars.xmpNames(for: name) {
                sidecars.insert((folder + "/" + candidate).lowercased())
            }
        }
        var kinds = result.skippedKinds
        for (index, file) in result.skippedFiles.enumerated() {
            let ext = URL(fileURLWithPath: file.path).pathExtension.lowercased()
            let sidecarKey = (folder(of: file.path) + "/" + URL(fileURLWithPath: file.path).lastPathComponent)
                .lowercased()
            if sidecars.contains(sidecarKey) {
                relabel(&kinds, &result.skippedFiles[index], as: "sidecar read for its photo's date")
                continue
            }
            var stem = stemKey(file.path)
            if ext == "aae", let slash = stem.lastIndex(of: "/"),
                stem[stem.index(after: slash)...].hasPrefix("img_o")
            {
                stem.remove(at: stem.index(slash, offsetBy: 5))
            }
            guard stills.contains(stem) else { continue }
            let kind =
                ext == "aae"
                ? "Apple edit instructions (.AAE) paired with a still"
                : (ext == "mov" || ext == "mp4") ? "Live Photo video paired with its still" : nil
            guard let kind else { continue }
            relabel(&kinds, &result.skippedFiles[index], as: kind)
        }
        result.skippedKinds = kinds
    }

    /// A skipped file counted under `kind` instead of what it was first taken for.
    private static func relabel(
        _ kinds: inout [String: Int], _ file: inout (path: String, kind: String), as kind: String
    ) {
        kinds[file.kind, default: 0] -= 1
        if kinds[file.kind] == 0 { kinds[file.kind] = nil }
        kinds[kind, default: 0] += 1
        file.kind = kind
    }

    /// What the user should hear of the library's structure, one line each: the
    /// edits and copies folded into one item, and the names shared across folders.
    public static func libraryNotes(_ result: Result) -> [String] {
        var lines: [String] = []
        let edits = result.folded.filter { $0.reason == "edit of" }
        if !edits.isEmpty {
            lines.append(
                "\(counted(edits.count, "edited photo")) (Apple's IMG_E…) made one item with its original, the edit as its photo: "
                    + DuplicateItem.line(edits.map { [$0.others[0], $0.kept] }))
        }
        let copies = result.folded.filter { $0.reason == "copy of" }
        if !copies.isEmpty {
            let count = copies.reduce(0) { $0 + $1.others.count }
            lines.append(
                "\(counted(count, "file")) byte-identical to another made no item of \(count == 1 ? "its" : "their") own: "
                    + DuplicateItem.line(copies.map { [$0.kept] + $0.others }))
        }
        let shared = sharedNames(result.entries)
        if !shared.isEmpty {
            lines.append(
                "\(counted(shared.count, "name")) shared by items in different folders (set itemName in a manifest to tell them apart): "
                    + shared.prefix(5).map { "\($0.name) (\($0.folders.prefix(4).joined(separator: ", ")))" }.joined(
                        separator: "; ") + (shared.count > 5 ? "; …" : ""))
        }
        return lines
    }

    /// Items that share a name in different folders: each name once, with its folders.
    public static func sharedNames(_ entries: [Entry]) -> [(name: String, folders: [String])] {
        let byName = Dictionary(grouping: entries, by: \.itemName)
        return byName.compactMap { name, group in
            let folders = Set(group.map { folder(of: $0.relativePath) })
            return folders.count > 1 ? (name, folders.map { $0.isEmpty ? "." : $0 }.sorted()) : nil
        }.sorted { $0.name < $1.name }
    }
}
