import CSandbox
import Foundation

/// The messages between `run` and its workers, over one UNIX socket pair: each
/// is a 4-byte big-endian length, then that many bytes of JSON, and it may carry
/// one descriptor (SCM_RIGHTS, attached to its length). The parent sends one
/// ``Hello``, then ``ItemJob``s, each with the source it opened (read-only);
/// the worker answers each job with one ``ItemOutcome``, with the sealed memory
/// file of its store file when it made one. A worker's stdout and stderr are a
/// pipe of their own (``WorkerProcess``), never this socket.
enum WorkerProtocol {
    /// The largest message either side accepts (a thumbnail's pixels are far smaller).
    static let maxMessageBytes = 64 << 20

    /// The descriptor a worker finds its socket on.
    static let controlDescriptor: Int32 = 3

    /// What a worker needs before its first job.
    struct Hello: Codable {
        var settings: PipelineSettings
        /// Some item to be done is named like a HEIC: the worker loads the HEVC
        /// decoder before its sandbox (``HeicPlaneStore/prepare(formats:)``); other
        /// runs do not map it at all.
        var expectsHEIC = false
    }

    /// How a read ended.
    enum Received {
        /// A message, and the descriptor that came with it (the receiver owns it).
        case message(Data, descriptor: FileDescriptor?)
        /// The other side closed its end (or died), or sent what is not a message.
        case closed
        /// The deadline passed first.
        case timedOut
    }

    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        // A thumbnail's pixels travel as base64, "/" one of its 64 characters:
        // escaped as "\/", every reply took the decoder's slow path for its
        // strings (6-7 % of the parent's samples over a bench run).
        encoder.outputFormatting = .withoutEscapingSlashes
        return try encoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }

    /// Writes one message, with `descriptor` attached when given. Throws `EPIPE`
    /// and the like as ``ThumbpipeError`` (74).
    static func send(_ payload: Data, descriptor: FileDescriptor? = nil, to socket: FileDescriptor) throws {
        let count = UInt32(payload.count)
        let header = [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
        var sent = 0
        while sent < header.count {
            let n = header[sent...].withUnsafeBytes {
                CSandbox_send(
                    socket.rawValue, $0.baseAddress, header.count - sent, sent == 0 ? descriptor?.rawValue ?? -1 : -1)
            }
            if n < 0 { throw ThumbpipeError(.ioError, "worker socket: \(ThumbpipeError.errnoText(Int32(-n)))") }
            sent += n
        }
        do { try socket.write(payload) } catch {
            throw ThumbpipeError(.ioError, "worker socket: \(error)")
        }
    }

    /// Reads one message, waiting at most until `deadline` (monotonic
    /// nanoseconds, nil for no deadline). What already waits in the socket is
    /// read even when the deadline has passed (a parent that was stopped is
    /// not a worker that hung).
    static func receive(from socket: FileDescriptor, deadline: UInt64?) -> Received {
        var header = [UInt8](repeating: 0, count: 4)
        // Owned as soon as received: every way out below closes what it does not return.
        var descriptor: FileDescriptor?
        var offset = 0
        while offset < 4 {
            if let deadline, !wait(socket, until: deadline) { return .timedOut }
            var passed: Int32 = -1
            let n = header[offset...].withUnsafeMutableBytes {
                CSandbox_receive(socket.rawValue, $0.baseAddress, 4 - offset, &passed)
            }
            if passed >= 0 {
                let received = FileDescriptor(adopting: passed)
                if descriptor == nil { descriptor = received }
            }
            if n <= 0 { return .closed }
            offset += n
        }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length <= maxMessageBytes else { return .closed }
        var body = [UInt8](repeating: 0, count: length)
        offset = 0
        while offset < length {
            if let deadline, !wait(socket, until: deadline) { return .timedOut }
            // A descriptor attached here is not part of the protocol: received and closed.
            var stray: Int32 = -1
            let n = body[offset...].withUnsafeMutableBytes {
                CSandbox_receive(socket.rawValue, $0.baseAddress, length - offset, &stray)
            }
            if stray >= 0 { _ = FileDescriptor(adopting: stray) }
            if n <= 0 { return .closed }
            offset += n
        }
        return .message(Data(body), descriptor: descriptor)
    }

    /// Waits until `socket` can be read or `deadline` passes; true when it can.
    /// Past the deadline it still looks once, without waiting.
    private static func wait(_ socket: FileDescriptor, until deadline: UInt64) -> Bool {
        while true {
            let now = Spans.now
            let milliseconds = now >= deadline ? 0 : Int32(min(Double(deadline - now) / 1e6 + 1, 60_000))
            // An error other than EINTR: the read says what is wrong.
            guard let ready = try? socket.waitReadable(milliseconds: milliseconds), !ready else { return true }
            if Spans.now >= deadline { return false }
        }
    }
}
