import Foundation
import Synchronization

/// How a run is carried out.
public struct RunOptions: Sendable {
    /// The output folder (created when missing).
    public var outputFolder: String
    /// Worker threads; each runs one libvips pipeline at a time.
    public var jobs: Int
    /// Items that may be in flight ahead of the archive writer; bounds memory.
    public var window: Int

    /// Creates options; `window` defaults to four items per job.
    public init(outputFolder: String, jobs: Int, window: Int? = nil) {
        self.outputFolder = outputFolder
        self.jobs = max(1, jobs)
        self.window = max(2, window ?? 4 * max(1, jobs))
    }
}

/// One item that could not be processed.
public struct FailureRecord: Sendable {
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
}

/// Set from a signal handler to stop a run cleanly.
public final class CancellationFlag: Sendable {
    private let flag = Atomic<Int32>(0)
    /// Creates an unset flag.
    public init() {}
    /// Requests a stop, recording the signal number.
    public func cancel(signal: Int32) { flag.store(signal, ordering: .relaxed) }
    /// The signal that stopped the run, or 0.
    public var signal: Int32 { flag.load(ordering: .relaxed) }
}

/// How one item's source is decoded.
public enum DecodePlan: String, Sendable {
    /// One streaming full decode makes the store file; the thumbnail is then
    /// made from that file with shrink-on-load. Its Q=50 JPEG is a fraction of
    /// the source's size, so the second, 1/8-scale decode is cheap, and the
    /// file is already sRGB and upright.
    case fromStore
    /// One full decode into memory feeds both the store and the thumbnail.
    case once
    /// A streaming full decode for the store, and a separate shrink-on-load
    /// decode of the source for the thumbnail (as a separate task, so the two overlap).
    case twice

    /// Sources larger than this (in pixels) are never held in memory whole.
    public static let inMemoryLimit = 30_000_000

    /// The plan that measured fastest for a source (see the README): from the
    /// store file for opaque sources, which needs one full decode and no
    /// in-memory copy; one in-memory decode for sources with alpha (the store
    /// JPEG has none to give) up to ``inMemoryLimit``; two streaming decodes
    /// otherwise. The store must be at least Q=50 to feed a thumbnail.
    /// `THUMBPIPE_DECODE=fromStore|once|twice` forces a plan where it is possible, for measuring.
    /// The plan `THUMBPIPE_DECODE` forces, read once rather than per item.
    private static let forcedPlan = ProcessInfo.processInfo.environment["THUMBPIPE_DECODE"].flatMap(DecodePlan.init)

    public static func choose(for header: SourceHeader, store: PipelineSettings.Store) -> DecodePlan {
        let fits = header.width * header.height <= inMemoryLimit
        let storeCanFeed = !header.hasAlpha && store.quality >= 0.5
        if let forced = forcedPlan {
            switch forced {
            case .fromStore where storeCanFeed, .twice: return forced
            case .once where fits: return forced
            default: break
            }
        }
        if storeCanFeed { return .fromStore }
        return fits ? .once : .twice
    }
}

/// Runs a manifest through the pipeline on a bounded pool of worker threads.
///
/// Each item starts as one task that reads the header and picks a
/// ``DecodePlan``: with `.once` it decodes once and writes both outputs; with
/// `.twice` it queues the store as a separate task, which the next free worker
/// takes at once, and makes the thumbnail, so the two overlap. Items in flight
/// are capped by ``RunOptions/window`` (memory does not grow with the
/// manifest); finished items go to the archive in manifest order.
public final class BatchRunner: @unchecked Sendable {
    private let manifest: Manifest
    private let settings: PipelineSettings
    private let options: RunOptions
    private let thumbnailer: Thumbnailer
    private let store: ImageStore
    /// The per-stage timings of this run.
    public let timings = StageTimings()
    /// Called (from a worker) once per failed item, in manifest order.
    public var onFailure: (@Sendable (FailureRecord) -> Void)?
    /// Called (from a worker) after each item, with the number done so far.
    public var onProgress: (@Sendable (Int) -> Void)?
    /// Where stage spans go, when a trace was asked for.
    public var trace: TraceWriter?
    /// The incremental plan: what to redo per item; nil redoes everything.
    public var plan: IncrementalPlan?
    /// Where finished items are recorded, so later runs (and a resumed one) can skip them.
    public var state: RunState?

    private struct Slot {
        var pending = 1
        var thumbnail: Result<Data, ItemFailure>?
        var header: SourceHeader?
        var storeFile: Result<TemporaryFile, ItemFailure>?
        var spans: [Stage: Double] = [:]
        var ready: ArchivedItem?
        var failure: FailureRecord?
        var bytesRead: Int64 = 0
        /// The date reused from the previous run, when the source was not opened.
        var reusedDate: Double?
        /// Whether the source's pixels were decoded.
        var decoded = false
        /// Whether any output was made in this run (so the state must record it).
        var redone = false
    }

    private let condition = NSCondition()
    private var slots: [Int: Slot] = [:]
    /// Store tasks queued by `.twice` items, taken before new items start.
    private var storeTasks: [(index: Int, header: SourceHeader)] = []
    private var cursor = 0
    private var nextToWrite = 0
    private var fatal: (any Error)?
    private var failures: [FailureRecord] = []
    private var succeeded = 0
    private var sourceBytes: Int64 = 0
    private var writer: KeyedArchiveWriter?
    private var archiveSeconds = 0.0
    private var decodedItems = 0

    /// Prepares a run of `manifest` with `settings`.
    public init(manifest: Manifest, settings: PipelineSettings, options: RunOptions) {
        self.manifest = manifest
        self.settings = settings
        self.options = options
        thumbnailer = Thumbnailer(settings: settings)
        store = ImageStore(folder: options.outputFolder, settings: settings.store)
    }

    /// Creates the output folder if needed and checks it can be written.
    /// - Throws: ``ThumbpipeError`` (73).
    public static func prepareOutputFolder(_ folder: String) throws {
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
        TemporaryFile.removeStale(in: folder)
        TemporaryFile.removeStale(in: folder + "/.thumbpipe")
    }

    /// Runs every item; writes store files, then the report, then `items.archive`.
    /// - Parameters:
    ///   - cancel: checked between tasks; a set flag stops the run and leaves nothing partial.
    ///   - writeReport: called with the result before the archive is renamed into place.
    /// - Throws: ``ThumbpipeError`` for failures of the run itself (73/74), or
    ///   ``RunCancelled`` when `cancel` was set.
    public func run(cancel: CancellationFlag = CancellationFlag(), writeReport: (RunResult) throws -> Void = { _ in })
        throws -> RunResult
    {
        try Vips.start()
        let started = Spans.now
        try Self.prepareOutputFolder(options.outputFolder)
        let archivePath = options.outputFolder + "/" + settings.archive.fileName
        let writer = try KeyedArchiveWriter(
            path: archivePath, className: settings.archive.className, itemCount: manifest.items.count)
        self.writer = writer
        let done = DispatchGroup()
        for worker in 0..<options.jobs {
            done.enter()
            let thread = Thread { [self] in
                work(worker: worker, cancel: cancel)
                done.leave()
            }
            thread.name = "thumbpipe-worker-\(worker + 1)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        done.wait()

        if cancel.signal != 0 || fatal != nil {
            for slot in slots.values {
                if case .success(let file) = slot.storeFile { file.discard() }
            }
            writer.abandon()
            trace?.abandon()
            try? state?.commit()
            if let fatal { throw fatal }
            throw RunCancelled(signal: cancel.signal)
        }
        if let plan {
            // Items gone from the manifest lose their store file, as deleteImageForKey: does.
            for key in plan.removed { store.delete(forKey: key) }
            try state?.remove(keys: plan.removed)
        }
        try state?.commit()
        var result = RunResult(
            total: manifest.items.count, succeeded: succeeded,
            withoutImage: manifest.items.filter { $0.imagePath == nil }.count, failures: failures,
            seconds: Double(Spans.now - started) / 1e9, sourceBytes: sourceBytes)
        result.decodedItems = decodedItems
        if let plan {
            result.classes = plan.counts
            result.timeSavedSeconds = plan.work.filter { $0.itemClass == .unchanged }.reduce(0) {
                $0 + ($1.previous?.seconds ?? 0)
            }
        } else {
            result.classes = [.new: manifest.items.count]
        }
        timings.record([.archive: archiveSeconds])
        do {
            try writeReport(result)
            try trace?.finish()
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        TemporaryFile.syncFolder(options.outputFolder)
        result.seconds = Double(Spans.now - started) / 1e9
        return result
    }

    // MARK: - Workers

    private enum Task {
        case item(Int)
        case store(Int, SourceHeader)
    }

    /// Takes the next task: a queued store first, then the next item if the window allows.
    /// Called with the lock held; nil when there is nothing left to start.
    private func nextTask(cancel: CancellationFlag) -> Task? {
        while cancel.signal == 0 && fatal == nil {
            if !storeTasks.isEmpty {
                let task = storeTasks.removeFirst()
                return .store(task.index, task.header)
            }
            guard cursor < manifest.items.count else {
                // Nothing new to start, but a running item may still queue its store.
                if slots.values.contains(where: { $0.pending > 0 }) {
                    condition.wait()
                    continue
                }
                return nil
            }
            if cursor >= nextToWrite + options.window {
                condition.wait()
                continue
            }
            let index = cursor
            cursor += 1
            slots[index] = Slot()
            return .item(index)
        }
        return nil
    }

    private func work(worker: Int, cancel: CancellationFlag) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        while let task = nextTask(cancel: cancel) {
            condition.unlock()
            var spans = Spans()
            let (index, update) = Watchdog.withDeadline(seconds: settings.limits.timeoutSeconds) {
                () -> (Int, (inout Slot) -> Void) in
                switch task {
                case .item(let i): return (i, runItem(i, spans: &spans))
                case .store(let i, let header): return (i, runStore(i, header: header, spans: &spans))
                }
            }
            let item = manifest.items[index]
            trace?.record(spans, worker: worker, itemKey: item.itemKey, line: item.line)
            condition.lock()
            var slot = slots[index]!
            update(&slot)
            slot.pending -= 1
            slot.spans.merge(spans.totals, uniquingKeysWith: +)
            slots[index] = slot
            condition.broadcast()
            if slot.pending == 0 && fatal == nil {
                condition.unlock()
                var finishSpans = Spans()
                let finished = finish(item, slot, work: plan?.work[index], spans: &finishSpans)
                trace?.record(finishSpans, worker: worker, itemKey: item.itemKey, line: item.line)
                condition.lock()
                slots[index] = finished
                drain()
            }
        }
    }

    /// The first task of an item: header, plan, and the work the plan gives this task.
    private func runItem(_ index: Int, spans: inout Spans) -> (inout Slot) -> Void {
        let item = manifest.items[index]
        guard let path = item.imagePath else {
            let ready = archived(item, date: manifest.modificationDate, png: nil)
            return { $0.ready = ready }
        }
        let work = plan?.work[index]
        let needsThumbnail = work?.needsThumbnail ?? true
        let needsStore = work?.needsStore ?? true
        // Whatever is not redone comes from the previous run.
        var reused: Result<Data, ItemFailure>? = nil
        if let previous = work?.previous, !needsThumbnail {
            if let failure = previous.failure {
                let parts = failure.split(separator: ":", maxSplits: 1).map(String.init)
                let stage = Stage(rawValue: parts[0]) ?? .decode
                reused = .failure(
                    ItemFailure(stage, parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : failure))
            } else if let png = try? state?.thumbnail(forKey: item.itemKey) {
                reused = .success(png)
            } else {
                reused = .failure(ItemFailure(.decode, "the previous run's thumbnail is missing from its state"))
            }
            if !needsStore {
                return { [reused] in
                    $0.thumbnail = reused
                    $0.reusedDate = previous.dateCreated
                }
            }
        }
        let header: SourceHeader
        do {
            header = try spans.measure(.decode) { () throws(ItemFailure) in try thumbnailer.decode.header(of: path) }
        } catch {
            return { $0.thumbnail = .failure(error) }
        }
        let bytes = Self.fileSize(path)
        let freshPlan = DecodePlan.choose(for: header, store: settings.store)
        if !needsStore || !needsThumbnail {
            return redoOne(
                item, path: path, header: header, plan: freshPlan, thumbnail: !needsStore, reused: reused, spans: &spans
            )
        }
        switch freshPlan {
        case .fromStore:
            let storeFile = writeStore(item, spans: &spans) { try thumbnailer.decode.fullSize(path, header: header) }
            let thumbnail = storeFile.flatMap { thumbnailOfStoreFile($0.path, spans: &spans) }
            return outcome(header: header, thumbnail: thumbnail, storeFile: storeFile, bytes: bytes)
        case .twice:
            condition.lock()
            storeTasks.append((index, header))
            slots[index]!.pending += 1
            condition.broadcast()
            condition.unlock()
            let thumbnail = Result { () throws(ItemFailure) in
                try thumbnailer.thumbnail(for: path, header: header, spans: &spans)
            }
            return outcome(header: header, thumbnail: thumbnail, storeFile: nil, bytes: bytes)
        case .once:
            let decoded = Result { () throws(ItemFailure) in
                try spans.measure(.decode) { () throws(ItemFailure) in
                    try thumbnailer.decode.fullSize(path, header: header, inMemory: true)
                }
            }
            let thumbnail = decoded.flatMap { decoded in
                Result { () throws(ItemFailure) in try thumbnailer.thumbnail(from: decoded, spans: &spans) }
            }
            let storeFile = decoded.flatMap { decoded in writeStore(item, spans: &spans) { decoded } }
            return outcome(header: header, thumbnail: thumbnail, storeFile: storeFile, bytes: bytes)
        }
    }

    /// Writes an item's store file from a decoded image, timed as the store
    /// stage. An item failure fails the item; anything else (a failed write)
    /// stops the run.
    private func writeStore(_ item: ManifestItem, spans: inout Spans, _ decode: () throws -> DecodedImage)
        -> Result<TemporaryFile, ItemFailure>
    {
        do {
            return .success(try spans.measure(.store) { try store.writeTemporary(try decode(), forKey: item.itemKey) })
        } catch let failure as ItemFailure {
            return .failure(failure)
        } catch {
            setFatal(error)
            return .failure(ItemFailure(.store, "\(error)"))
        }
    }

    /// A thumbnail made from a store file (kept or just written): its header, then shrink-on-load.
    private func thumbnailOfStoreFile(_ file: String, spans: inout Spans) -> Result<Data, ItemFailure> {
        Result { () throws(ItemFailure) in
            let stored = try spans.measure(.decode) { () throws(ItemFailure) in try thumbnailer.decode.header(of: file)
            }
            return try thumbnailer.thumbnail(for: file, header: stored, spans: &spans)
        }
    }

    /// What a task hands back to its item's slot.
    private func outcome(
        header: SourceHeader, thumbnail: Result<Data, ItemFailure>?, storeFile: Result<TemporaryFile, ItemFailure>?,
        bytes: Int64, decoded: Bool = true
    ) -> (inout Slot) -> Void {
        return {
            $0.header = header
            if let thumbnail { $0.thumbnail = thumbnail }
            if let storeFile { $0.storeFile = storeFile }
            $0.bytesRead += bytes
            $0.decoded = decoded
            $0.redone = true
        }
    }

    /// Redoes one output of an item, the way a fresh run would make it, so the
    /// archive stays byte-identical to one: a thumbnail that a fresh run makes
    /// from the store file is made from the store file, kept or new.
    private func redoOne(
        _ item: ManifestItem, path: String, header: SourceHeader, plan: DecodePlan, thumbnail redoThumbnail: Bool,
        reused: Result<Data, ItemFailure>?, spans: inout Spans
    ) -> (inout Slot) -> Void {
        var thumbnail = reused
        var storeFile: Result<TemporaryFile, ItemFailure>? = nil
        if redoThumbnail {
            switch plan {
            case .fromStore:
                thumbnail = thumbnailOfStoreFile(store.path(forKey: item.itemKey), spans: &spans)
            case .once:
                thumbnail = Result { () throws(ItemFailure) in
                    let decoded = try spans.measure(.decode) { () throws(ItemFailure) in
                        try thumbnailer.decode.fullSize(path, header: header, inMemory: true)
                    }
                    return try thumbnailer.thumbnail(from: decoded, spans: &spans)
                }
            case .twice:
                thumbnail = Result { () throws(ItemFailure) in
                    try thumbnailer.thumbnail(for: path, header: header, spans: &spans)
                }
            }
        } else {
            let written = writeStore(item, spans: &spans) { try thumbnailer.decode.fullSize(path, header: header) }
            storeFile = written
            // This thumbnail is made from the store file: it follows the new one.
            if plan == .fromStore, case .success(let file) = written {
                thumbnail = thumbnailOfStoreFile(file.path, spans: &spans)
            }
        }
        // A thumbnail made from the kept store file decodes no source pixels.
        let decodedSource = !(redoThumbnail && plan == .fromStore)
        return outcome(
            header: header, thumbnail: thumbnail, storeFile: storeFile, bytes: decodedSource ? Self.fileSize(path) : 0,
            decoded: decodedSource)
    }

    /// The store task of a `.twice` item: a streaming full decode and the JPEG.
    private func runStore(_ index: Int, header: SourceHeader, spans: inout Spans) -> (inout Slot) -> Void {
        let item = manifest.items[index]
        let storeFile = writeStore(item, spans: &spans) {
            try thumbnailer.decode.fullSize(item.imagePath!, header: header)
        }
        return { $0.storeFile = storeFile }
    }

    private func setFatal(_ error: any Error) {
        condition.lock()
        if fatal == nil { fatal = error }
        condition.broadcast()
        condition.unlock()
    }

    /// Completes an item whose tasks are done: commits or drops its store file
    /// and builds its archive entry. Runs outside the lock (it flushes to disk).
    private func finish(_ item: ManifestItem, _ slot: Slot, work: ItemWork?, spans: inout Spans) -> Slot {
        var slot = slot
        var failure: ItemFailure? = nil
        var png: Data? = nil
        switch slot.thumbnail {
        case .success(let data): png = data
        case .failure(let f): failure = f
        case nil: break
        }
        if failure == nil, case .failure(let f) = slot.storeFile { failure = f }
        if failure == nil, case .success(let file) = slot.storeFile {
            do {
                try spans.measure(.store) { try file.commit(to: store.path(forKey: item.itemKey)) }
            } catch {
                failure = ItemFailure(.store, "\(error)")
                setFatal(error)
            }
        } else if case .success(let file) = slot.storeFile {
            file.discard()
        }
        if failure != nil && item.imagePath != nil {
            // An item without a usable image has no store file, not even an old one.
            store.delete(forKey: item.itemKey)
            png = nil
        }
        if slot.ready == nil {
            let date =
                item.dateCreated ?? slot.reusedDate.map { Date(timeIntervalSince1970: $0) } ?? slot.header?
                .dateTimeOriginal
                ?? item.imagePath.flatMap(Self.modificationDate) ?? manifest.modificationDate
            slot.ready = archived(item, date: date, png: png)
        }
        if let state, slot.decoded || slot.redone || item.imagePath == nil {
            do {
                try spans.measure(.state) {
                    try record(item, slot: slot, work: work, failure: failure, png: png, in: state)
                }
            } catch {
                setFatal(error)
            }
        }
        if let failure {
            slot.failure = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
        }
        slot.spans.merge(spans.totals, uniquingKeysWith: +)
        return slot
    }

    private func archived(_ item: ManifestItem, date: Date, png: Data?) -> ArchivedItem {
        ArchivedItem(
            itemName: item.itemName, serialNumber: item.serialNumber, valueInDollars: item.valueInDollars,
            dateCreated: item.dateCreated ?? date, itemKey: item.itemKey, thumbnailData: png)
    }

    /// Appends every finished item at the head of the queue to the archive. Called with the lock held.
    private func drain() {
        while let slot = slots[nextToWrite], let ready = slot.ready, slot.pending == 0 {
            let start = Spans.now
            do {
                try writer!.append(ready)
            } catch {
                if fatal == nil { fatal = error }
                return
            }
            archiveSeconds += Double(Spans.now - start) / 1e9
            let item = manifest.items[nextToWrite]
            if let failure = slot.failure {
                failures.append(failure)
                onFailure?(failure)
            } else if item.imagePath != nil {
                succeeded += 1
            }
            sourceBytes += slot.bytesRead
            if slot.decoded { decodedItems += 1 }
            if !slot.spans.isEmpty { timings.record(slot.spans) }
            slots[nextToWrite] = nil
            nextToWrite += 1
            onProgress?(nextToWrite)
            condition.broadcast()
        }
    }

    /// Saves what this run did for an item to the state.
    private func record(
        _ item: ManifestItem, slot: Slot, work: ItemWork?, failure: ItemFailure?, png: Data?, in state: RunState
    ) throws {
        let previous = work?.previous
        let path = item.imagePath ?? ""
        let source = item.imagePath.flatMap { FileStamp(path: $0) }
        let storePath = store.path(forKey: item.itemKey)
        let stored = failure == nil ? FileStamp(path: storePath) : nil
        let storeRedone = slot.storeFile != nil
        let record = ItemRecord(
            itemKey: item.itemKey, sourcePath: path, sourceSize: source?.size ?? -1,
            sourceModified: source?.modified ?? -1,
            // Hashing reads the whole source: skip it when the plan has already
            // established that the source is the one the state records.
            sourceHash: (work?.sourceUnchanged == true
                ? previous?.sourceHash : item.imagePath.flatMap(ContentHash.file))
                ?? "",
            thumbnailFingerprint: plan?.thumbnailFingerprint ?? IncrementalPlan.thumbnailFingerprint(settings),
            storeFingerprint: plan?.storeFingerprint ?? IncrementalPlan.storeFingerprint(settings),
            dateCreated: slot.ready?.dateCreated.timeIntervalSince1970, storeSize: stored?.size ?? -1,
            storeModified: stored?.modified ?? -1,
            storeHash: stored == nil ? "" : (storeRedone ? ContentHash.file(storePath) : previous?.storeHash) ?? "",
            failure: failure.map { "\($0.stage.rawValue): \($0.message)" },
            seconds: slot.spans.values.reduce(0, +))
        try state.save(record, thumbnail: png)
    }

    static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
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
