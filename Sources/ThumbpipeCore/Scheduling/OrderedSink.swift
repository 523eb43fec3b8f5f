import Foundation
import Synchronization

/// One finished item, ready for the archive: what the slot that ran it found.
/// Filled in by the slot that made it, handed to the sink as a value.
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
    /// Bytes of the store file the run put in place for the item (0 when none was written).
    var storeBytesWritten: Int64 = 0
    var decoded = false
    var hasImage: Bool
    /// What the item's source was, for the report's slowest items and samples.
    var profile: ItemProfile?
    /// What happened to it, for `--log`.
    var log: ItemLogEntry?
    /// Its date is a guess (the file's time).
    var dateGuess: DateGuess?
    /// Its date is a wall-clock time read in the run's zone (``ItemLedger/timeZone``).
    var zoneAssumed = false
    /// The class the plan gave it, when its recorded thumbnail was missing or
    /// damaged and it was made again (counted as changed).
    var remadeFrom: ItemClass?
    /// The plan called it changed by its source, and its job found only its
    /// metadata changed (``ItemLedger/keepingImage()``): counted as metadata.
    var imageKept = false

    init(index: Int, archived: ArchivedItem, record: ItemRecord? = nil, thumbnail: Data? = nil, hasImage: Bool) {
        self.index = index
        self.archived = archived
        self.record = record
        self.thumbnail = thumbnail
        self.hasImage = hasImage
    }
}

/// Hands out manifest positions to the slots, no further ahead of the
/// archive than the window allows, so memory does not grow with the manifest.
/// Light items (no photo: an archive record and nothing else) go out in runs
/// of up to ``lightRun``, so a million of them cost a thousand hand-overs.
/// Among the last window's photos, the heaviest (largest file) goes first:
/// the run then ends on small items, and no slot sits idle while the other
/// finishes one large photo.
// @unchecked: every mutable field is read and written under `condition`.
final class Dispenser: @unchecked Sendable {
    private let condition = NSCondition()
    private let count: Int
    private let window: Int
    private let isLight: @Sendable (Int) -> Bool
    private let weight: @Sendable (Int) -> Int
    /// The lowest position not handed out yet; those above it that were are in `taken`.
    private var cursor = 0
    private var taken = Set<Int>()
    private var written = 0
    private var stopped = false
    static let lightRun = 1024

    init(
        count: Int, window: Int, isLight: @escaping @Sendable (Int) -> Bool = { _ in false },
        weight: @escaping @Sendable (Int) -> Int = { _ in 0 }
    ) {
        self.count = count
        self.window = window
        self.isLight = isLight
        self.weight = weight
    }

    /// What ``take(waiting:)`` hands out.
    enum Handout {
        case positions(Range<Int>)
        /// The window is full (only when not waiting).
        case full
        /// Every position was handed out, or the run stopped.
        case finished
    }

    /// The next positions, or, without `waiting`, `.full` instead of waiting
    /// for the window: a slot that still holds an unfinished item must finish
    /// it first, or the window might wait for that very item.
    func take(waiting: Bool) -> Handout {
        condition.lock()
        defer { condition.unlock() }
        while !stopped && cursor < count && cursor >= written + window {
            if !waiting { return .full }
            condition.wait()
        }
        guard !stopped, cursor < count else { return .finished }
        let start = cursor
        if isLight(start) {
            var end = start + 1
            while end < count && end - start < Self.lightRun && isLight(end) && !taken.contains(end) { end += 1 }
            hand(start..<end)
            return .positions(start..<end)
        }
        // In order until the last window's worth; then the heaviest photo left
        // (the earliest of equals). Earlier, picking by weight would leave the
        // lightest, lowest position for last, and the window could not move on
        // until it was done.
        guard count - start <= window else {
            hand(start..<(start + 1))
            return .positions(start..<(start + 1))
        }
        var chosen = start
        var heaviest = weight(start)
        for position in (start + 1)..<min(count, written + window) where !taken.contains(position) {
            guard !isLight(position) else { continue }
            let w = weight(position)
            if w > heaviest {
                chosen = position
                heaviest = w
            }
        }
        hand(chosen..<(chosen + 1))
        return .positions(chosen..<(chosen + 1))
    }

    /// Marks `range` handed out and moves the cursor past everything that is.
    private func hand(_ range: Range<Int>) {
        taken.formUnion(range)
        while taken.remove(cursor) != nil { cursor += 1 }
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
        /// Runs of finished items by the position of their first.
        var waiting: [Int: [FinishedItem]] = [:]
        var next = 0
        var draining = false
    }

    /// What the drained items add up to.
    struct Totals {
        var succeeded = 0
        var failures: [FailureRecord] = []
        var warnings: [WarningRecord] = []
        var sourceBytes: Int64 = 0
        var storeBytesWritten: Int64 = 0
        var decodedItems = 0
        var archiveSeconds = 0.0
        var profiles = ProfileCollector()
        var dateGuesses: [DateGuess] = []
        var dateGuessCount = 0
        var zoneAssumedCount = 0

        /// How an item was dated: a guess (the first 1,000 listed), or in the run's zone.
        mutating func countDate(of item: FinishedItem) {
            if item.zoneAssumed { zoneAssumedCount += 1 }
            if let guess = item.dateGuess {
                dateGuessCount += 1
                if dateGuesses.count < 1000 { dateGuesses.append(guess) }
            }
        }
        /// Items made again for a missing or damaged recorded thumbnail, by the class the plan gave them.
        var remade: [ItemClass: Int] = [:]
        /// Items planned as changed by their source whose image data was found the same.
        var imageKept = 0
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
    /// Finishes the archive.
    /// - Returns: the hash of its bytes (``KeyedArchiveWriter/contentHash``).
    func finishArchive() throws -> String {
        try writer.withLock {
            try $0.finish(); return $0.contentHash
        }
    }

    /// How many items (and bytes) the archive copied from the previous one.
    var archiveCopies: (items: Int, bytes: UInt64) {
        writer.withLock { ($0.copiedItems, $0.copiedBytes) }
    }

    /// Drops the unfinished archive.
    func abandonArchive() { writer.withLock { $0.abandon() } }

    /// Takes a run of finished items (consecutive positions, as ``Dispenser``
    /// handed them out); writes them, and every item they unblock, when their turn comes.
    /// - Throws: the archive's or the state's write failure (the run stops).
    func deliver(_ items: [FinishedItem]) throws {
        guard let first = items.first else { return }
        var batch = buffer.withLock { buffer -> [FinishedItem] in
            buffer.waiting[first.index] = items
            guard !buffer.draining else { return [] }
            let ready = Self.takeReady(&buffer)
            buffer.draining = !ready.isEmpty
            return ready
        }
        while !batch.isEmpty {
            do {
                try self.write(batch)
            } catch {
                buffer.withLock { $0.draining = false }
                throw error
            }
            dispenser.written(upTo: batch[batch.count - 1].index + 1)
            hooks.onProgress?(batch[batch.count - 1].index + 1)
            batch = buffer.withLock { buffer in
                let more = Self.takeReady(&buffer)
                if more.isEmpty { buffer.draining = false }
                return more
            }
        }
    }

    private static func takeReady(_ buffer: inout Buffer) -> [FinishedItem] {
        var ready: [FinishedItem] = []
        while let run = buffer.waiting.removeValue(forKey: buffer.next) {
            ready += run
            buffer.next += run.count
        }
        return ready
    }

    /// Appends items to the archive and the state, in manifest order; adds them
    /// to the totals under one lock.
    private func write(_ items: [FinishedItem]) throws {
        let start = Spans.now
        var stateNanoseconds: UInt64 = 0
        // Items with a photo are timed one by one; the state writes of items
        // without one are timed together.
        var lightStateNanoseconds: UInt64 = 0
        var lightStateItems = 0
        var timed: [[Stage: Double]] = []
        try writer.withLock { writer in
            for item in items {
                try writer.append(item.archived)
                var spans = item.spans
                if let state, item.forget || item.record != nil {
                    let stateStart = Spans.now
                    if item.forget {
                        try state.remove(keys: [item.archived.itemKey])
                    } else if let record = item.record {
                        try state.save(record, thumbnail: item.thumbnail)
                    }
                    let took = Spans.now - stateStart
                    stateNanoseconds += took
                    if item.hasImage {
                        spans[.state, default: 0] += Double(took) / 1e9
                    } else {
                        lightStateNanoseconds += took
                        lightStateItems += 1
                    }
                }
                if !spans.isEmpty { timed.append(spans) }
            }
        }
        let archiveSeconds = Double(Spans.now - start - stateNanoseconds) / 1e9
        for spans in timed { timings.record(spans) }
        timings.record(.state, seconds: Double(lightStateNanoseconds) / 1e9, items: lightStateItems)
        totalsBox.withLock { totals in
            totals.archiveSeconds += archiveSeconds
            for item in items {
                if let failure = item.failure {
                    totals.failures.append(failure)
                } else if item.hasImage {
                    totals.succeeded += 1
                }
                if let warning = item.warning { totals.warnings.append(warning) }
                totals.sourceBytes += item.bytesRead
                totals.storeBytesWritten += item.storeBytesWritten
                if item.decoded { totals.decodedItems += 1 }
                if let profile = item.profile { totals.profiles.add(profile) }
                if let from = item.remadeFrom { totals.remade[from, default: 0] += 1 }
                if item.imageKept { totals.imageKept += 1 }
                totals.countDate(of: item)
            }
        }
        for item in items {
            if let failure = item.failure { hooks.onFailure?(failure) }
            if let warning = item.warning { hooks.onWarning?(warning) }
            if let log = item.log { hooks.onItem?(log) }
        }
    }
}
