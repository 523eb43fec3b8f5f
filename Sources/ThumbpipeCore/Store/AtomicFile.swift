import CSystem
import Foundation
import Synchronization

/// glibc's `sync_file_range` (Linux; the Glibc module does not export it).
/// A file written under a temporary name in its final folder, flushed, then
/// renamed into place, so nobody ever sees it half-written.
public final class TemporaryFile: Sendable {
    /// The prefix every temporary name carries; item keys cannot start with a
    /// dot, so these never collide with store files.
    public static let prefix = ".thumbpipe-tmp-"
    private static let counter = AtomicCounter()

    /// The temporary path.
    public let path: String
    /// The open descriptor, or -1 once closed (atomic: commit or discard closes it once).
    private let open: Atomic<Int32>
    public var descriptor: Int32 { open.load(ordering: .acquiring) }

    /// Takes the descriptor out (it is then -1): the one close of it is the caller's.
    private func takeDescriptor() -> Int32 { open.exchange(-1, ordering: .acquiringAndReleasing) }

    /// Creates an empty temporary file under a fresh name in `folder` (O_CREAT | O_EXCL, mode 0644).
    /// - Throws: ``ThumbpipeError`` (73) when it cannot be created.
    public init(in folder: String) throws {
        path = Self.name(in: folder)
        guard let fd = FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL) else {
            throw ThumbpipeError(.cannotCreate, "\(path): cannot create: \(ThumbpipeError.errnoText())")
        }
        open = Atomic(fd)
    }

    /// Creates the empty temporary file at `path`, a name the caller chose
    /// with ``name(in:)`` (O_CREAT | O_EXCL, mode 0644).
    /// - Throws: ``ThumbpipeError`` (73) when it cannot be created.
    public init(path: String) throws {
        self.path = path
        guard let fd = FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL) else {
            throw ThumbpipeError(.cannotCreate, "\(path): cannot create: \(ThumbpipeError.errnoText())")
        }
        open = Atomic(fd)
    }

    /// A fresh temporary name in `folder`, of fixed length whatever the final
    /// name: this process's id and a counter.
    public static func name(in folder: String) -> String {
        "\(folder)/\(prefix)\(getpid())-\(counter.next())"
    }

    deinit {
        let fd = takeDescriptor()
        if fd >= 0 { close(fd) }
    }

    /// Closes the file, leaving it under its temporary name, unflushed, for
    /// another process to flush and rename with ``commitClosed(_:to:)``: the
    /// writer (a worker) goes on to its next item while the disk catches up.
    /// - Throws: ``ThumbpipeError`` (74); the temporary is removed.
    public func closeForCommit() throws {
        let fd = takeDescriptor()
        if close(fd) != 0 {
            let reason = ThumbpipeError.errnoText()
            unlink(path)
            throw ThumbpipeError(.ioError, "\(path): close failed: \(reason)")
        }
    }

    /// Flushes a closed temporary to disk (fsync) and renames it onto
    /// `finalPath` in the same folder. A symlink at `finalPath` is replaced,
    /// not followed.
    /// - Throws: ``ThumbpipeError`` (74); the temporary is removed.
    /// - Parameter replacing: false for a file that must be new: an existing file at
    ///   `finalPath` (one that appeared during the run) is left as it is.
    /// - Returns: false when `replacing` is false and a file was already there (the temporary is removed).
    @discardableResult
    public static func commitClosed(_ temporaryPath: String, to finalPath: String, replacing: Bool = true) throws
        -> Bool
    {
        if let reason = flush(temporaryPath, flags: O_RDONLY | O_NOFOLLOW) {
            unlink(temporaryPath)
            throw ThumbpipeError(.ioError, "\(temporaryPath): flush failed: \(reason)")
        }
        if let code = FileDescriptor.rename(temporaryPath, to: finalPath, replacing: replacing) {
            if code == EEXIST && !replacing {
                unlink(temporaryPath)
                return false
            }
            let reason = ThumbpipeError.errnoText(code)
            unlink(temporaryPath)
            throw ThumbpipeError(.ioError, "\(finalPath): cannot rename into place: \(reason)")
        }
        return true
    }

    /// Writes all of `bytes`.
    /// - Throws: ``ThumbpipeError`` (74) naming the path and reason (e.g. no space left).
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        if let code = FileDescriptor.writeAll(descriptor, bytes) {
            throw ThumbpipeError(.ioError, "\(path): write failed: \(ThumbpipeError.errnoText(code))")
        }
    }

    /// Starts writing `count` bytes from `offset` to disk without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a large file's final fsync
    /// has only its tail left to wait for. Best effort: failures are ignored.
    public func startWriteback(offset: UInt64, count: UInt64) {
        _ = CSystem_start_writeback(descriptor, Int64(offset), Int64(count))
    }

    /// Flushes to disk (fsync, unless `sync` is false: for files whose loss
    /// costs only time, like an index), closes, and renames onto `finalPath` in
    /// the same folder. A symlink at `finalPath` is replaced, not followed.
    /// - Throws: ``ThumbpipeError`` (74); the temporary is removed.
    public func commit(to finalPath: String, sync: Bool = true) throws {
        defer { if descriptor >= 0 { discard() } }
        if sync, let code = FileDescriptor.sync(descriptor) {
            throw ThumbpipeError(.ioError, "\(path): flush failed: \(ThumbpipeError.errnoText(code))")
        }
        let fd = takeDescriptor()
        if close(fd) != 0 {
            unlink(path)
            throw ThumbpipeError(.ioError, "\(path): close failed: \(ThumbpipeError.errnoText())")
        }
        if let code = FileDescriptor.rename(path, to: finalPath) {
            let reason = ThumbpipeError.errnoText(code)
            unlink(path)
            throw ThumbpipeError(.ioError, "\(finalPath): cannot rename into place: \(reason)")
        }
    }

    /// Closes and removes the temporary.
    public func discard() {
        let fd = takeDescriptor()
        if fd >= 0 {
            close(fd)
        }
        unlink(path)
    }

    /// Writes `data` to `finalPath` atomically.
    public static func write(_ data: Data, to finalPath: String) throws {
        let url = URL(fileURLWithPath: finalPath)
        let file = try TemporaryFile(in: url.deletingLastPathComponent().path)
        do {
            try data.withUnsafeBytes { try file.write($0) }
            try file.commit(to: finalPath)
        } catch {
            file.discard()
            throw error
        }
    }

    /// Flushes a folder's entries (fsync on the directory), so renames survive power loss.
    public static func syncFolder(_ folder: String) {
        _ = flush(folder, flags: O_RDONLY | O_DIRECTORY)
    }

    /// Opens `path` with `flags` and fsyncs it: nil when done, else why not.
    private static func flush(_ path: String, flags: Int32) -> String? {
        guard let fd = FileDescriptor.open(path, flags) else { return ThumbpipeError.errnoText() }
        defer { close(fd) }
        return FileDescriptor.sync(fd).map { ThumbpipeError.errnoText($0) }
    }

    /// Removes temporaries a killed run left in `folder`.
    /// - Returns: how many were removed.
    @discardableResult
    public static func removeStale(in folder: String) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(prefix) {
            if unlink("\(folder)/\(name)") == 0 { removed += 1 }
        }
        return removed
    }
}

/// A process-wide counter for unique temporary names.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}
