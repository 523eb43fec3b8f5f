import CSystem
import Foundation

/// The path operations thumbpipe makes, each written once beside
/// ``FileDescriptor``: remove, link, rename (with or without replacing),
/// make folders, list them, resolve a path, and read a small file. Each throws
/// one ``Errno``; nothing outside `Support/` calls POSIX or Foundation's file API.
public enum FileSystem {
    /// Removes the file (not folder) at `path` (unlink).
    public static func remove(_ path: String) throws(Errno) {
        _ = try retryOnInterrupt { unlink(path) }
    }

    /// Removes the empty folder at `path` (rmdir); ENOTEMPTY when something is in it.
    public static func removeFolder(_ path: String) throws(Errno) {
        _ = try retryOnInterrupt { rmdir(path) }
    }

    /// Gives the file at `from` a second name, `to` (link); EEXIST when something is there.
    public static func link(_ from: String, to: String) throws(Errno) {
        _ = try retryOnInterrupt { Glibc.link(from, to) }
    }

    /// Renames `from` to `to`, replacing what is there (a symlink included, never
    /// followed), or, without `replacing`, only when nothing is there
    /// (renameat2's RENAME_NOREPLACE; where a file system cannot do that, a hard
    /// link and an unlink, which never replace either). EEXIST: something is at `to`.
    public static func rename(_ from: String, to: String, replacing: Bool = true) throws(Errno) {
        if replacing {
            _ = try retryOnInterrupt { Glibc.rename(from, to) }
            return
        }
        do {
            _ = try retryOnInterrupt { CSystem_rename_noreplace(from, to) }
        } catch {
            guard error == .invalid || error == .noSystemCall else { throw error }
            try link(from, to: to)
            try? remove(from)
        }
    }

    /// Makes the folder `path` with `mode`; with `intermediate`, the folders above
    /// it too, and a folder already there is no error (as `mkdir -p`).
    public static func createFolder(_ path: String, mode: mode_t = 0o755, intermediate: Bool = false) throws(Errno) {
        do {
            _ = try retryOnInterrupt { mkdir(path, mode) }
        } catch {
            guard intermediate else { throw error }
            if error == .exists {
                guard FileInfo(path: path)?.kind == .directory else { throw error }
                return
            }
            let parent = URL(fileURLWithPath: path).deletingLastPathComponent().path
            guard error == .noEntry, parent != path, parent != "/" else { throw error }
            try createFolder(parent, mode: mode, intermediate: true)
            try createFolder(path, mode: mode, intermediate: true)
        }
    }

    /// Whether something is at `path` (following links unless told not to).
    public static func exists(_ path: String, followingLinks: Bool = true) -> Bool {
        FileInfo(path: path, followingLinks: followingLinks) != nil
    }

    /// Whether `path` is a folder (following links).
    public static func isFolder(_ path: String) -> Bool { FileInfo(path: path)?.kind == .directory }

    /// Whether this process may do `mode` (R_OK, W_OK, X_OK, F_OK) on `path` (access).
    public static func allows(_ path: String, _ mode: Int32) -> Bool { access(path, mode) == 0 }

    /// Gives `path` (not following a link) to user and group `id` (lchown).
    public static func changeOwner(_ path: String, to id: UInt32) throws(Errno) {
        guard lchown(path, id, id) == 0 else { throw Errno.current }
    }

    /// Why `path` cannot be stat'ed (following links); nil when it can.
    public static func statError(_ path: String) -> Errno? {
        var info = stat()
        return stat(path, &info) == 0 ? nil : Errno.current
    }

    /// Why `path` cannot be opened for reading (as a job would open it: never
    /// blocking on a FIFO); nil when it can. The file is closed at once.
    public static func readError(_ path: String) -> Errno? {
        do {
            _ = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY)
            return nil
        } catch {
            return error
        }
    }

    /// `path` with every link and `..` resolved (realpath); nil when a part of it is missing.
    public static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// What the symbolic link at `path` points to, as written in it (readlink).
    public static func linkDestination(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The process's working folder.
    public static var currentFolder: String {
        guard let path = getcwd(nil, 0) else { return "." }
        defer { free(path) }
        return String(cString: path)
    }

    /// The names in `folder` (not `.` or `..`), each as text when it is valid
    /// UTF-8 and as its bytes always, so a name from an old Latin-1 zip is seen
    /// (and can be reported) rather than lost; nil when the folder cannot be read.
    public static func names(in folder: String) -> [(text: String?, bytes: [UInt8])]? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        return entries(of: directory)
    }

    /// The names in `folder` that are valid UTF-8, sorted; empty when it cannot be read.
    public static func textNames(in folder: String) -> [String] {
        (names(in: folder) ?? []).compactMap(\.text).sorted()
    }

    static func entries(of directory: OpaquePointer) -> [(text: String?, bytes: [UInt8])] {
        var result: [(String?, [UInt8])] = []
        while let entry = readdir(directory) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            result.append((String(validating: bytes, as: UTF8.self), bytes))
        }
        return result
    }

    /// A small file's text (a /proc file, a lock's pid), at most `limit` bytes and
    /// valid UTF-8; nil otherwise. The open does not block (a FIFO put there is not waited on).
    public static func text(of path: String, limit: Int = 1 << 20) -> String? {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY),
            let bytes = try? whole(file, limit: limit)
        else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The whole of the file at `path` (a regular file, or a pipe read to its end).
    public static func contents(of path: String, limit: Int = .max) throws(Errno) -> Data {
        try whole(FileDescriptor.open(path, O_RDONLY | O_NOCTTY), limit: limit)
    }

    /// All of `file`: a regular file read once at its size, anything else (a /proc
    /// file says size 0, a pipe has none) read to its end; EFBIG past `limit` bytes.
    private static func whole(_ file: FileDescriptor, limit: Int) throws(Errno) -> Data {
        if let info = try? file.info(), info.kind == .regular, let data = try file.contents(limit: Int64(limit)) {
            return data
        }
        return Data(try file.readToEnd(limit: limit))
    }

    /// Creates `path` with `bytes` in it, or replaces what it holds (not atomic:
    /// for markers and scratch files; outputs go through ``AtomicFile``).
    public static func write(_ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o644) throws(Errno) {
        let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        try file.write(Array(bytes))
        try file.close()
    }
}

/// What `stat`/`lstat` say of a path, as a value.
public struct FileInfo: Sendable, Equatable {
    /// What kind of file it is.
    public enum Kind: Sendable, Equatable { case regular, directory, symlink, other }
    /// What an `.other` file is.
    public enum Special: Sendable, Equatable { case fifo, device, socket }

    public var kind: Kind
    /// Size in bytes.
    public var size: Int64
    /// Modification time, nanoseconds since 1970.
    public var modified: Int64
    /// Device and inode: the file's identity (hard links share it).
    public var device: UInt64
    public var inode: UInt64
    /// How many names (hard links) the file has.
    public var links: UInt64 = 1
    /// The inode's change time (`st_ctim`), nanoseconds since 1970: moved on by
    /// every write, `chmod`, rename and replacement, and settable by no user call.
    public var changed: Int64 = 0
    /// What the file is when its kind is `.other`; nil otherwise.
    public var special: Special? = nil

    /// The file at `path`, symlinks followed (`stat`), or the link itself
    /// (`followingLinks: false`, `lstat`); nil when there is none (errno says why).
    public init?(path: String, followingLinks: Bool = true) {
        var info = stat()
        guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
        self.init(info)
    }

    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        switch info.st_mode & S_IFMT {
        case S_IFIFO: special = .fifo
        case S_IFCHR, S_IFBLK: special = .device
        case S_IFSOCK: special = .socket
        default: special = nil
        }
        size = Int64(info.st_size)
        modified = Self.nanoseconds(info.st_mtim)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        links = UInt64(info.st_nlink)
        changed = Self.nanoseconds(info.st_ctim)
    }

    /// A file time in nanoseconds since 1970. 64 bits of nanoseconds reach from
    /// 1677 to 2262; a file system can hold times past that (ext4 to 2446, btrfs
    /// far beyond), which a broken camera clock or a crafted file carries: those
    /// are clamped to the nearest end, never trapped on.
    static func nanoseconds(_ time: timespec) -> Int64 {
        let (whole, overflow) = Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, overflowAgain) = whole.addingReportingOverflow(Int64(time.tv_nsec))
        guard !overflow && !overflowAgain else { return time.tv_sec < 0 ? .min : .max }
        return sum
    }

    /// The modification time as a date: whole seconds plus the fraction, as
    /// `st_mtim` gives them (one division of the nanoseconds would round differently).
    public var modificationDate: Date {
        let (seconds, nanoseconds) = modified.quotientAndRemainder(dividingBy: 1_000_000_000)
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9)
    }

    /// The modification time as Foundation's `FileManager` gives it (counted from
    /// 2001, its reference date, which can differ from ``modificationDate`` in the
    /// last bit): a manifest's and an input archive's date, which archives have
    /// recorded so since the first release, so an item dated by them keeps its bytes.
    public var referenceModificationDate: Date {
        let (seconds, nanoseconds) = modified.quotientAndRemainder(dividingBy: 1_000_000_000)
        return Date(
            timeIntervalSinceReferenceDate: Double(seconds - 978_307_200) + Double(nanoseconds) / 1_000_000_000)
    }
}

extension FileInfo {
    /// A name's bytes as text a terminal and a log can show: printable ASCII and
    /// valid UTF-8 as they are, every other byte as `\xHH`.
    public static func escaped(_ bytes: [UInt8]) -> String {
        bytes.map {
            (0x20...0x7E).contains($0) && $0 != 0x5C ? String(UnicodeScalar($0)) : String(format: "\\x%02x", $0)
        }
        .joined()
    }
}
