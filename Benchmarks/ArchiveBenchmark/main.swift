import Foundation
import ThumbpipeCore

// Writes or reads an items.archive of synthetic items and prints one JSON line:
// items, bytes, seconds, MB/s and this process's peak RSS. Run one direction
// per process (Benchmarks/archive.sh does) so each peak RSS is its own.
//
//   archive-benchmark write PATH ITEMS THUMBNAIL_BYTES
//   archive-benchmark read PATH
//   archive-benchmark rebuild PATH ITEMS THUMBNAIL_BYTES EVERY CHANGED
//
// rebuild: items of which one in EVERY has a thumbnail (a collection mostly
// without photos), written once with an index, then written again after
// CHANGED items (spread evenly) got a new thumbnail: the second write copies
// the unchanged items from the first. Prints both writes and checks the
// rebuilt archive equals one written from scratch. Times are the writer's own,
// with and without the final fsync of the archive and its index (the disk's part).

func report(_ direction: String, items: Int, bytes: Int, seconds: Double) {
    let fields: [String: Any] = [
        "direction": direction, "items": items, "bytes": bytes, "seconds": (seconds * 1000).rounded() / 1000,
        "megabytesPerSecond": (Double(bytes) / 1e6 / seconds * 10).rounded() / 10,
        "peakRSSBytes": ProcessMemory.peakResidentBytes(),
    ]
    let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

let args = CommandLine.arguments
guard args.count >= 3 else {
    FileHandle.standardError.write(Data("usage: archive-benchmark write PATH ITEMS BYTES | read PATH\n".utf8))
    exit(64)
}
let path = args[2]
let start = Date()
do {
    switch args[1] {
    case "write":
        let count = Int(args[3])!
        let size = Int(args[4])!
        var thumbnail = [UInt8](repeating: 0, count: size)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for i in 0..<size {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            thumbnail[i] = UInt8(truncatingIfNeeded: state >> 33)
        }
        let writer = try KeyedArchiveWriter(path: path, className: "BNRItem", itemCount: count)
        for i in 0..<count {
            // Stamp the index so no two thumbnails are equal.
            withUnsafeBytes(of: UInt64(i)) { for (k, b) in $0.enumerated() { thumbnail[k] = b } }
            try writer.append(
                ArchivedItem(
                    itemName: "Item \(i)", serialNumber: "SN-\(i)", valueInDollars: Int32(i % 10_000),
                    dateCreated: Date(timeIntervalSinceReferenceDate: Double(i)), itemKey: "KEY-\(i)",
                    thumbnailData: Data(thumbnail)))
        }
        try writer.finish()
        report("write", items: count, bytes: fileSize(path), seconds: Date().timeIntervalSince(start))
    case "rebuild":
        let count = Int(args[3])!
        let size = Int(args[4])!
        let every = max(1, Int(args[5])!)
        let changed = Int(args[6])!
        let stride = max(1, count / max(1, changed))
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let indexPath = folder + "/bench-archive.index"
        func item(_ i: Int, generation: UInt8) -> ArchivedItem {
            var thumbnail: Data? = nil
            if i % every == 0 {
                var bytes = [UInt8](repeating: generation, count: size)
                withUnsafeBytes(of: UInt64(i)) { for (k, b) in $0.enumerated() where k < size { bytes[k] = b } }
                thumbnail = Data(bytes)
            }
            return ArchivedItem(
                itemName: "Item \(i)", serialNumber: "SN\(i)", valueInDollars: Int32(i % 1000),
                dateCreated: Date(timeIntervalSinceReferenceDate: Double(i)), itemKey: "k\(i)", thumbnailData: thumbnail
            )
        }
        /// Writes the archive; the time is the writer's alone (opening, appending,
        /// finishing), not the making of the items it is given.
        func write(to target: String, index: String?, changedGeneration: UInt8) throws -> (Double, Int, Double) {
            var nanoseconds: UInt64 = 0
            func timed(_ body: () throws -> Void) rethrows {
                let begin = DispatchTime.now().uptimeNanoseconds
                try body()
                nanoseconds += DispatchTime.now().uptimeNanoseconds - begin
            }
            var writer: KeyedArchiveWriter? = nil
            try timed {
                writer = try KeyedArchiveWriter(path: target, className: "BNRItem", itemCount: count, indexPath: index)
            }
            for i in 0..<count {
                let isChanged = changed > 0 && i % stride == 0 && (i / stride) < changed
                // A changed item gets a thumbnail of new bytes (and one if it had none).
                var next = item(i, generation: isChanged ? changedGeneration : 1)
                if isChanged && next.thumbnailData == nil { next.thumbnailData = Data([changedGeneration]) }
                try timed { try writer!.append(next) }
            }
            let appended = nanoseconds
            try timed { try writer!.finish() }
            return (Double(nanoseconds) / 1e9, writer!.copiedItems, writer!.syncSeconds)
        }
        unlink(path)
        unlink(indexPath)
        let (first, _, firstSync) = try write(to: path, index: indexPath, changedGeneration: 1)
        report("write", items: count, bytes: fileSize(path), seconds: first)
        report("write-before-fsync", items: count, bytes: fileSize(path), seconds: first - firstSync)
        let (second, copied, secondSync) = try write(to: path, index: indexPath, changedGeneration: 2)
        report("rebuild", items: count, bytes: fileSize(path), seconds: second)
        report("rebuild-before-fsync", items: count, bytes: fileSize(path), seconds: second - secondSync)
        let fresh = path + ".fresh"
        _ = try write(to: fresh, index: nil, changedGeneration: 2)
        let same = try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contentsOf: URL(fileURLWithPath: fresh))
        print(#"{"direction":"check","copiedItems":\#(copied),"identicalToFresh":\#(same)}"#)
        unlink(fresh)
        unlink(indexPath)
    case "read":
        let reader = try KeyedArchiveReader(path: path)
        var thumbnailBytes = 0
        for i in 0..<reader.count {
            let item = try reader.item(at: i)
            thumbnailBytes += item.thumbnailData?.count ?? 0
            precondition(item.itemKey == "KEY-\(i)", "item \(i) read back wrong")
        }
        precondition(thumbnailBytes > 0 || reader.count == 0)
        report("read", items: reader.count, bytes: fileSize(path), seconds: Date().timeIntervalSince(start))
    default:
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("archive-benchmark: \(error)\n".utf8))
    exit(1)
}
