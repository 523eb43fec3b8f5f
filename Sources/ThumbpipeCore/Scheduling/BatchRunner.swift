import Foundation
import Synchronization

/// How a run is carried out.
public struct RunOptions: Sendable {
    /// The output folder (created when missing).
    public var outputFolder: String
    /// Worker processes; each runs one item at a time.
    public var jobs: Int
    /// Items that may be in flight ahead of the archive writer; bounds memory.
    public var window: Int
    /// The `thumbpipe` executable the workers run (`thumbpipe __worker`).
    public var workerExecutable: String
    /// The output folder's lock, when the caller already holds it (else the run takes it).
    public var lock: OutputLock?

    /// Creates options; `window` defaults to four items per job, the worker
    /// executable to this process's own.
    public init(
        outputFolder: String, jobs: Int, window: Int? = nil, workerExecutable: String? = nil, lock: OutputLock? = nil
    ) {
        self.lock = lock
        self.outputFolder = outputFolder
        self.jobs = max(1, jobs)
        self.window = max(2, window ?? 4 * max(1, jobs))
        self.workerExecutable = workerExecutable ?? Self.currentExecutable
    }

    /// This process's executable, as the kernel knows it.
    public static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}

/// One item that could not be processed.
public struct FailureRecord: Sendable, Codable {
    /// The manifest line of the item.
    public var line: Int
    /// The item's key.
    public var itemKey: String
    /// The item's name.
    public var itemName: String
    /// The image path as the manifest wrote it.
    public var source: String
    /// The stage that failed.
    public var stage: Stage
    /// Why.
    public var message: String

    public init(line: Int, itemKey: String, itemName: String, source: String, stage: Stage, message: String) {
        self.line = line
        self.itemKey = itemKey
        self.itemName = itemName
        self.source = source
        self.stage = stage
        self.message = message
    }
}

/// One item that was made, but whose decoders warned (corrupt data, bad CRCs…).
public struct WarningRecord: Sendable, Codable {
    /// The item's key.
    public var itemKey: String
    /// The manifest line of the item.
    public var line: Int
    /// The image path as the manifest wrote it.
    public var source: String
    /// The decoders' messages, each once.
    public var messages: [String]

    public init(itemKey: String, line: Int, source: String, messages: [String]) {
        self.itemKey = itemKey
        self.line = line
        self.source = source
        self.messages = messages
    }
}

/// What a finished run did.
public struct RunResult: Sendable {
    /// Items in the manifest.
    public var total: Int
    /// Items whose thumbnail and store file were written.
    public var succeeded: Int
    /// Items without an image in the manifest.
    public var withoutImage: Int
    /// Items whose image failed, in manifest order.
    public var failures: [FailureRecord]
    /// Items made despite decoder warnings, in manifest order.
    public var warnings: [WarningRecord] = []
    /// Wall time of the run in seconds.
    public var seconds: Double
    /// Source bytes read for thumbnails and stores.
    public var sourceBytes: Int64
    /// Items per class against the previous run (all `new` on a first run).
    public var classes: [ItemClass: Int] = [:]
    /// Items whose source was decoded in this run.
    public var decodedItems = 0
    /// What the reused items took when they were made, in seconds.
    public var timeSavedSeconds = 0.0
    /// Items whose archive bytes were copied from the previous archive, and those bytes.
    public var archiveItemsCopied = 0
    public var archiveBytesCopied: UInt64 = 0
    /// Peak resident memory of the parent process.
    public var parentPeakRSSBytes = 0
    /// Peak resident memory of the largest worker.
    public var largestWorkerPeakRSSBytes = 0
    /// The workers' peak resident memory, added over the worker slots: a bound
    /// on what they can have held at one time.
    public var workersPeakRSSBytes = 0
    /// The highest resident memory of the parent and its workers together,
    /// sampled every 50 ms during the run.
    public var peakRSSBytes = 0
    /// The same in proportional set size (shared pages, like libvips's, counted
    /// once rather than once per process), sampled every second.
    public var peakPSSBytes = 0
    /// When the run started.
    public var startTime = Date()
    /// Items archived and memory held, about once a second.
    public var timeline: [TimelinePoint] = []
    /// The 20 slowest decoded items, slowest first.
    public var slowest: [ItemProfile] = []
    /// An even sample of at most 2,000 decoded items' times and sizes.
    public var sample: [ItemSample] = []
    /// Items whose date is the file's modification time (a guess), the first 1,000.
    public var datesFromFileTime: [DateGuess] = []
    /// How many items' dates are guesses.
    public var datesFromFileTimeCount = 0
}

/// Callbacks from a run, called in manifest order from the thread that writes the archive.
public struct RunHooks: Sendable {
    /// Once per failed item.
    public var onFailure: (@Sendable (FailureRecord) -> Void)?
    /// Once per item made with decoder warnings.
    public var onWarning: (@Sendable (WarningRecord) -> Void)?
    /// As items are archived, with the number archived so far.
    public var onProgress: (@Sendable (Int) -> Void)?
    /// Once per item, in manifest order: what happened to it (for `--log`).
    public var onItem: (@Sendable (ItemLogEntry) -> Void)?

    /// Creates hooks.
    public init(
        onFailure: (@Sendable (FailureRecord) -> Void)? = nil, onWarning: (@Sendable (WarningRecord) -> Void)? = nil,
        onProgress: (@Sendable (Int) -> Void)? = nil, onItem: (@Sendable (ItemLogEntry) -> Void)? = nil
    ) {
        self.onFailure = onFailure
        self.onWarning = onWarning
        self.onProgress = onProgress
        self.onItem = onItem
    }
}

/// Set from a signal handler to stop a run at once.
public final class CancellationFlag: Sendable {
    private let flag = Atomic<Int32>(0)
    private let handlers = Mutex<[@Sendable () -> Void]>([])
    /// Creates an unset flag.
    public init() {}
    /// Requests a stop, recording the signal number, and runs the registered handlers.
    public func cancel(signal: Int32) {
        flag.store(signal, ordering: .relaxed)
        for handler in handlers.withLock({ $0 }) { handler() }
    }
    /// The signal that stopped the run, or 0.
    public var signal: Int32 { flag.load(ordering: .relaxed) }
    /// Runs `handler` on cancel (at once if already cancelled).
    func onCancel(_ handler: @escaping @Sendable () -> Void) {
        handlers.withLock { $0.append(handler) }
        if signal != 0 { handler() }
    }
}

/// Runs a manifest through the pipeline: `jobs` slots, each driving one
/// worker process through ``Supervisor``, an ``OrderedSink`` that writes the
/// archive and the state in manifest order, and the incremental plan deciding
/// per item what is redone.
public final class BatchRunner: Sendable {
    private let manifest: Manifest
    private let settings: PipelineSettings
    private let options: RunOptions
    private let plan: IncrementalPlan?
    private let state: RunState?
    private let trace: TraceWriter?
    private let hooks: RunHooks
    private let store: ImageStore
    /// The per-stage timings of this run.
    public let timings = StageTimings()

    /// Prepares a run of `manifest` with `settings`.
    /// - Parameters:
    ///   - plan: what to redo per item; nil redoes everything.
    ///   - state: where finished items are recorded, so later runs (and a resumed one) can skip them.
    ///   - trace: where stage spans go, when a trace was asked for.
    public init(
        manifest: Manifest, settings: PipelineSettings, options: RunOptions, plan: IncrementalPlan? = nil,
        state: RunState? = nil, trace: TraceWriter? = nil, hooks: RunHooks = RunHooks()
    ) {
        self.manifest = manifest
        self.settings = settings
        self.options = options
        self.plan = plan
        self.state = state
        self.trace = trace
        self.hooks = hooks
        store = ImageStore(folder: options.outputFolder, settings: settings.store)
    }

    /// Creates the output folder if needed, checks it can be written, takes its
    /// lock, and removes the temporaries of runs that no longer hold it.
    /// - Returns: the lock, held until it is released.
    /// - Throws: ``ThumbpipeError`` (73), also when another thumbpipe holds the folder.
    public static func prepareOutputFolder(_ folder: String) throws -> OutputLock {
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: folder + "/.thumbpipe", withIntermediateDirectories: true)
        } catch {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): cannot create output folder: \(ThumbpipeError.describe(error))")
        }
        guard access(folder, W_OK) == 0 else {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): output folder is not writable: \(ThumbpipeError.errnoText())")
        }
        let lock = try OutputLock(folder: folder)
        // The lock is ours: every temporary here belongs to a run that is gone.
        TemporaryFile.removeStale(in: folder)
        TemporaryFile.removeStale(in: folder + "/.thumbpipe")
        return lock
    }

    /// Runs every item; writes store files, then the report, then `items.archive`.
    /// - Parameters:
    ///   - cancel: a set flag kills the workers at once and leaves nothing partial.
    ///   - writeReport: called with the result before the archive is renamed into place.
    /// - Throws: ``ThumbpipeError`` for failures of the run itself (71/73/74), or
    ///   ``RunCancelled`` when `cancel` was set.
    public func run(cancel: CancellationFlag = CancellationFlag(), writeReport: (RunResult) throws -> Void = { _ in })
        throws -> RunResult
    {
        let started = Spans.now
        let startTime = Date()
        let lock = try options.lock ?? Self.prepareOutputFolder(options.outputFolder)
        let archivePath = options.outputFolder + "/" + settings.archive.fileName
        let fingerprint = state == nil ? nil : IncrementalPlan.archiveFingerprint(manifest, settings)
        if let unchanged = try runUnchanged(
            started: started, startTime: startTime, archivePath: archivePath, fingerprint: fingerprint,
            writeReport: writeReport)
        {
            withExtendedLifetime(lock) {}
            return unchanged
        }
        let supervisor = try Supervisor(
            executable: options.workerExecutable, settings: settings, outputFolder: options.outputFolder)
        defer { supervisor.reapExiting() }
        let items = manifest.items
        let planned = plan?.work
        let dispenser = Dispenser(
            count: items.count, window: options.window, isLight: { !items.hasImage(at: $0) },
            weight: { position in
                // A photo's file size stands for its cost; nothing to redo costs nothing.
                if let item = planned?[position], !item.needsThumbnail && !item.needsStore { return 0 }
                return items[position].imagePath.map { Int(ItemJobRunner.fileSize($0)) } ?? 0
            })
        let sink = OrderedSink(
            writer: try KeyedArchiveWriter(
                path: archivePath, className: settings.archive.className, itemCount: manifest.items.count,
                indexPath: state == nil ? nil : ArchiveIndex.path(in: options.outputFolder)),
            state: state, timings: timings, hooks: hooks, dispenser: dispenser)
        let fatal = Mutex<(any Error)?>(nil)
        cancel.onCancel {
            dispenser.stop()
            supervisor.cancel()
        }
        let sampler = MemorySampler(workers: { supervisor.workerPids }, progress: { sink.archivedCount })
        let done = DispatchGroup()
        for slot in 0..<options.jobs {
            done.enter()
            let thread = Thread { [self] in
                defer { done.leave() }
                do {
                    try work(slot: slot, dispenser: dispenser, sink: sink, supervisor: supervisor)
                } catch {
                    fatal.withLock { if $0 == nil { $0 = error } }
                    dispenser.stop()
                }
            }
            thread.name = "thumbpipe-slot-\(slot + 1)"
            thread.start()
        }
        done.wait()
        let (sampledPeak, timeline) = sampler.stop()
        supervisor.shutDown()

        let failure: (any Error)? = cancel.signal != 0 ? RunCancelled(signal: cancel.signal) : fatal.withLock { $0 }
        if let error = failure {
            sink.abandonArchive()
            trace?.abandon()
            try? state?.commit()
            TemporaryFile.removeStale(in: options.outputFolder)
            throw error
        }
        if let plan {
            // Items gone from the manifest lose their store file, as deleteImageForKey: does.
            for key in plan.removed { store.delete(forKey: key) }
            try state?.remove(keys: plan.removed)
        }
        try state?.commit()
        if state != nil { OutputGuard.clearClaims(in: options.outputFolder) }
        let totals = sink.totals
        var result = RunResult(
            total: manifest.items.count, succeeded: totals.succeeded,
            withoutImage: manifest.items.count - manifest.items.withImageCount, failures: totals.failures,
            warnings: totals.warnings, seconds: Double(Spans.now - started) / 1e9, sourceBytes: totals.sourceBytes)
        result.decodedItems = totals.decodedItems
        result.startTime = startTime
        result.timeline = timeline
        result.slowest = totals.profiles.slowest
        result.datesFromFileTime = totals.dateGuesses
        result.datesFromFileTimeCount = totals.dateGuessCount
        result.sample = totals.profiles.sample
        result.parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        result.workersPeakRSSBytes = supervisor.workersPeakRSSBytes
        result.largestWorkerPeakRSSBytes = supervisor.largestWorkerPeakRSSBytes
        result.peakRSSBytes = max(sampledPeak, result.parentPeakRSSBytes, result.largestWorkerPeakRSSBytes)
        result.peakPSSBytes = sampler.proportionalPeak
        if let plan {
            result.classes = plan.counts
            result.timeSavedSeconds = plan.savedSeconds
        } else {
            result.classes = [.new: manifest.items.count]
        }
        timings.record([.archive: totals.archiveSeconds])
        (result.archiveItemsCopied, result.archiveBytesCopied) = sink.archiveCopies
        do {
            try writeReport(result)
            try trace?.finish()
            try sink.finishArchive()
        } catch {
            sink.abandonArchive()
            throw error
        }
        if let state, let fingerprint, let stamp = FileStamp(path: archivePath) {
            // What the next run compares to know it has nothing to write.
            try state.setMeta("archiveFingerprint", fingerprint)
            try state.setMeta("archiveStamp", "\(stamp.size):\(stamp.modified)")
            try state.commit()
        }
        TemporaryFile.syncFolder(options.outputFolder)
        result.seconds = Double(Spans.now - started) / 1e9
        withExtendedLifetime(lock) {}
        return result
    }

    /// When nothing changed (every item unchanged, none removed, the same items
    /// in the same order with the same fields, and the archive on disk the one
    /// the last run wrote), a run writes nothing but its report: no worker, no
    /// archive. Failures of the source are replayed from the state.
    private func runUnchanged(
        started: UInt64, startTime: Date, archivePath: String, fingerprint: String?,
        writeReport: (RunResult) throws -> Void
    ) throws -> RunResult? {
        guard let plan, let state, let fingerprint, plan.nothingChanged,
            try state.meta("archiveFingerprint") == fingerprint, let stamp = FileStamp(path: archivePath),
            try state.meta("archiveStamp") == "\(stamp.size):\(stamp.modified)"
        else { return nil }
        var failures: [FailureRecord] = []
        for position in plan.keptFailures {
            let item = manifest.items[position]
            guard let recorded = try state.record(forKey: item.itemKey)?.failure else { continue }
            let failure = ItemFailure(recorded: recorded)
            let record = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
            failures.append(record)
            hooks.onFailure?(record)
        }
        let withoutImage = manifest.items.count - manifest.items.withImageCount
        let succeeded = manifest.items.withImageCount - failures.count
        hooks.onProgress?(manifest.items.count)
        var result = RunResult(
            total: manifest.items.count, succeeded: succeeded, withoutImage: withoutImage, failures: failures,
            seconds: Double(Spans.now - started) / 1e9, sourceBytes: 0)
        result.classes = plan.counts
        result.timeSavedSeconds = plan.savedSeconds
        result.startTime = startTime
        result.parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        result.peakRSSBytes = result.parentPeakRSSBytes
        try writeReport(result)
        result.seconds = Double(Spans.now - started) / 1e9
        return result
    }

    // MARK: - One item

    /// One slot's loop: items from the dispenser to the sink, with the next
    /// item's job already queued at the worker while the slot waits for the
    /// one before (so the worker goes from item to item without waiting for
    /// the parent's bookkeeping).
    private func work(slot: Int, dispenser: Dispenser, sink: OrderedSink, supervisor: Supervisor) throws {
        var inFlight: PendingItem? = nil
        func finishInFlight() throws {
            guard let pending = inFlight else { return }
            inFlight = nil
            try sink.deliver([try complete(pending, slot: slot, supervisor: supervisor)])
        }
        while true {
            var handout = dispenser.take(waiting: inFlight == nil)
            if case .full = handout {
                try finishInFlight()
                handout = dispenser.take(waiting: true)
            }
            guard case .positions(let positions) = handout else { break }
            var finished: [FinishedItem] = []
            for position in positions {
                switch try prepare(position, slot: slot, supervisor: supervisor) {
                case .finished(let item):
                    finished.append(item)
                case .pending(let pending):
                    try finishInFlight()
                    inFlight = pending
                }
            }
            if !finished.isEmpty { try sink.deliver(finished) }
        }
        try finishInFlight()
    }

    /// An item whose job is with a worker (or that needs none), and what
    /// finishing it needs.
    private struct PendingItem {
        var index: Int
        var item: ManifestItem
        var work: ItemWork?
        var previous: ItemRecord?
        var reused: Result<Data, ItemFailure>?
        var job: ItemJob
        var ticket: Supervisor.Ticket?
    }

    private enum Prepared {
        case finished(FinishedItem)
        case pending(PendingItem)
    }

    /// Makes one item ready for the archive, in two halves around its job.
    /// Everything before the job: reuses what the plan keeps; items without a
    /// photo, or with nothing to redo, finish here; the rest have their job submitted.
    private func prepare(_ index: Int, slot: Int, supervisor: Supervisor) throws -> Prepared {
        let item = manifest.items[index]
        let work = plan?.work[index]
        guard let path = item.imagePath else {
            // A migrated item without a store file keeps its archived thumbnail.
            var kept: Data? = nil
            if case .thumbnail(let png) = item.carried { kept = png }
            let archived = archived(item, date: item.dateCreated ?? manifest.modificationDate, png: kept)
            // An item without a photo costs its archive record: the state is written only when it changed.
            let record =
                state == nil || work?.itemClass == .unchanged
                ? nil : record(item, work: work, previous: nil, outcome: nil, failure: nil, date: archived.dateCreated)
            let finished = FinishedItem(index: index, archived: archived, record: record, hasImage: false)
            if hooks.onItem != nil {
                finished.log = ItemLogEntry(
                    item, action: work?.itemClass.rawValue ?? "new", reason: work?.reason ?? "no image")
            }
            return .finished(finished)
        }
        let needsThumbnail = work?.needsThumbnail ?? true
        let needsStore = work?.needsStore ?? true
        // The previous run's record: looked up here, one item at a time, not kept by the plan.
        let previous = work?.itemClass == .new || work == nil ? nil : try state?.record(forKey: item.itemKey)
        // Whatever is not redone comes from the previous run.
        var reused: Result<Data, ItemFailure>? = nil
        if let previous, !needsThumbnail {
            reused = reusedThumbnail(item, previous: previous)
            if !needsStore {
                let date = item.dateCreated ?? previous.dateCreated.map { Date(timeIntervalSince1970: $0) }
                return .finished(
                    finish(
                        item, index: index, work: work, previous: previous, thumbnail: reused, outcome: nil,
                        date: date ?? manifest.modificationDate))
            }
        }
        // A migrated item's store file is carried over, never encoded again.
        let carried = item.carried == .storeFile
        let job = ItemJob(
            index: index, itemKey: item.itemKey, source: path, makeThumbnail: needsThumbnail,
            makeStore: needsStore && !carried, temporaryPath: TemporaryFile.name(in: options.outputFolder),
            hashSource: work?.sourceUnchanged != true)
        let ticket = job.makeThumbnail || job.makeStore ? try supervisor.submit(job, slot: slot) : nil
        return .pending(
            PendingItem(
                index: index, item: item, work: work, previous: previous, reused: reused, job: job, ticket: ticket))
    }

    /// Everything after an item's job: puts its store file in place, makes
    /// the archive entry and the state record.
    private func complete(_ pending: PendingItem, slot: Int, supervisor: Supervisor) throws -> FinishedItem {
        let (index, item, work, previous, reused) = (
            pending.index, pending.item, pending.work, pending.previous, pending.reused
        )
        let job = pending.job
        let path = job.source
        let needsStore = work?.needsStore ?? true
        let carried = item.carried == .storeFile
        var outcome = ItemOutcome()
        if let ticket = pending.ticket { outcome = try supervisor.outcome(of: ticket, slot: slot) }
        if let message = outcome.writeError { throw ThumbpipeError(.ioError, message) }
        trace?.record(
            outcome.spans, worker: slot, itemKey: item.itemKey, line: item.line,
            source: outcome.header.map {
                (
                    URL(fileURLWithPath: path).lastPathComponent, $0.format,
                    Double($0.width) * Double($0.height) / 1e6, outcome.bytesRead
                )
            })
        var thumbnail = outcome.thumbnail.map { Result<Data, ItemFailure>.success($0) } ?? reused
        if let failure = outcome.failure { thumbnail = .failure(failure) }
        if outcome.storeWritten {
            if case .success = thumbnail {
                var spans = Spans()
                if state != nil { OutputGuard.claim(item.itemKey, in: options.outputFolder) }
                try spans.measure(.write) {
                    try TemporaryFile.commitClosed(job.temporaryPath, to: store.path(forKey: item.itemKey))
                }
                outcome.spans.append(spans)
            } else {
                unlink(job.temporaryPath)
                outcome.storeWritten = false
            }
        }
        if carried && needsStore && outcome.failure == nil {
            var spans = Spans()
            let target = store.path(forKey: item.itemKey)
            try spans.measure(.write) {
                if state != nil { OutputGuard.claim(item.itemKey, in: options.outputFolder) }
                _ = try Merge.place(path, at: target)
            }
            outcome.spans.append(spans)
            outcome.storeWritten = true
            outcome.storeHash = ContentHash.file(target)
            if outcome.sourceStamp == nil { outcome.sourceStamp = FileStamp(path: path) }
            if outcome.sourceHash == nil { outcome.sourceHash = outcome.storeHash }
        }
        // The manifest's date, else the photo's EXIF date, else (a guess, listed in the
        // report) the file's modification time. An EXIF date in the future is not trusted.
        var date = item.dateCreated ?? manifest.modificationDate
        var guessed: String? = nil
        if item.dateCreated == nil {
            let exif = outcome.header?.dateTimeOriginal
            if let exif, exif <= Date().addingTimeInterval(86_400) {
                date = exif
            } else {
                date = Self.modificationDate(path) ?? manifest.modificationDate
                guessed =
                    exif.map { "EXIF date \(ISO8601Format.string($0)) is in the future; the file's time was used" }
                    ?? "no EXIF date; the file's time was used"
            }
        }
        let finished = finish(
            item, index: index, work: work, previous: previous, thumbnail: thumbnail, outcome: outcome, date: date)
        if let guessed, finished.failure == nil {
            finished.dateGuess = DateGuess(
                itemKey: item.itemKey, line: item.line, source: item.image ?? "", reason: guessed)
        }
        return finished
    }

    /// The previous run's thumbnail (or failure) of an item whose thumbnail is not redone.
    private func reusedThumbnail(_ item: ManifestItem, previous: ItemRecord) -> Result<Data, ItemFailure> {
        if let recorded = previous.failure { return .failure(ItemFailure(recorded: recorded)) }
        if let png = try? state?.thumbnail(forKey: item.itemKey) { return .success(png) }
        return .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state"))
    }

    /// The archive entry, failure, warnings and state record of an item.
    private func finish(
        _ item: ManifestItem, index: Int, work: ItemWork?, previous: ItemRecord?,
        thumbnail: Result<Data, ItemFailure>?, outcome: ItemOutcome?, date: Date
    ) -> FinishedItem {
        var png: Data? = nil
        var failure: ItemFailure? = nil
        switch thumbnail {
        case .success(let data): png = data
        case .failure(let f): failure = f
        case nil: break
        }
        if failure != nil {
            // An item without a usable image has no store file, not even an old one
            // (but a migrated store file in place is the user's, and stays).
            let target = store.path(forKey: item.itemKey)
            let inPlace =
                item.carried == .storeFile
                && item.imagePath.flatMap(OutputGuard.realPath) == OutputGuard.realPath(target)
            if !inPlace { store.delete(forKey: item.itemKey) }
            png = nil
        }
        let archived = archived(item, date: date, png: png)
        let finished = FinishedItem(index: index, archived: archived, thumbnail: png, hasImage: true)
        if hooks.onItem != nil {
            finished.log = ItemLogEntry(
                item, action: failure == nil ? work?.itemClass.rawValue ?? "new" : "failed",
                reason: failure?.recorded ?? work?.reason ?? "new",
                milliseconds: outcome.map { StageTimings.round($0.spans.totals.values.reduce(0, +) * 1000) } ?? 0)
        }
        if let failure {
            finished.failure = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
        }
        if let outcome {
            if failure == nil && !outcome.warnings.isEmpty {
                finished.warning = WarningRecord(
                    itemKey: item.itemKey, line: item.line, source: item.image ?? "", messages: outcome.warnings)
            }
            finished.spans = outcome.spans.totals
            finished.bytesRead = outcome.bytesRead
            finished.decoded = outcome.decoded
            if outcome.decoded, let header = outcome.header {
                let stages = Dictionary(
                    uniqueKeysWithValues: finished.spans.map { ($0.key.rawValue, StageTimings.round($0.value)) })
                finished.profile = ItemProfile(
                    itemKey: item.itemKey, itemName: item.itemName, line: item.line, position: index,
                    source: item.image ?? "",
                    format: header.format, width: header.width, height: header.height, bytes: outcome.bytesRead,
                    stages: stages, seconds: StageTimings.round(finished.spans.values.reduce(0, +)), thumbnail: png)
            }
            if state != nil {
                if failure?.transient == true {
                    finished.forget = true
                } else {
                    finished.record = record(
                        item, work: work, previous: previous, outcome: outcome, failure: failure,
                        date: archived.dateCreated)
                }
            }
        }
        return finished
    }

    private func archived(_ item: ManifestItem, date: Date, png: Data?) -> ArchivedItem {
        ArchivedItem(
            itemName: item.itemName, serialNumber: item.serialNumber, valueInDollars: item.valueInDollars,
            dateCreated: item.dateCreated ?? date, itemKey: item.itemKey, thumbnailData: png)
    }

    /// What the state records of an item this run redid.
    private func record(
        _ item: ManifestItem, work: ItemWork?, previous: ItemRecord?, outcome: ItemOutcome?, failure: ItemFailure?,
        date: Date
    ) -> ItemRecord {
        let source = outcome?.sourceStamp ?? item.imagePath.flatMap { FileStamp(path: $0) }
        let stored = failure == nil ? FileStamp(path: store.path(forKey: item.itemKey)) : nil
        let storeHash = outcome?.storeWritten == true ? outcome?.storeHash : previous?.storeHash
        return ItemRecord(
            itemKey: item.itemKey, sourcePath: item.imagePath ?? "", sourceSize: source?.size ?? -1,
            sourceModified: source?.modified ?? -1,
            sourceHash: outcome?.sourceHash ?? (work?.sourceUnchanged == true ? previous?.sourceHash : nil) ?? "",
            thumbnailFingerprint: failure != nil
                ? IncrementalPlan.failureFingerprint(settings)
                : plan?.thumbnailFingerprint ?? IncrementalPlan.thumbnailFingerprint(settings),
            storeFingerprint: plan?.storeFingerprint ?? IncrementalPlan.storeFingerprint(settings),
            dateCreated: date.timeIntervalSince1970, storeSize: stored?.size ?? -1,
            storeModified: stored?.modified ?? -1, storeHash: stored == nil ? "" : storeHash ?? "",
            failure: failure?.recorded,
            seconds: outcome?.spans.totals.values.reduce(0, +) ?? 0)
    }

    static func modificationDate(_ path: String) -> Date? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
    }
}

/// A run stopped by SIGINT or SIGTERM; nothing partial was left.
public struct RunCancelled: Error, Sendable {
    /// The signal that stopped it.
    public var signal: Int32
    /// 128 + the signal, as shells report it (130 for SIGINT, 143 for SIGTERM).
    public var exitStatus: Int32 { 128 + signal }
}
