import Foundation
import Synchronization
import ThumbpipeCore

// The benchmark's floor: thumbpipe's own store step alone (full decode, sRGB,
// upright, Q=50 JPEG, atomic write) over a list of images, in one process, with
// N worker threads, as `thumbpipe run --jobs N` would run it. Prints one JSON
// line: images, seconds, images/s, peak RSS.
//
//   store-floor LIST OUT_DIR JOBS

Allocator.configureForBatchWork()
let args = CommandLine.arguments
guard args.count == 4, let jobs = Int(args[3]) else {
    FileHandle.standardError.write(Data("usage: store-floor LIST OUT_DIR JOBS\n".utf8))
    exit(64)
}
let paths = try String(contentsOfFile: args[1], encoding: .utf8).split(separator: "\n").map(String.init)
let store = ImageStore(output: OutputFolder(args[2]), settings: PipelineSettings().store)
try FileManager.default.createDirectory(atPath: args[2], withIntermediateDirectories: true)
try LibVips.start()
let next = Atomic<Int>(0)
let failures = Atomic<Int>(0)
let start = Date()
let group = DispatchGroup()
for _ in 0..<jobs {
    group.enter()
    Thread {
        while true {
            let index = next.add(1, ordering: .relaxed).oldValue
            guard index < paths.count else { break }
            do {
                try store.write(source: paths[index], forKey: "floor-\(index)", limits: PipelineSettings().limits)
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
        group.leave()
    }.start()
}
group.wait()
let seconds = Date().timeIntervalSince(start)
let fields: [String: Any] = [
    "images": paths.count, "failures": failures.load(ordering: .relaxed), "seconds": seconds,
    "imagesPerSecond": Double(paths.count) / seconds, "peakRSSBytes": ProcessMemory.peakResidentBytes(),
]
print(String(decoding: try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]), as: UTF8.self))
