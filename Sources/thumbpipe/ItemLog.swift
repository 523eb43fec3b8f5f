import Foundation
import Synchronization
import ThumbpipeCore

/// `run --log FILE`: one JSON line per item, written as items reach the archive.
final class ItemLog: Sendable {
    private let descriptor: FileDescriptor
    private let target: OutputTarget
    /// The first write that failed: the run ends with 74 after its archive.
    private let failure = Mutex<ThumbpipeError?>(nil)

    init(target: OutputTarget) throws {
        self.target = target
        descriptor = try target.open()
    }

    func write(_ entry: ItemLogEntry) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(entry), failure.withLock({ $0 == nil }) else { return }
        do {
            try (data + Data("\n".utf8)).withUnsafeBytes { try OutputTarget.writeAll(descriptor, $0, to: target.path) }
        } catch let error as ThumbpipeError {
            failure.withLock { $0 = ThumbpipeError(.ioError, "--log \(error.message)") }
        } catch {}
    }

    /// - Throws: ``ThumbpipeError`` (74) when any line could not be written.
    func finish() throws {
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
