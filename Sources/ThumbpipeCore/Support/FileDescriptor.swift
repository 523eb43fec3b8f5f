import Foundation

/// The loops every descriptor needs, written once: open, read and write
/// through EINTR and short transfers.
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
}
