import Glibc

/// A POSIX error number, the one error type of thumbpipe's I/O layer (after
/// swift-system's `Errno`): every call in `FileDescriptor` and `FileSystem`
/// throws it, and its description is the C library's text.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The number, as `errno` holds it.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno`, read right after a failed call.
    public static var current: Errno { Errno(rawValue: errno) }

    /// The C library's text for it ("No space left on device").
    public var description: String { String(cString: strerror(rawValue)) }

    /// Something is at the name (EEXIST).
    public static let exists = Errno(rawValue: EEXIST)
    /// Nothing is at the name (ENOENT).
    public static let noEntry = Errno(rawValue: ENOENT)
    /// A call was interrupted by a signal (EINTR); the layer retries these.
    public static let interrupted = Errno(rawValue: EINTR)
    /// The call would block (EAGAIN, EWOULDBLOCK).
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// An input or output error, also what a write that wrote nothing reports (EIO).
    public static let ioError = Errno(rawValue: EIO)
    /// The disk is full (ENOSPC).
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// An invalid argument, or a file system that cannot do what was asked (EINVAL).
    public static let invalid = Errno(rawValue: EINVAL)
    /// The kernel has no such call (ENOSYS).
    public static let noSystemCall = Errno(rawValue: ENOSYS)
    /// Not a descriptor, or one closed (EBADF).
    public static let badDescriptor = Errno(rawValue: EBADF)
    /// Not allowed (EACCES).
    public static let accessDenied = Errno(rawValue: EACCES)
}

/// Calls `body` until it returns something other than -1 with EINTR.
/// - Returns: what `body` returned, or throws the errno it failed with.
@inline(__always)
func retryOnInterrupt<T: BinaryInteger>(_ body: () -> T) throws(Errno) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = Errno.current
        if error != .interrupted { throw error }
    }
}
