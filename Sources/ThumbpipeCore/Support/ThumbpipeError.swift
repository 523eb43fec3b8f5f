import Foundation

/// An error a user can act on: one line of text and the exit status it maps to (sysexits).
public struct ThumbpipeError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What went wrong, in sysexits' classes.
    public enum Kind: Int32, Sendable {
        /// Bad command line (EX_USAGE).
        case usage = 64
        /// Bad manifest, pipeline file or archive (EX_DATAERR).
        case dataError = 65
        /// An input cannot be opened (EX_NOINPUT).
        case noInput = 66
        /// An internal error (EX_SOFTWARE).
        case software = 70
        /// The system refused a resource: a process, a pipe (EX_OSERR).
        case osError = 71
        /// An output cannot be created (EX_CANTCREAT).
        case cannotCreate = 73
        /// A read or write failed (EX_IOERR).
        case ioError = 74
    }

    /// The class of the error, which sets the exit status.
    public var kind: Kind
    /// One line a user can act on, e.g. `items.jsonl:42: itemKey '../x' is not a safe file name`.
    public var message: String

    /// Creates an error of `kind` with a one-line `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The process exit status for this error.
    public var exitStatus: Int32 { kind.rawValue }
    public var description: String { message }
}

extension ThumbpipeError {
    /// A data error located at `file:line`.
    static func data(_ file: String, _ line: Int, _ reason: String) -> ThumbpipeError {
        ThumbpipeError(.dataError, "\(file):\(line): \(reason)")
    }

    /// Describes a POSIX errno for messages.
    public static func errnoText(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }
}

extension ThumbpipeError {
    /// A short reason for a Foundation or POSIX error, without Foundation's boilerplate.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? Errno { return error.description }
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return errnoText(Int32(underlying.code))
        }
        if ns.domain == NSPOSIXErrorDomain { return errnoText(Int32(ns.code)) }
        switch CocoaError.Code(rawValue: ns.code) {
        case .fileReadNoSuchFile, .fileNoSuchFile: return "no such file"
        case .fileReadNoPermission, .fileWriteNoPermission: return "permission denied"
        default: return ns.localizedDescription
        }
    }
}
