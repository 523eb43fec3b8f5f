import Foundation

/// An append-only list of integers kept in an unlinked temporary file, so lists
/// that grow with the item count (object offsets, references) cost no memory.
final class SpillList {
    private let descriptor: Int32
    private var pending: [UInt64] = []
    private var flushedCount = 0
    private static let chunk = 1 << 16

    /// The number of values appended.
    var count: Int { flushedCount + pending.count }

    /// Creates the list's file in `folder` and unlinks it at once: nothing is
    /// left behind, whatever happens to the process.
    init(in folder: String) throws {
        let file = try TemporaryFile(in: folder)
        descriptor = dup(file.descriptor)
        file.discard()
        guard descriptor >= 0 else {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): cannot create a scratch file: \(ThumbpipeError.errnoText())")
        }
        pending.reserveCapacity(Self.chunk)
    }

    deinit { close(descriptor) }

    /// Appends a value in memory; ``spillIfNeeded()`` moves values to disk.
    func append(_ value: UInt64) {
        pending.append(value)
    }

    /// Writes the values held in memory to disk once there are enough of them.
    func spillIfNeeded() throws {
        if pending.count >= Self.chunk { try flush() }
    }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        let offset = off_t(flushedCount * 8)
        try pending.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = pwrite(descriptor, raw.baseAddress! + done, raw.count - done, offset + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw ThumbpipeError(.ioError, "scratch file: write failed: \(ThumbpipeError.errnoText())")
                }
                done += n
            }
        }
        flushedCount += pending.count
        pending.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with every value, in order.
    func forEach(_ body: (UInt64) throws -> Void) throws {
        try flush()
        var chunk = [UInt64](repeating: 0, count: Self.chunk)
        var index = 0
        while index < flushedCount {
            let n = min(Self.chunk, flushedCount - index)
            let bytes = try chunk.withUnsafeMutableBytes { raw -> Int in
                let got = pread(descriptor, raw.baseAddress!, n * 8, off_t(index * 8))
                if got < 0 {
                    throw ThumbpipeError(.ioError, "scratch file: read failed: \(ThumbpipeError.errnoText())")
                }
                return got
            }
            guard bytes == n * 8 else { throw ThumbpipeError(.ioError, "scratch file: short read") }
            for i in 0..<n { try body(chunk[i]) }
            index += n
        }
    }
}
