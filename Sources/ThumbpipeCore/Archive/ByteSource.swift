import Foundation

/// Random access to the bytes of a file or buffer, for the archive reader.
protocol ByteSource: AnyObject {
    /// The total size in bytes.
    var count: Int { get }
    /// Calls `body` with `length` bytes starting at `offset`, which the caller has checked lie within ``count``.
    func withBytes<R>(at offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R
}

/// Bytes held in memory.
final class MemoryBytes: ByteSource {
    private let data: Data
    init(_ data: Data) { self.data = data }
    var count: Int { data.count }
    func withBytes<R>(at offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try data.withUnsafeBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length])) }
    }
}

/// Bytes of a file read with pread through a few cached blocks, so reading a
/// many-gigabyte archive keeps a small, flat memory footprint (a memory map
/// would count every touched page as resident).
final class FileBytes: ByteSource {
    private let descriptor: FileDescriptor
    let count: Int
    private static let blockSize = 64 << 10
    // An item touches about six regions: its objects, the offset table, the
    // root and `$objects` arrays, and the shared keys and class descriptions.
    private static let blockCount = 16
    private var blocks: [(start: Int, bytes: [UInt8])] = []

    init(path: String) throws {
        // Never waits: a FIFO put where an archive should be is refused at once, not blocked on.
        do { descriptor = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY) } catch {
            throw ThumbpipeError(.noInput, "\(path): cannot open: \(error)")
        }
        guard let info = try? descriptor.info(), info.kind == .regular else {
            throw ThumbpipeError(.noInput, "\(path): not a regular file")
        }
        count = Int(info.size)
    }

    private func read(at offset: Int, length: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: length)
        let done: Int
        do { done = try descriptor.read(into: &bytes, at: UInt64(offset)) } catch {
            throw ThumbpipeError(.ioError, "read failed at byte \(offset): \(error)")
        }
        guard done == length else {
            throw ThumbpipeError(.ioError, "read failed at byte \(offset + done): end of file")
        }
        return bytes
    }

    func withBytes<R>(at offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        if length > Self.blockSize / 2 {
            return try self.read(at: offset, length: length).withUnsafeBytes { try body($0) }
        }
        if let index = blocks.firstIndex(where: { $0.start <= offset && offset + length <= $0.start + $0.bytes.count })
        {
            let block = blocks[index]
            if index != 0 {
                blocks.remove(at: index)
                blocks.insert(block, at: 0)
            }
            return try block.bytes.withUnsafeBytes { raw in
                try body(
                    UnsafeRawBufferPointer(rebasing: raw[(offset - block.start)..<(offset - block.start + length)]))
            }
        }
        let start = offset
        let block = try self.read(at: start, length: min(Self.blockSize, count - start))
        blocks.insert((start, block), at: 0)
        if blocks.count > Self.blockCount { blocks.removeLast() }
        return try block.withUnsafeBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
    }
}
