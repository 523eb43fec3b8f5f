import CSandbox
import CSystem
import Foundation
import Synchronization

/// An open file descriptor that closes itself (after swift-system's
/// `FileDescriptor`, as a class so it can be stored and shared): every call
/// retries on EINTR, reads and writes go through short transfers, and each
/// failure throws one ``Errno``. Nothing outside `Support/` makes these calls.
///
/// The descriptor is closed when the value goes, unless ``close()`` closed it
/// (and said whether the close failed) or ``release()`` gave it to someone else
/// (a C library that closes it, a message that carries it).
public final class FileDescriptor: Sendable {
    /// The kernel's number for it.
    public let rawValue: Int32
    private let owned: Atomic<Bool>

    /// Takes ownership of `rawValue` (from a pipe, a socket's message, a C call).
    public init(adopting rawValue: Int32) {
        self.rawValue = rawValue
        owned = Atomic(true)
    }

    /// Uses `rawValue` without owning it: it is never closed by this value
    /// (the standard streams, a descriptor the caller keeps).
    public init(borrowing rawValue: Int32) {
        self.rawValue = rawValue
        owned = Atomic(false)
    }

    deinit { if owned.load(ordering: .relaxed) { _ = Glibc.close(rawValue) } }

    /// Standard output, not owned.
    public static var standardOutput: FileDescriptor { FileDescriptor(borrowing: 1) }
    /// Standard error, not owned.
    public static var standardError: FileDescriptor { FileDescriptor(borrowing: 2) }

    /// Opens `path` close-on-exec.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(Errno) -> FileDescriptor {
        FileDescriptor(adopting: try retryOnInterrupt { Glibc.open(path, flags | O_CLOEXEC, mode) })
    }

    /// Opens `name` in this folder (openat), close-on-exec. A name is bytes
    /// (``FileSystem/names(in:)`` gives them), whether or not they are UTF-8.
    public func open(_ name: [UInt8], _ flags: Int32, mode: mode_t = 0o644) throws(Errno) -> FileDescriptor {
        let name = try Self.cString(name)
        return FileDescriptor(adopting: try retryOnInterrupt { openat(rawValue, name, flags | O_CLOEXEC, mode) })
    }

    /// `name` as a C string's characters, its terminating zero included.
    private static func cString(_ name: [UInt8]) throws(Errno) -> [CChar] {
        guard !name.contains(0) else { throw .invalid }
        return name.map { CChar(bitPattern: $0) } + [0]
    }

    /// A pipe, both ends close-on-exec.
    public static func pipe() throws(Errno) -> (read: FileDescriptor, write: FileDescriptor) {
        var ends: [Int32] = [-1, -1]
        _ = try retryOnInterrupt { Glibc.pipe(&ends) }
        let pair = (read: FileDescriptor(adopting: ends[0]), write: FileDescriptor(adopting: ends[1]))
        for end in [pair.read, pair.write] { _ = try retryOnInterrupt { fcntl(end.rawValue, F_SETFD, FD_CLOEXEC) } }
        return pair
    }

    /// Closes it now, and says whether the close failed (on NFS a write's error
    /// can surface only here). A failed close still releases the number.
    public func close() throws(Errno) {
        guard owned.exchange(false, ordering: .relaxed) else { return }
        if Glibc.close(rawValue) != 0 {
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }

    /// Gives the descriptor up: this value no longer closes it.
    /// - Returns: the number, now the caller's to close.
    public func release() -> Int32 {
        owned.store(false, ordering: .relaxed)
        return rawValue
    }

    /// Reads what is there, up to `buffer.count` bytes.
    /// - Returns: how many bytes were read, 0 at the end.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryOnInterrupt { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads into all of `buffer` from `offset`, through short reads.
    /// - Returns: how many bytes were read: `buffer.count`, fewer only at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(Errno) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = try retryOnInterrupt {
                pread(rawValue, base + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes`, through short writes. A write that writes nothing throws EIO.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = try retryOnInterrupt { Glibc.write(rawValue, base + done, bytes.count - done) }
            if n == 0 { throw .ioError }
            done += n
        }
    }

    /// Writes all of `bytes` at `offset`, through short writes.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(Errno) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = try retryOnInterrupt {
                pwrite(rawValue, base + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { throw .ioError }
            done += n
        }
    }

    /// Writes all of `text`'s UTF-8.
    public func write(_ text: String) throws(Errno) { try write(Array(text.utf8)) }

    /// Writes all of `bytes` (an array, `Data`).
    public func write(_ bytes: some ContiguousBytes) throws(Errno) {
        try bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try write(raw) } }.get()
    }

    /// Writes all of `bytes` (an array, `Data`) at `offset`.
    public func write(_ bytes: some ContiguousBytes, at offset: UInt64) throws(Errno) {
        try bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try write(raw, at: offset) } }.get()
    }

    /// Reads into `buffer` from `offset`, through short reads, as
    /// ``read(into:at:)-(UnsafeMutableRawBufferPointer,_)`` does.
    /// - Returns: how many bytes were read: `buffer.count`, fewer only at the end of the file.
    public func read(into buffer: inout [UInt8], at offset: UInt64) throws(Errno) -> Int {
        try buffer.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try read(into: raw, at: offset) } }
            .get()
    }

    /// Reads what is there, up to `buffer.count` bytes, into `buffer`.
    /// - Returns: how many bytes were read, 0 at the end.
    public func read(into buffer: inout [UInt8]) throws(Errno) -> Int {
        try buffer.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try read(into: raw) } }.get()
    }

    /// Flushes the file to the disk (fsync). EIO and ENOSPC mean the data may be lost.
    public func sync() throws(Errno) { _ = try retryOnInterrupt { fsync(rawValue) } }

    /// Starts writing `count` bytes from `offset` to the disk without waiting (sync_file_range).
    public func startWriteback(offset: Int64, count: Int64) throws(Errno) {
        _ = try retryOnInterrupt { CSystem_start_writeback(rawValue, offset, count) }
    }

    /// What `fstat` says of it.
    public func info() throws(Errno) -> FileInfo {
        var info = stat()
        _ = try retryOnInterrupt { fstat(rawValue, &info) }
        return FileInfo(info)
    }

    /// What `fstatat` says of `name` in this folder, the link itself when it is one.
    public func info(of name: [UInt8]) throws(Errno) -> FileInfo {
        let name = try Self.cString(name)
        var info = stat()
        _ = try retryOnInterrupt { fstatat(rawValue, name, &info, AT_SYMLINK_NOFOLLOW) }
        return FileInfo(info)
    }

    /// Removes `name` from this folder (unlinkat): an empty folder when `folder`.
    public func remove(_ name: [UInt8], folder: Bool = false) throws(Errno) {
        let name = try Self.cString(name)
        _ = try retryOnInterrupt { unlinkat(rawValue, name, folder ? AT_REMOVEDIR : 0) }
    }

    /// Cuts or extends the file to `size` bytes.
    public func truncate(to size: Int64) throws(Errno) {
        _ = try retryOnInterrupt { ftruncate(rawValue, off_t(size)) }
    }

    /// Takes an advisory lock on the whole file (flock) without waiting:
    /// throws ``Errno/wouldBlock`` when another holds it.
    public func lock(shared: Bool) throws(Errno) {
        _ = try retryOnInterrupt { flock(rawValue, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) }
    }

    /// Makes `target` (a standard stream's number) refer to this file (dup2).
    public func duplicate(as target: Int32) throws(Errno) {
        _ = try retryOnInterrupt { dup2(rawValue, target) }
    }

    /// Lets processes this one starts inherit the descriptor (clears FD_CLOEXEC).
    public func keepOnExec() throws(Errno) {
        _ = try retryOnInterrupt { fcntl(rawValue, F_SETFD, 0) }
    }

    /// Waits at most `milliseconds` (-1: for ever) until it can be read (poll).
    /// - Returns: true when it can be read (or has been closed by the other side).
    public func waitReadable(milliseconds: Int32) throws(Errno) -> Bool {
        var entry = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
        return try retryOnInterrupt { poll(&entry, 1, milliseconds) } > 0
    }

    /// A connected pair of UNIX stream sockets, both ends close-on-exec.
    public static func socketPair() throws(Errno) -> (FileDescriptor, FileDescriptor) {
        var pair: [Int32] = [-1, -1]
        _ = try retryOnInterrupt {
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair)
        }
        return (FileDescriptor(adopting: pair[0]), FileDescriptor(adopting: pair[1]))
    }

    /// A new memory file (memfd) that can be sealed, for a worker's store file; nil when none can be made.
    public static func memoryFile() -> FileDescriptor? {
        let fd = CSandbox_memfd("thumbpipe-store")
        return fd >= 0 ? FileDescriptor(adopting: fd) : nil
    }

    /// Seals this memory file against every change (write, grow, shrink, more seals).
    public func seal() throws(Errno) {
        let result = CSandbox_seal(rawValue)  // 0, or a negative errno
        if result != 0 { throw Errno(rawValue: -result) }
    }

    /// Whether this is a memory file sealed against write, grow, shrink and more seals.
    public var isSealed: Bool { CSandbox_is_sealed(rawValue) == 1 }

    /// The first `count` bytes of this sealed memory file, mapped read-only
    /// rather than copied: nil unless ``isSealed`` (a mapping of a file that can
    /// still shrink would fault past its end) or when it cannot be mapped. The
    /// mapping lives as long as the `Data`. A worker's store file (0.2–1.8 MB,
    /// median 0.8 MB, on the bench's photos) read into a zeroed buffer cost the
    /// parent a clear, a copy and a fresh page fault per page, on the cores the
    /// workers use.
    public func mappedSealedContents(count: Int) -> Data? {
        guard count > 0, isSealed else { return nil }
        guard let address = mmap(nil, count, PROT_READ, MAP_SHARED, rawValue, 0), address != MAP_FAILED else {
            return nil
        }
        return Data(bytesNoCopy: address, count: count, deallocator: .custom { munmap($0, $1) })
    }

    /// Whether the number refers to an open file (fcntl F_GETFD).
    public static func isOpen(_ rawValue: Int32) -> Bool { fcntl(rawValue, F_GETFD) >= 0 }

    /// The names in this folder (not `.` or `..`), as ``FileSystem/names(in:)`` gives them.
    /// The descriptor stays open; the listing reads a duplicate of it.
    public func names() throws(Errno) -> [(text: String?, bytes: [UInt8])] {
        let copy = try retryOnInterrupt { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) }
        guard let directory = fdopendir(copy) else {
            let error = Errno.current
            Glibc.close(copy)
            throw error
        }
        defer { closedir(directory) }
        rewinddir(directory)
        return FileSystem.entries(of: directory)
    }

    /// Everything left to read (a file from its current offset, a pipe to its
    /// end), in chunks; throws EFBIG past `limit` bytes.
    public func readToEnd(limit: Int = .max) throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        // 64 KB (a pipe's buffer): a /proc file read once a second must not clear and fault in a megabyte.
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try read(into: &chunk)
            if n == 0 { return bytes }
            guard bytes.count + n <= limit else { throw Errno(rawValue: EFBIG) }
            bytes += chunk[..<n]
        }
    }

    /// A regular file's bytes, read through one descriptor and bounded as they
    /// are read: nil for anything but a regular file of at most `limit` bytes,
    /// and for one that grows or shrinks while it is read (a file swapped after
    /// its size was seen is never read past the bound). The open does not block:
    /// a FIFO put in the place of a file is refused at once, not waited on.
    public static func contents(ofRegularFile path: String, limit: Int64) -> Data? {
        guard let file = try? open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY) else { return nil }
        return try? file.contents(limit: limit)
    }

    /// This regular file's bytes from its start, at most `limit` of them; nil as
    /// ``contents(ofRegularFile:limit:)`` says.
    public func contents(limit: Int64) throws(Errno) -> Data? {
        let info = try info()
        guard info.kind == .regular, info.size <= limit else { return nil }
        // One byte more than the size: a file that grew since fstat reads long, and is
        // refused. Not zeroed first (Data(count:) would clear megabytes to overwrite them).
        let size = Int(info.size)
        guard let buffer = malloc(size + 1) else { throw Errno(rawValue: ENOMEM) }
        let n: Int
        do { n = try read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size + 1), at: 0) } catch {
            free(buffer)
            throw error
        }
        guard n == size else {
            free(buffer)
            return nil
        }
        return Data(bytesNoCopy: buffer, count: size, deallocator: .free)
    }
}
