import Foundation
import Synchronization

/// One finished item, ready for the archive: what the slot that ran it found.
struct FinishedItem: Sendable {
    var index: Int
    var archived: ArchivedItem
    var failure: FailureRecord?
    var warning: WarningRecord?
    /// What to save to the state (nil when nothing changed for this item).
    var record: ItemRecord?
    /// Drop the item from the state (a transient failure: tried again next run).
    var forget = false
    var thumbnail: Data?
    var spans: [Stage: Double] = [:]
    var bytesRead: Int64 = 0
    var decoded = false
    var hasImage: Bool
    /// What the item's source was, for the report's slowest items and samples.
    var profile: ItemProfile?
    /// What happened to it, for `--log`.
    var log: ItemLogEntry?
    /// Its date is a guess (the file's time).
    var dateGuess: DateGuess?
}

/// Hands out manifest positions to the slots, no further ahead of the
/// archive than the window allows, so memory does not grow with the manifest.
final class Dispenser: @unchecked Sendable {
    private let condition = NSCondition()
    private let count: Int
    private let window: Int
    private var cursor = 0
    private var written = 0
    private var stopped = false

    init(count: Int, window: Int) {
        self.count = count
        self.window = window
    }

    /// The next position to work on, waiting while the window is full; nil when
    /// every position was handed out or the run stopped.
    func next() -> Int? {
        condition.lock()
        defer { condition.unlock() }
        while !stopped && cursor < count && cursor >= written + window { condition.wait() }
        guard !stopped, cursor < count else { return nil }
        cursor += 1
        return cursor - 1
    }

    /// The archive holds every position below `position`.
    func written(upTo position: Int) {
        condition.lock()
        written = position
        condition.broadcast()
        condition.unlock()
    }

    /// Hands out nothing more.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}

/// The reorder buffer in front of the archive: finished items arrive in any
/// order and leave in manifest order, to the archive, the state and the
/// counts. Only one thread drains at a time, and it writes outside the lock.
final class OrderedSink: Sendable {
    private struct Buffer {
        var waiting: [Int: FinishedItem] = [:]
        var next = 0
        var draining = false
    }

    /// What the drained items add up to.
    struct Totals {
        var succeeded = 0
        var failures: [FailureRecord] = []
        var warnings: [WarningRecord] = []
        var sourceBytes: Int64 = 0
        var decodedItems = 0
        var archiveSeconds = 0.0
        var profiles = ProfileCollector()
        var dateGuesses: [DateGuess] = []
        var dateGuessCount = 0
    }

    private let buffer = Mutex(Buffer())
    private let totalsBox = Mutex(Totals())
    /// Taken only by the one draining thread (and at the end): never contended.
    private let writer: Mutex<KeyedArchiveWriter>
    private let state: RunState?
    private let timings: StageTimings
    private let hooks: RunHooks
    private let dispenser: Dispenser

    init(
        writer: sending KeyedArchiveWriter, state: RunState?, timings: StageTimings, hooks: RunHooks,
        dispenser: Dispenser
    ) {
        self.writer = Mutex(writer)
        self.state = state
        self.timings = timings
        self.hooks = hooks
        self.dispenser = dispenser
    }

    var totals: Totals { totalsBox.withLock { $0 } }

    /// Items archived so far.
    var archivedCount: Int { buffer.withLock { $0.next } }

    /// Writes the archive's trailer and renames it into place.
    func finishArchive() throws { try writer.withLock { try $0.finish() } }

    /// Drops the unfinished archive.
    func abandonArchive() { writer.withLock { $0.abandon() } }

    /// Takes a finished item; writes it, and every item it unblocks, when its turn comes.
    /// - Throws: the archive's or the state's write failure (the run stops).
    func deliver(_ item: FinishedItem) throws {
        var batch = buffer.withLock { buffer -> [FinishedItem] in
            buffer.waiting[item.index] = item
            guard !buffer.draining else { return [] }
            let ready = Self.takeReady(&buffer)
            buffer.draining = !ready.isEmpty
            return ready
        }
        while !batch.isEmpty {
            do {
                for finished in batch { try write(finished) }
            } catch {
                buffer.withLock { $0.draining = false }
                throw error
            }
            dispenser.written(upTo: batch[batch.count - 1].index + 1)
            batch = buffer.withLock { buffer in
                let more = Self.takeReady(&buffer)
                if more.isEmpty { buffer.draining = false }
                return more
            }
        }
    }

    private static func takeReady(_ buffer: inout Buffer) -> [FinishedItem] {
        var ready: [FinishedItem] = []
        while let item = buffer.waiting.removeValue(forKey: buffer.next) {
            ready.append(item)
            buffer.next += 1
        }
        return ready
    }

    /// Appends one item to the archive and the state, in manifest order.
    private func write(_ item: FinishedItem) throws {
        let start = Spans.now
        try writer.withLock { try $0.append(item.archived) }
        let archiveSeconds = Double(Spans.now - start) / 1e9
        var spans = item.spans
        if let state, item.forget || item.record != nil {
            let stateStart = Spans.now
            if item.forget {
                try state.remove(keys: [item.archived.itemKey])
            } else if let record = item.record {
                try state.save(record, thumbnail: item.thumbnail)
            }
            spans[.state, default: 0] += Double(Spans.now - stateStart) / 1e9
        }
        if !spans.isEmpty { timings.record(spans) }
        totalsBox.withLock { totals in
            totals.archiveSeconds += archiveSeconds
            if let failure = item.failure {
                totals.failures.append(failure)
            } else if item.hasImage {
                totals.succeeded += 1
            }
            if let warning = item.warning { totals.warnings.append(warning) }
            totals.sourceBytes += item.bytesRead
            if item.decoded { totals.decodedItems += 1 }
            if let profile = item.profile { totals.profiles.add(profile) }
            if let guess = item.dateGuess {
                totals.dateGuessCount += 1
                if totals.dateGuesses.count < 1000 { totals.dateGuesses.append(guess) }
            }
        }
        if let failure = item.failure { hooks.onFailure?(failure) }
        if let warning = item.warning { hooks.onWarning?(warning) }
        if let log = item.log { hooks.onItem?(log) }
        hooks.onProgress?(item.index + 1)
    }
}
