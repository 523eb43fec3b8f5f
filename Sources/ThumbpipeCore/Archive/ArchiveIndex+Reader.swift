import Foundation

/// Reading an index back: the previous run's entries, checked, and the bytes they prove.
extension ArchiveIndex {
    /// Reads a previous index alongside its archive, item by item, and hands
    /// out an item's archived bytes only when they hash as the index says.
    final class Reader {
        private let archive: FileDescriptor
        private let refWidth: Int
        private var entries: EntryCursor
        private var exhausted = false
        /// Where the next item's objects must start, and the archive's size: an
        /// entry that disagrees ends the copying there.
        private var expectedStart: UInt64
        private let archiveSize: UInt64
        /// A window of the previous archive, read ahead: items are read in order.
        private var window: [UInt8] = []
        private var windowStart: UInt64 = 0
        private static let windowSize = 1 << 20

        /// Opens the index at `indexPath` when it describes the archive now at
        /// `archivePath`, written for the same class and reference width, and is
        /// whole: as long as its item count says, no more items than the archive
        /// can hold, its entries matching their checksum. Else nil.
        /// - Parameter firstStart: where the first item's objects start (after the
        ///   prologue, the same for one class name).
        init?(
            indexPath: String, archivePath: String, className: String, refWidth: Int, firstLayout: Layout,
            firstStart: UInt64
        ) {
            guard let index = try? FileDescriptor.open(indexPath, O_RDONLY),
                let archive = try? FileDescriptor.open(archivePath, O_RDONLY),
                let stamp = (try? archive.info()).map(FileStamp.init),
                let archiveSize = ArchiveIndex.check(
                    index: index, className: className, refWidth: refWidth, archive: stamp)
            else { return nil }
            self.archive = archive
            self.refWidth = refWidth
            entries = EntryCursor(descriptor: index, path: indexPath, firstLayout: firstLayout, end: nil)
            expectedStart = firstStart
            self.archiveSize = archiveSize
        }

        /// The previous archive's next item, its layout and its size in bytes,
        /// or nil past the last one this index can vouch for.
        func next() -> (entry: Entry, layout: Layout, byteCount: UInt64)? {
            guard !exhausted, let (entry, layout) = try? entries.next() else {
                exhausted = true
                return nil
            }
            // Items lie end to end: each entry must start where the last one ended, inside the archive.
            let count = entry.byteCount(layout, refWidth: refWidth)
            guard entry.start == expectedStart, count <= archiveSize, entry.start <= archiveSize - count else {
                exhausted = true
                return nil
            }
            expectedStart += count
            return (entry, layout, count)
        }

        /// Calls `body` with the archived bytes of an item ``next()`` returned,
        /// when they hash as its entry says; returns false (and calls nothing)
        /// when they do not or cannot be read: the item is then encoded afresh.
        func withVerifiedBytes(
            of entry: Entry, count: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void
        ) rethrows -> Bool {
            let count = Int(count)
            let end = entry.start + UInt64(count)
            if entry.start < windowStart || end > windowStart + UInt64(window.count) {
                // Refill from this item on: a window, or the item whole when it is larger.
                let want = Int(min(UInt64(max(Self.windowSize, count)), archiveSize - entry.start))
                if window.count != want { window = [UInt8](repeating: 0, count: want) }
                let got = try? archive.read(into: &window, at: entry.start)
                windowStart = entry.start
                guard got == want else {
                    window = []
                    return false
                }
            }
            let from = Int(entry.start - windowStart)
            return try window.withUnsafeBytes { all in
                let bytes = UnsafeRawBufferPointer(rebasing: all[from..<from + count])
                guard entry.hashOfBytes(bytes) == entry.bytesHash else { return false }
                try body(bytes)
                return true
            }
        }
    }

    /// Checks an index's header against the archive it should describe, its
    /// size against its item count, that count against what the archive can
    /// hold, and its entries against their checksum (one sequential read).
    /// - Returns: the archive's size when the index is whole and describes it; else nil.
    static func check(index: FileDescriptor, className: String, refWidth: Int, archive: FileStamp) -> UInt64? {
        var header = [UInt8](repeating: 0, count: headerSize)
        let n = try? index.read(into: &header, at: 0)
        let expected = Header(itemCount: 0, refWidth: UInt8(refWidth), className: className, archive: archive).encode()
        // Magic, version, reference width, class and the archive's stamp must match.
        guard n == headerSize, header[0..<12] == expected[0..<12], header[20..<45] == expected[20..<45] else {
            return nil
        }
        func number(_ range: Range<Int>) -> UInt64 {
            range.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64(header[$1]) }
        }
        let itemCount = number(Header.itemCountBytes)
        let archiveSize = UInt64(max(0, archive.size))
        guard let info = try? index.info(), itemCount <= archiveSize / minimumItemBytes,
            UInt64(info.size) == UInt64(headerSize) + itemCount * UInt64(entrySize)
        else { return nil }
        var checksum = ContentHash.Streaming()
        var buffer = [UInt8](repeating: 0, count: 4096 * entrySize)
        var offset = UInt64(headerSize)
        while offset < UInt64(info.size) {
            let want = Int(min(UInt64(buffer.count), UInt64(info.size) - offset))
            let got = buffer.withUnsafeMutableBytes {
                try? index.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: offset)
            }
            guard got == want else { return nil }
            buffer.withUnsafeBytes { checksum.update(UnsafeRawBufferPointer(rebasing: $0[0..<want])) }
            offset += UInt64(want)
        }
        return checksum.finish() == number(Header.checksumBytes) ? archiveSize : nil
    }
}
