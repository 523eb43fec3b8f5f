import Foundation

/// The messages between `run` and its workers, over a pair of pipes: each is a
/// 4-byte big-endian length, then that many bytes of JSON. The parent sends one
/// ``WorkerHello``, then ``ItemJob``s, one at a time; the worker answers each
/// job with one ``ItemOutcome``.
enum WorkerProtocol {
    /// The largest message either side accepts (a thumbnail is far smaller).
    static let maxMessageBytes = 256 << 20

    /// What a worker needs before its first job.
    struct Hello: Codable {
        var settings: PipelineSettings
        var outputFolder: String
        /// Where the worker writes (its store files' temporaries, libvips's spill):
        /// the only folder its sandbox lets it write to.
        var workFolder: String
        var sandbox: SandboxMode
    }

    /// How a read ended.
    enum Received {
        case message(Data)
        /// The other side closed its end (or died).
        case closed
        /// The deadline passed first.
        case timedOut
    }

    static func encode<T: Encodable>(_ value: T) throws -> Data {
        try JSONEncoder().encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }

    /// Writes one message. Throws `EPIPE` and the like as ``ThumbpipeError`` (74).
    static func send(_ payload: Data, to fd: Int32) throws {
        let count = UInt32(payload.count)
        var frame = Data([UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)])
        frame.append(payload)
        if let code = frame.withUnsafeBytes({ FileDescriptor.writeAll(fd, $0) }) {
            throw ThumbpipeError(.ioError, "worker pipe: \(ThumbpipeError.errnoText(code))")
        }
    }

    /// Reads one message, waiting at most until `deadline` (monotonic
    /// nanoseconds, nil for no deadline).
    static func receive(from fd: Int32, deadline: UInt64?) -> Received {
        var header = [UInt8](repeating: 0, count: 4)
        switch readExactly(fd, &header, 4, deadline: deadline) {
        case .closed: return .closed
        case .timedOut: return .timedOut
        case .message: break
        }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length <= maxMessageBytes else { return .closed }
        var body = [UInt8](repeating: 0, count: length)
        switch readExactly(fd, &body, length, deadline: deadline) {
        case .closed: return .closed
        case .timedOut: return .timedOut
        case .message: return .message(Data(body))
        }
    }

    private static func readExactly(_ fd: Int32, _ buffer: inout [UInt8], _ count: Int, deadline: UInt64?)
        -> Received
    {
        var offset = 0
        while offset < count {
            if let deadline {
                let now = Spans.now
                guard now < deadline else { return .timedOut }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let milliseconds = Int32(min(Double(deadline - now) / 1e6 + 1, 60_000))
                let ready = poll(&descriptor, 1, milliseconds)
                if ready < 0 && errno != EINTR { return .closed }
                if ready <= 0 { continue }
            }
            let n = buffer.withUnsafeMutableBytes {
                FileDescriptor.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[offset..<count]))
            }
            if n <= 0 { return .closed }
            offset += n
        }
        return .message(Data())
    }
}
