import CSystem
import Foundation

/// The POSIX calls thumbpipe makes on files, each written once (after
/// swift-system's shape): open, read and write through EINTR and short
/// transfers, fsync, rename, and `stat` as a value. Everything else calls these.
public enum FileDescriptor {
    /// Opens `path` close-on-exec, retrying on EINTR.
    /// - Returns: the descriptor, or nil (errno says why).
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) -> Int32? {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno != EINTR { return nil }
        }
    }

    /// Reads what is there, up to `buffer.count` bytes, retrying on EINTR.
    /// - Returns: how many bytes were read (0 at the end), or -1 on an error (errno says why).
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// Reads into all of `buffer` from `offset`, through EINTR and short reads.
    /// - Returns: how many bytes were read (fewer at the end of the file), or -1 on an error.
    public static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return -1 }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// A regular file's bytes, read through one descriptor and bounded as they
    /// are read: nil for anything but a regular file of at most `limit` bytes,
    /// and for one that grows or shrinks while it is read (a file swapped after
    /// its size was seen is never read past the bound). The open does not block:
    /// a FIFO put in the place of a file is refused at once, not waited on.
    public static func contents(ofRegularFile path: String, limit: Int64) -> Data? {
        guard let fd = open(path, O_RDONLY | O_NONBLOCK) else { return nil }
        defer { close(fd) }
        guard let info = FileInfo(descriptor: fd), info.kind == .regular, info.size <= limit else { return nil }
        // One byte more than the size: a file that grew since fstat reads long, and is
        // refused. Not zeroed first (Data(count:) would clear megabytes to overwrite them).
        let size = Int(info.size)
        guard let buffer = malloc(size + 1) else { return nil }
        guard readFully(fd, into: UnsafeMutableRawBufferPointer(start: buffer, count: size + 1), at: 0) == size else {
            free(buffer)
            return nil
        }
        return Data(bytesNoCopy: buffer, count: size, deallocator: .free)
    }

    /// Writes all of `bytes` to `fd`.
    /// - Returns: nil when all was written, else the errno of the write that failed
    ///   (a full disk, a closed descriptor, a reader gone: ENOSPC, EBADF, EPIPE).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n < 0 ? errno : EIO }
            offset += n
        }
        return nil
    }

    /// Flushes `fd` to the disk, retrying on EINTR.
    /// - Returns: nil when flushed, else errno (EIO, ENOSPC: the data may be lost).
    public static func sync(_ fd: Int32) -> Int32? {
        while fsync(fd) != 0 {
            if errno != EINTR { return errno }
        }
        return nil
    }

    /// Renames `from` to `to`, replacing what is there (a symlink included, never
    /// followed), or, without `replacing`, only when nothing is there
    /// (renameat2's RENAME_NOREPLACE; where a file system cannot do that, a hard
    /// link and an unlink, which never replace either).
    /// - Returns: nil when renamed, else errno (EEXIST: something is at `to`).
    public static func rename(_ from: String, to: String, replacing: Bool = true) -> Int32? {
        if replacing { return Glibc.rename(from, to) == 0 ? nil : errno }
        if CSystem_rename_noreplace(from, to) == 0 { return nil }
        guard errno == EINVAL || errno == ENOSYS else { return errno }
        guard link(from, to) == 0 else { return errno }
        unlink(from)
        return nil
    }

    /// Writes all of `bytes` at `offset`, through EINTR and short writes (pwrite).
    /// - Returns: nil when all was written, else errno.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) -> Int32? {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return EIO }
            done += n
        }
        return nil
    }
}

/// What `stat`/`lstat` say of a path, as a value.
public struct FileInfo: Sendable, Equatable {
    /// What kind of file it is.
    public enum Kind: Sendable, Equatable { case regular, directory, symlink, other }

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

    /// The file at `path`, symlinks followed (`stat`), or the link itself
    /// (`followingLinks: false`, `lstat`); nil when there is none (errno says why).
    public init?(path: String, followingLinks: Bool = true) {
        var info = stat()
        guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
        self.init(info)
    }

    /// The file of an open descriptor (`fstat`).
    public init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }

    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        size = Int64(info.st_size)
        modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        links = UInt64(info.st_nlink)
    }

    /// The modification time as a date: whole seconds plus the fraction, as
    /// `st_mtim` gives them (one division of the nanoseconds would round differently).
    public var modificationDate: Date {
        let (seconds, nanoseconds) = modified.quotientAndRemainder(dividingBy: 1_000_000_000)
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9)
    }
}

extension FileInfo {
    /// The names in `folder` (not `.` or `..`), each as text when it is valid
    /// UTF-8 and as its bytes always, so a name from an old Latin-1 zip is seen
    /// (and can be reported) rather than lost; nil when the folder cannot be read.
    public static func names(in folder: String) -> [(text: String?, bytes: [UInt8])]? {
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var result: [(String?, [UInt8])] = []
        while let entry = readdir(directory) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            result.append((String(validating: bytes, as: UTF8.self), bytes))
        }
        return result
    }

    /// A name's bytes as text a terminal and a log can show: printable ASCII and
    /// valid UTF-8 as they are, every other byte as `\xHH`.
    public static func escaped(_ bytes: [UInt8]) -> String {
        bytes.map {
            (0x20...0x7E).contains($0) && $0 != 0x5C ? String(UnicodeScalar($0)) : String(format: "\\x%02x", $0)
        }
        .joined()
    }
}
