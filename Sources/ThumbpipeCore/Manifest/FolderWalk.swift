import Foundation

/// One walk of ``FolderScan/scan(_:recursive:extensions:formats:)`` over its
/// folders: what each name is (a photo, a folder to enter, a file to name as
/// skipped), decided one name at a time, into one ``FolderScan/Result``.
///
/// Nothing is left out unsaid: a folder that cannot be read, a link that loops,
/// a pipe or a device are each named or counted in the result.
struct FolderWalk {
    let recursive: Bool
    let formats: ImageFormats
    /// Lower-case extensions without the dot, when `--ext` narrows the scan.
    let extensions: Set<String>?
    var result = FolderScan.Result(entries: [])
    /// The folders entered, by device and inode: a symlink to one of them is a
    /// loop or a second way to the same photos, and is not followed.
    private var entered: Set<[UInt64]> = []

    init(recursive: Bool, formats: ImageFormats, extensions: Set<String>?) {
        self.recursive = recursive
        self.formats = formats
        self.extensions = extensions
    }

    /// Walks `root`, its entries' relative paths starting with `prefix`.
    mutating func walk(root: String, prefix: String) throws {
        if let info = FileInfo(path: root) { entered.insert([info.device, info.inode]) }
        // Real sub-folders are entered before any symlink to a folder, so a link to a
        // folder of the tree is seen as one (whichever name sorts first).
        var pending: [String] = [""]
        var linked: [(relative: String, identity: [UInt64])] = []
        while true {
            if let relative = pending.popLast() {
                list(root: root, relative: relative, prefix: prefix, pending: &pending, linked: &linked)
            } else if !linked.isEmpty {
                let link = linked.removeFirst()
                if entered.insert(link.identity).inserted {
                    result.followedLinks += 1
                    pending.append(link.relative)
                } else {
                    result.symlinkedFolders += 1
                }
            } else {
                return
            }
        }
    }

    /// Lists one folder: its photos into the result, its sub-folders into `pending`
    /// (marked entered), its links to folders into `linked`.
    private mutating func list(
        root: String, relative: String, prefix: String, pending: inout [String],
        linked: inout [(relative: String, identity: [UInt64])]
    ) {
        let directory = relative.isEmpty ? root : root + "/" + relative
        guard let listed = FileSystem.names(in: directory) else {
            result.unreadableFolders.append("\(prefix)\(relative): \(Errno.current)")
            return
        }
        var folders: [String] = []
        for name in names(listed, relative: relative, prefix: prefix).sorted() {
            let childRelative = relative.isEmpty ? name : relative + "/" + name
            let path = directory + "/" + name
            guard let info = FileInfo(path: path, followingLinks: false) else { continue }
            switch info.kind {
            case .directory:
                guard recursive else {
                    result.subfolders += 1
                    continue
                }
                if entered.insert([info.device, info.inode]).inserted { folders.append(childRelative) }
            case .symlink:
                followSymlink(path: path, relative: childRelative, prefix: prefix, linked: &linked)
            case .regular:
                file(path: path, relative: childRelative, prefix: prefix, info: info)
            case .other:
                result.skip(prefix + childRelative, Self.special(info))
            }
        }
        // Popped from the end: reversed, so folders are walked in name order.
        pending.append(contentsOf: folders.reversed())
    }

    /// The names that are text; the others are named in the result, escaped.
    private mutating func names(_ listed: [(text: String?, bytes: [UInt8])], relative: String, prefix: String)
        -> [String]
    {
        var names: [String] = []
        for entry in listed {
            if entry.bytes.first == 0x2E {
                result.hidden += 1
            } else if let text = entry.text {
                names.append(text)
            } else {
                // Not valid UTF-8 (an old zip's Latin-1): no path to hand on, but never dropped unsaid.
                let shown = (relative.isEmpty ? "" : relative + "/") + FileInfo.escaped(entry.bytes)
                result.badNames.append(prefix + shown)
            }
        }
        return names
    }

    /// A symlink: a file it names is a photo like any; a folder is followed (with
    /// `-r`) once every real folder is listed; anything else is named.
    private mutating func followSymlink(
        path: String, relative: String, prefix: String, linked: inout [(relative: String, identity: [UInt64])]
    ) {
        guard let target = FileInfo(path: path) else {
            result.skip(prefix + relative, "symlink to nothing")
            return
        }
        switch target.kind {
        case .directory:
            if recursive {
                linked.append((relative, [target.device, target.inode]))
            } else {
                result.symlinkedFolders += 1
            }
        case .regular:
            file(path: path, relative: relative, prefix: prefix, info: target)
        default:
            result.skip(prefix + relative, Self.special(target))
        }
    }

    /// A regular file (or a link to one): a photo when its first bytes say so.
    /// An empty file is kept aside (an item recorded from it is kept, not removed);
    /// one that cannot be read is listed, so its item fails and says why.
    private mutating func file(path: String, relative: String, prefix: String, info: FileInfo) {
        if let extensions {
            let ext = URL(fileURLWithPath: relative).pathExtension.lowercased()
            guard extensions.contains(ext) else { return }
        }
        let entry = FolderScan.Entry(relativePath: prefix + relative, path: path, size: info.size)
        if info.size == 0 {
            result.emptyFiles.append(entry)
            result.skip(entry.relativePath, "empty file")
            return
        }
        let head = Decode.head(path)
        guard !head.isEmpty else {
            result.unreadableFiles += 1
            result.entries.append(entry)
            return
        }
        guard let format = ImageFormat.sniff(head) else {
            result.skip(entry.relativePath, ImageFormat.describeOther(head))
            return
        }
        guard formats.contains(format) else {
            result.skip(entry.relativePath, "\(format.displayName) not in --formats")
            return
        }
        result.entries.append(entry)
    }

    /// What a file that is neither a folder nor a regular file is, in a few words.
    static func special(_ info: FileInfo) -> String {
        switch info.special {
        case .fifo: return "named pipe (FIFO)"
        case .device: return "device file"
        case .socket: return "socket"
        case nil: return "special file"
        }
    }
}

extension FolderScan {
    /// `count` things of `kind`, in English: `1 text file`, `34 files of unknown
    /// type`, `2 MP4 videos`, `3 PDF files not in --formats`.
    public static func counted(_ count: Int, _ kind: String) -> String {
        guard count != 1 else { return "1 \(kind)" }
        if kind.hasSuffix(" not in --formats") {
            return "\(count) \(kind.dropLast(" not in --formats".count)) files not in --formats"
        }
        var words = kind.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let nouns: Set<String> = ["file", "video", "archive", "pipe", "socket", "symlink", "audio", "photo", "name"]
        if let at = words.firstIndex(where: { nouns.contains($0) }) {
            words[at] = words[at] == "audio" ? "audio files" : words[at] + "s"
            return "\(count) " + words.joined(separator: " ")
        }
        return "\(count) × \(kind)"
    }
}
