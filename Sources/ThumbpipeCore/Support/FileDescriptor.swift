import Foundation

/// The one write-everything loop for an open descriptor: through EINTR and short writes.
public enum FileDescriptor {
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
