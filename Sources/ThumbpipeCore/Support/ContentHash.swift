import Foundation

/// XXH64 (Yann Collet's xxHash, 64-bit): a fast, well-distributed hash of file
/// contents for change detection and sharding, not for security.
public struct ContentHash {
    private static let p1: UInt64 = 11_400_714_785_074_694_791
    private static let p2: UInt64 = 14_029_467_366_897_019_727
    private static let p3: UInt64 = 1_609_587_929_392_839_161
    private static let p4: UInt64 = 9_650_029_242_287_828_579
    private static let p5: UInt64 = 2_870_177_450_012_600_261

    @inline(__always) fileprivate static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }
    @inline(__always) fileprivate static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }
    @inline(__always) fileprivate static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    /// The XXH64 of `bytes` with `seed`.
    public static func xxh64(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        var i = 0
        var h: UInt64
        func word(_ at: Int) -> UInt64 {
            UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            while i + 32 <= count {
                v1 = round(v1, word(i))
                v2 = round(v2, word(i + 8))
                v3 = round(v3, word(i + 16))
                v4 = round(v4, word(i + 24))
                i += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(merge(merge(merge(h, v1), v2), v3), v4)
        } else {
            h = seed &+ p5
        }
        return finish(h &+ UInt64(count), tail: UnsafeRawBufferPointer(rebasing: bytes[i...]))
    }

    /// The end of XXH64: the last fewer than 32 bytes, then the avalanche.
    fileprivate static func finish(_ start: UInt64, tail bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h = start
        let count = bytes.count
        var i = 0
        func word(_ at: Int) -> UInt64 {
            UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }
        while i + 8 <= count {
            h ^= round(0, word(i))
            h = rotl(h, 27) &* p1 &+ p4
            i += 8
        }
        if i + 4 <= count {
            h ^= UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            i += 4
        }
        while i < count {
            h ^= UInt64(bytes[i]) &* p5
            h = rotl(h, 11) &* p1
            i += 1
        }
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }

    /// The XXH64 of bytes in memory, as 16 hex digits (as ``file(_:)`` gives a file's).
    public static func hex(bytes: UnsafeRawBufferPointer) -> String {
        String(xxh64(bytes), radix: 16).leftPadded(to: 16)
    }

    /// The XXH64 of a string's UTF-8, as 16 hex digits.
    public static func hex(_ text: String) -> String {
        Array(text.utf8).withUnsafeBytes { hex(bytes: $0) }
    }

    /// The XXH64 of a file's contents as 16 hex digits, or nil when it cannot be
    /// read. Reads in 64 KB chunks (never maps the file: one truncated while it
    /// is read would raise SIGBUS).
    public static func file(_ path: String) -> String? {
        guard let file = try? FileDescriptor.open(path, O_RDONLY) else { return nil }
        return descriptor(file)
    }

    /// The XXH64 of the contents of the file open as `fd`, from offset 0 (its
    /// own offset is left alone), as 16 hex digits; nil when it cannot be read.
    public static func descriptor(_ file: FileDescriptor) -> String? {
        var state = Streaming()
        // 64 KB: below malloc's mmap threshold (see ``Allocator``), so the same
        // heap memory serves every call; a 1 MB buffer was a fresh mapping, 256
        // page faults, each time (twice an item).
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var offset: UInt64 = 0
        while true {
            guard let n = try? file.read(into: &buffer, at: offset) else { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { state.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += UInt64(n)
            if n < buffer.count { break }
        }
        return String(state.finish(), radix: 16).leftPadded(to: 16)
    }

    /// XXH64 over bytes that arrive in pieces; equal to ``xxh64(_:seed:)`` of them all.
    public struct Streaming {
        private var v1 = p1 &+ p2
        private var v2 = p2
        private var v3: UInt64 = 0
        private var v4: UInt64 = 0 &- p1
        private var total = 0
        /// Bytes not yet making a 32-byte stripe.
        private var pending: [UInt8] = []

        public init() {}

        public mutating func update(_ bytes: UnsafeRawBufferPointer) {
            total += bytes.count
            var i = 0
            if !pending.isEmpty {
                let take = min(32 - pending.count, bytes.count)
                pending += bytes[0..<take]
                i = take
                guard pending.count == 32 else { return }
                pending.withUnsafeBytes { stripe(UnsafeRawBufferPointer($0), at: 0) }
                pending.removeAll(keepingCapacity: true)
            }
            while i + 32 <= bytes.count {
                stripe(bytes, at: i)
                i += 32
            }
            pending += bytes[i...]
        }

        private mutating func stripe(_ bytes: UnsafeRawBufferPointer, at i: Int) {
            func word(_ at: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            }
            v1 = ContentHash.round(v1, word(i))
            v2 = ContentHash.round(v2, word(i + 8))
            v3 = ContentHash.round(v3, word(i + 16))
            v4 = ContentHash.round(v4, word(i + 24))
        }

        public func finish() -> UInt64 {
            var h: UInt64
            if total >= 32 {
                h =
                    ContentHash.rotl(v1, 1) &+ ContentHash.rotl(v2, 7) &+ ContentHash.rotl(v3, 12)
                    &+ ContentHash.rotl(v4, 18)
                h = ContentHash.merge(ContentHash.merge(ContentHash.merge(ContentHash.merge(h, v1), v2), v3), v4)
            } else {
                h = p5
            }
            return pending.withUnsafeBytes { ContentHash.finish(h &+ UInt64(total), tail: $0) }
        }
    }
}
