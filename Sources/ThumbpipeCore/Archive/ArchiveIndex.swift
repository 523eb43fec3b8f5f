import Foundation

/// Where each item's objects lie in an `items.archive` thumbpipe wrote, and a
/// hash of what they encode: kept as `.thumbpipe/archive.index`, so the next
/// run can copy the unchanged items' bytes instead of encoding them again.
///
/// File layout: a 64-byte header (magic, format version, item count,
/// reference width, a hash of the class name, the archive's size and
/// modification time, a checksum of the entries), then one 48-byte ``Entry``
/// per item, little-endian. The index is only trusted for the archive file
/// whose size and time it records, written by this format version, whole
/// (its size agrees with its item count, its entries with their checksum);
/// and even then no byte is copied without proof: each entry holds a hash of
/// its item's bytes in the archive, checked as they are copied.
enum ArchiveIndex {
    static let magic: [UInt8] = Array("TPAIDX01".utf8)
    /// Bumped whenever the archive's encoding of an item or the index's layout changes.
    /// 2: entries hold a hash of their item's archived bytes; the header a checksum of the entries.
    static let formatVersion: UInt32 = 2
    static let headerSize = 64
    static let entrySize = 48
    /// The fewest bytes an item takes in an archive (its objects without
    /// thumbnail, with empty strings): bounds an index's item count by its archive's size.
    static let minimumItemBytes: UInt64 = 30

    /// Where a run keeps the index of `folder`'s archive.

    /// One item: its hash, where its first object starts, and the sizes of its
    /// objects whose size depends on their content (the rest follow from the layout).
    struct Entry: Equatable {
        var hash: UInt64
        var start: UInt64
        var nameSize: UInt32 = 0
        var serialSize: UInt32 = 0
        var keySize: UInt32 = 0
        /// 0 when the item has no thumbnail.
        var dataSize: UInt32 = 0
        var integerSize: UInt8 = 0
        /// XXH64 of the item's bytes in the archive, seeded with its object
        /// sizes: copied bytes must hash to it, and sizes that do not split
        /// them as they were written do not.
        var bytesHash: UInt64 = 0

        /// The seed of ``bytesHash``: the object sizes, hashed.
        var sizesSeed: UInt64 {
            var sizes = (
                nameSize.littleEndian, serialSize.littleEndian, keySize.littleEndian, dataSize.littleEndian,
                UInt32(integerSize).littleEndian
            )
            return withUnsafeBytes(of: &sizes) { ContentHash.xxh64($0) }
        }

        /// The hash an item's `bytes` must have for this entry.
        func hashOfBytes(_ bytes: UnsafeRawBufferPointer) -> UInt64 { ContentHash.xxh64(bytes, seed: sizesSeed) }

        /// Calls `body` with the size of each of the item's objects, in object order.
        @inline(__always) func forEachObjectSize(_ layout: Layout, refWidth: Int, _ body: (UInt64) throws -> Void)
            rethrows
        {
            let hasThumbnail = dataSize != 0
            let base = UInt64(layout.firstArchiveRef)
            try body(UInt64(nameSize))
            try body(UInt64(serialSize))
            try body(9)
            try body(UInt64(1 + 4 * refWidth))
            try body(UInt64(keySize))
            if hasThumbnail { try body(UInt64(dataSize)) }
            for k in 1...(hasThumbnail ? 5 : 4) {
                try body(UInt64(1 + BinaryPlistEncoding.byteWidth(for: base + UInt64(k))))
            }
            try body(UInt64(integerSize))
            try body(UInt64(1 + 2 * (hasThumbnail ? 7 : 6) * refWidth))
            try body(UInt64(1 + BinaryPlistEncoding.byteWidth(for: base)))
        }

        func byteCount(_ layout: Layout, refWidth: Int) -> UInt64 {
            var total: UInt64 = 0
            forEachObjectSize(layout, refWidth: refWidth) { total += $0 }
            return total
        }

        func encode(into out: inout [UInt8]) {
            var record = (
                hash.littleEndian, start.littleEndian, nameSize.littleEndian, serialSize.littleEndian,
                keySize.littleEndian, dataSize.littleEndian, UInt64(integerSize).littleEndian,
                bytesHash.littleEndian
            )
            withUnsafeBytes(of: &record) {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<ArchiveIndex.entrySize]))
            }
        }

        init(hash: UInt64, start: UInt64) {
            self.hash = hash
            self.start = start
        }

        init(_ bytes: UnsafeRawBufferPointer) {
            hash = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            start = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            nameSize = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            serialSize = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
            keySize = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
            dataSize = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
            integerSize = bytes[32]
            bytesHash = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 40, as: UInt64.self))
        }
    }

    /// The numbers an item's objects get: its first plist object and its
    /// dictionary's index in `$objects` (the UIDs point there).
    struct Layout: Equatable {
        var firstObject: Int
        var firstArchiveRef: Int

        func objectCount(hasThumbnail: Bool) -> Int { hasThumbnail ? 14 : 12 }

        /// The next item's layout.
        func next(hasThumbnail: Bool) -> Layout {
            Layout(
                firstObject: firstObject + objectCount(hasThumbnail: hasThumbnail),
                firstArchiveRef: firstArchiveRef + (hasThumbnail ? 6 : 5))
        }
    }

    struct Header {
        var itemCount: UInt64
        var refWidth: UInt8
        var className: String
        var archive: FileStamp?
        /// XXH64 of every entry's bytes, in order.
        var entriesChecksum: UInt64 = 0

        /// Where the item count and the checksum lie in the encoded header.
        static let itemCountBytes = 12..<20
        static let checksumBytes = 45..<53

        func encode() -> [UInt8] {
            var out = ArchiveIndex.magic
            func put(_ value: UInt64, _ width: Int) {
                for i in 0..<width { out.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * i))) }
            }
            put(UInt64(ArchiveIndex.formatVersion), 4)
            put(itemCount, 8)
            put(UInt64(refWidth), 1)
            put(ArchiveIndex.hash(className), 8)
            put(UInt64(bitPattern: archive?.size ?? -1), 8)
            put(UInt64(bitPattern: archive?.modified ?? -1), 8)
            put(entriesChecksum, 8)
            out += [UInt8](repeating: 0, count: ArchiveIndex.headerSize - out.count)
            return out
        }
    }

    static func hash(_ text: String) -> UInt64 {
        var bytes = Array(text.utf8)
        bytes.append(0)
        return bytes.withUnsafeBytes { ContentHash.xxh64($0) }
    }

    /// What an item's archived bytes depend on, hashed: every field (each
    /// with its length, so no two items run together alike) and the thumbnail.
    static func hash(_ item: ArchivedItem) -> UInt64 {
        let seed = item.thumbnailData.map { data in data.withUnsafeBytes { ContentHash.xxh64($0, seed: 1) } } ?? 0
        var name = item.itemName
        var serial = item.serialNumber
        var key = item.itemKey
        return name.withUTF8 { name in
            serial.withUTF8 { serial in
                key.withUTF8 { key in
                    let count = 40 + name.count + serial.count + key.count
                    return withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { raw in
                        var at = 0
                        func put(_ value: UInt64) {
                            raw.storeBytes(of: value.littleEndian, toByteOffset: at, as: UInt64.self)
                            at += 8
                        }
                        func put(_ text: UnsafeBufferPointer<UInt8>) {
                            put(UInt64(text.count))
                            if let base = text.baseAddress, let into = raw.baseAddress {
                                (into + at).copyMemory(from: base, byteCount: text.count)
                            }
                            at += text.count
                        }
                        put(name)
                        put(serial)
                        put(key)
                        put(UInt64(UInt32(bitPattern: item.valueInDollars)))
                        put(item.dateCreated.timeIntervalSinceReferenceDate.bitPattern)
                        return ContentHash.xxh64(UnsafeRawBufferPointer(raw), seed: seed)
                    }
                }
            }
        }
    }

    /// Reads an index file's entries in chunks, in order, with the layout of each item.
    struct EntryCursor {
        let descriptor: FileDescriptor
        private let path: String
        private var layout: Layout
        /// Where the entries end (a file being written), or nil: read to the end of the file.
        private let end: UInt64?
        private var offset = UInt64(ArchiveIndex.headerSize)
        private var chunk: [UInt8] = []
        private var position = 0

        init(descriptor: FileDescriptor, path: String, firstLayout: Layout, end: UInt64?) {
            self.descriptor = descriptor
            self.path = path
            layout = firstLayout
            self.end = end
        }

        /// The next entry and its item's layout; nil past the last, or at a
        /// chunk that does not hold whole entries (a cut file).
        /// - Throws: ``ThumbpipeError`` (74) when reading fails, or a file being written reads short.
        mutating func next() throws -> (entry: Entry, layout: Layout)? {
            if position >= chunk.count {
                var want = 4096 * ArchiveIndex.entrySize
                if let end { want = Int(min(UInt64(want), end - min(end, offset))) }
                guard want > 0 else { return nil }
                chunk = [UInt8](repeating: 0, count: want)
                let n: Int
                do { n = try descriptor.read(into: &chunk, at: offset) } catch {
                    throw ThumbpipeError(.ioError, "\(path): read failed: \(error)")
                }
                if end != nil && n != want { throw ThumbpipeError(.ioError, "\(path): short read") }
                guard n > 0, n % ArchiveIndex.entrySize == 0 else { return nil }
                chunk.removeSubrange(n...)
                offset += UInt64(n)
                position = 0
            }
            let entry = chunk.withUnsafeBytes {
                Entry(UnsafeRawBufferPointer(rebasing: $0[position..<position + ArchiveIndex.entrySize]))
            }
            position += ArchiveIndex.entrySize
            let current = layout
            layout = layout.next(hasThumbnail: entry.dataSize != 0)
            return (entry, current)
        }
    }

    /// Collects entries on disk while an archive is written; becomes the
    /// archive's index when it is committed (or a scratch file that is gone).
    final class Writer {
        private let file: TemporaryFile
        private let finalPath: String?
        private var pending: [UInt8] = []
        /// Layout of the first item, set before the first entry is added.
        var firstLayout = Layout(firstObject: 0, firstArchiveRef: 5)

        init(folder: String, finalPath: String?) throws {
            file = try TemporaryFile(in: folder)
            self.finalPath = finalPath
            if finalPath == nil { try? FileSystem.remove(file.path) }  // a scratch file: nothing left behind
            pending = [UInt8](repeating: 0, count: ArchiveIndex.headerSize)
            pending.reserveCapacity(1 << 20)
        }

        /// XXH64 of the entries appended so far: the header's checksum.
        private var checksum = ContentHash.Streaming()

        func append(_ entry: Entry) throws {
            let from = pending.count
            entry.encode(into: &pending)
            pending.withUnsafeBytes { checksum.update(UnsafeRawBufferPointer(rebasing: $0[from...])) }
            if pending.count >= 1 << 20 { try flush() }
        }

        private var written: UInt64 = 0

        private func flush() throws {
            guard !pending.isEmpty else { return }
            try pending.withUnsafeBytes { try file.write($0) }
            written += UInt64(pending.count)
            pending.removeAll(keepingCapacity: true)
        }

        /// Calls `body` with every entry and its layout.
        func forEach(_ body: (Entry, Layout) throws -> Void) throws {
            try flush()
            var cursor = EntryCursor(
                descriptor: file.descriptor, path: file.path, firstLayout: firstLayout, end: written)
            while let (entry, layout) = try cursor.next() { try body(entry, layout) }
        }

        /// Writes the header and renames the index into place (a scratch file is just closed).
        func commit(header: Header) throws {
            try flush()
            guard let finalPath else { return }
            var header = header
            header.entriesChecksum = checksum.finish()
            let bytes = header.encode()
            do { try file.descriptor.write(bytes, at: 0) } catch {
                file.discard()
                throw ThumbpipeError(.ioError, "\(file.path): write failed: \(error)")
            }
            // Not synced: an index lost or torn by a crash fails its checks (or
            // its hashes) and costs one rebuild by encoding, never wrong bytes.
            try file.commit(to: finalPath, sync: false)
        }

        func discard() { file.discard() }
    }
}
