import Foundation
import Synchronization

/// A file written under a temporary name in its final folder, flushed, then
/// renamed into place, so nobody ever sees it half-written.
public final class TemporaryFile: Sendable {
    /// The prefix every temporary name carries; item keys cannot start with a
    /// dot, so these never collide with store files.
    public static let prefix = ".thumbpipe-tmp-"
    private static let counter = AtomicCounter()

    /// The temporary path.
    public let path: String
    /// The open file; closed once, by commit or discard.
    public let descriptor: FileDescriptor

    /// Creates an empty temporary file under a fresh name in `folder` (O_CREAT | O_EXCL, mode 0644).
    /// - Throws: ``ThumbpipeError`` (73) when it cannot be created.
    public convenience init(in folder: String) throws {
        try self.init(path: Self.name(in: folder))
    }

    /// Creates the empty temporary file at `path`, a name the caller chose
    /// with ``name(in:)`` (O_CREAT | O_EXCL, mode 0644).
    /// - Throws: ``ThumbpipeError`` (73) when it cannot be created.
    public init(path: String) throws {
        self.path = path
        do {
            descriptor = try FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(path): cannot create: \(error)")
        }
    }

    /// A fresh temporary name in `folder`, of fixed length whatever the final
    /// name: this process's id and a counter.
    public static func name(in folder: String) -> String {
        "\(folder)/\(prefix)\(getpid())-\(counter.next())"
    }

    /// Closes the file, leaving it under its temporary name, unflushed, for
    /// another process to flush and rename with ``commitClosed(_:to:replacing:)``: the
    /// writer (a worker) goes on to its next item while the disk catches up.
    /// - Throws: ``ThumbpipeError`` (74); the temporary is removed.
    public func closeForCommit() throws {
        do { try descriptor.close() } catch {
            try? FileSystem.remove(path)
            throw ThumbpipeError(.ioError, "\(path): close failed: \(error)")
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
        do { try flush(temporaryPath, flags: O_RDONLY | O_NOFOLLOW) } catch {
            try? FileSystem.remove(temporaryPath)
            throw ThumbpipeError(.ioError, "\(temporaryPath): flush failed: \(error)")
        }
        do { try FileSystem.rename(temporaryPath, to: finalPath, replacing: replacing) } catch {
            try? FileSystem.remove(temporaryPath)
            if error == .exists && !replacing { return false }
            throw ThumbpipeError(.ioError, "\(finalPath): cannot rename into place: \(error)")
        }
        return true
    }

    /// Writes all of `bytes`.
    /// - Throws: ``ThumbpipeError`` (74) naming the path and reason (e.g. no space left).
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        do { try descriptor.write(bytes) } catch {
            throw ThumbpipeError(.ioError, "\(path): write failed: \(error)")
        }
    }

    /// Starts writing `count` bytes from `offset` to disk without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a large file's final fsync
    /// has only its tail left to wait for. Best effort: failures are ignored.
    public func startWriteback(offset: UInt64, count: UInt64) {
        try? descriptor.startWriteback(offset: Int64(offset), count: Int64(count))
    }

    /// Flushes to disk (fsync, unless `sync` is false: for files whose loss
    /// costs only time, like an index), closes, and renames onto `finalPath` in
    /// the same folder. A symlink at `finalPath` is replaced, not followed.
    /// - Throws: ``ThumbpipeError`` (74); the temporary is removed.
    public func commit(to finalPath: String, sync: Bool = true) throws {
        do {
            if sync {
                do { try descriptor.sync() } catch { throw ThumbpipeError(.ioError, "\(path): flush failed: \(error)") }
            }
            do { try descriptor.close() } catch { throw ThumbpipeError(.ioError, "\(path): close failed: \(error)") }
            do { try FileSystem.rename(path, to: finalPath) } catch {
                throw ThumbpipeError(.ioError, "\(finalPath): cannot rename into place: \(error)")
            }
        } catch {
            discard()
            throw error
        }
    }

    /// Closes and removes the temporary.
    public func discard() {
        try? descriptor.close()
        try? FileSystem.remove(path)
    }

    /// Writes `data` to `finalPath` atomically.
    public static func write(_ data: Data, to finalPath: String) throws {
        let file = try TemporaryFile(in: URL(fileURLWithPath: finalPath).deletingLastPathComponent().path)
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
        try? flush(folder, flags: O_RDONLY | O_DIRECTORY)
    }

    /// Opens `path` with `flags` and fsyncs it.
    private static func flush(_ path: String, flags: Int32) throws(Errno) {
        try FileDescriptor.open(path, flags).sync()
    }

    /// Removes temporaries a killed run left in `folder`.
    /// - Returns: how many were removed.
    @discardableResult
    public static func removeStale(in folder: String) -> Int {
        var removed = 0
        for name in FileSystem.textNames(in: folder) where name.hasPrefix(prefix) {
            if (try? FileSystem.remove("\(folder)/\(name)")) != nil { removed += 1 }
        }
        return removed
    }
}

/// A process-wide counter for unique temporary names.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}
