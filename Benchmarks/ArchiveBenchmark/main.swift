import Foundation
import ThumbpipeCore

// Writes or reads an items.archive of synthetic items and prints one JSON line:
// items, bytes, seconds, MB/s and this process's peak RSS. Run one direction
// per process (Benchmarks/archive.sh does) so each peak RSS is its own.
//
//   archive-benchmark write PATH ITEMS THUMBNAIL_BYTES
//   archive-benchmark read PATH

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
