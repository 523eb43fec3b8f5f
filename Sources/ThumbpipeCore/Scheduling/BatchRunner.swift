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
    /// Bytes of store files and archive written.
    public var writtenBytes: Int64
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

/// Runs a manifest through the pipeline on a bounded pool of worker threads:
/// each item's thumbnail and store are separate tasks, so they overlap; items
/// in flight are capped by ``RunOptions/window``; finished items go to the
/// archive in manifest order.
public final class BatchRunner: @unchecked Sendable {
    private let manifest: Manifest
    private let settings: PipelineSettings
    private let options: RunOptions
    private let thumbnailer: Thumbnailer
    private let store: ImageStore
    /// The per-stage timings of this run.
    public let timings = StageTimings()
    /// Called (from a worker) once per failed item, in completion order.
    public var onFailure: (@Sendable (FailureRecord) -> Void)?
    /// Called (from a worker) after each item, with the number done so far.
    public var onProgress: (@Sendable (Int) -> Void)?

    private enum TaskKind { case thumbnail, store }

    private struct Slot {
        var pending: Int
        var thumbnail: Result<(png: Data, header: SourceHeader), ItemFailure>?
        var storeFile: Result<TemporaryFile, ItemFailure>?
        var spans: [Stage: Double] = [:]
        var ready: ArchivedItem?
        var failure: FailureRecord?
        var bytesRead: Int64 = 0
    }

    private let condition = NSCondition()
    private var slots: [Int: Slot] = [:]
    private var cursorItem = 0
    private var cursorPhase = 0
    private var nextToWrite = 0
    private var fatal: (any Error)?
    private var failures: [FailureRecord] = []
    private var succeeded = 0
    private var sourceBytes: Int64 = 0
    private var writer: KeyedArchiveWriter?
    private var archiveSeconds = 0.0

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
    /// - Parameter cancel: checked between tasks; a set flag stops the run and leaves nothing partial.
    /// - Throws: ``ThumbpipeError`` for failures of the run itself (73/74), or
    ///   ``RunCancelled`` when `cancel` was set.
    public func run(cancel: CancellationFlag = CancellationFlag(), writeReport: (RunResult) throws -> Void = { _ in })
        throws -> RunResult
    {
        try Vips.start()
        let started = DispatchTime.now().uptimeNanoseconds
        try Self.prepareOutputFolder(options.outputFolder)
        let archivePath = options.outputFolder + "/" + settings.archive.fileName
        let writer = try KeyedArchiveWriter(
            path: archivePath, className: settings.archive.className, itemCount: manifest.items.count)
        self.writer = writer
        let done = DispatchGroup()
        for index in 0..<options.jobs {
            done.enter()
            let thread = Thread { [self] in
                work(cancel: cancel)
                done.leave()
            }
            thread.name = "thumbpipe-worker-\(index)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        done.wait()

        if cancel.signal != 0 || fatal != nil {
            for slot in slots.values {
                if case .success(let file) = slot.storeFile { file.discard() }
            }
            writer.abandon()
            if let fatal { throw fatal }
            throw RunCancelled(signal: cancel.signal)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        var result = RunResult(
            total: manifest.items.count, succeeded: succeeded,
            withoutImage: manifest.items.filter { $0.imagePath == nil }.count, failures: failures,
            seconds: seconds, sourceBytes: sourceBytes, writtenBytes: 0)
        timings.record([.archive: archiveSeconds])
        do {
            try writeReport(result)
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        TemporaryFile.syncFolder(options.outputFolder)
        result.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return result
    }

    // MARK: - Workers

    private func work(cancel: CancellationFlag) {
        condition.lock()
        defer { condition.unlock() }
        while cancel.signal == 0 && fatal == nil {
            guard cursorItem < manifest.items.count else { break }
            if cursorItem >= nextToWrite + options.window {
                condition.wait()
                continue
            }
            let index = cursorItem
            let item = manifest.items[index]
            guard let path = item.imagePath else {
                cursorItem += 1
                slots[index] = Slot(pending: 0, ready: archived(item, date: manifest.modificationDate, png: nil))
                drain()
                continue
            }
            let kind: TaskKind = cursorPhase == 0 ? .thumbnail : .store
            if cursorPhase == 0 {
                slots[index] = Slot(pending: 2)
                cursorPhase = 1
            } else {
                cursorPhase = 0
                cursorItem += 1
            }
            condition.unlock()
            var spans: [Stage: Double] = [:]
            var thumbnail: Result<(png: Data, header: SourceHeader), ItemFailure>? = nil
            var storeFile: Result<TemporaryFile, ItemFailure>? = nil
            var fatalError: (any Error)? = nil
            switch kind {
            case .thumbnail:
                thumbnail = Result { () throws(ItemFailure) in
                    let header = try thumbnailer.decode.header(of: path)
                    return (try thumbnailer.thumbnail(for: path, header: header, timings: &spans), header)
                }
            case .store:
                do {
                    storeFile = .success(try storeImage(path, key: item.itemKey, spans: &spans))
                } catch let failure as ItemFailure {
                    storeFile = .failure(failure)
                } catch {
                    fatalError = error
                }
            }
            condition.lock()
            if let fatalError, fatal == nil { fatal = fatalError }
            var slot = slots[index]!
            slot.pending -= 1
            slot.spans.merge(spans, uniquingKeysWith: +)
            if let thumbnail { slot.thumbnail = thumbnail }
            if let storeFile { slot.storeFile = storeFile }
            if kind == .store { slot.bytesRead += Self.fileSize(path) }
            slots[index] = slot
            if slot.pending == 0 && fatal == nil {
                condition.unlock()
                let finished = finish(item, slot)
                condition.lock()
                slots[index] = finished
                drain()
            }
        }
        condition.broadcast()
    }

    private func storeImage(_ path: String, key: String, spans: inout [Stage: Double]) throws -> TemporaryFile {
        var clock = StageClock()
        let header = try thumbnailer.decode.header(of: path)
        let decoded = try thumbnailer.decode.fullSize(path, header: header)
        let file = try store.writeTemporary(decoded, forKey: key)
        spans[.store, default: 0] += clock.lap()
        return file
    }

    /// Completes an item whose tasks are done: commits or drops its store file
    /// and builds its archive entry. Runs outside the lock (it flushes to disk).
    private func finish(_ item: ManifestItem, _ slot: Slot) -> Slot {
        var slot = slot
        var failure: ItemFailure? = nil
        var png: Data? = nil
        var header: SourceHeader? = nil
        switch slot.thumbnail {
        case .success(let value): (png, header) = (value.png, value.header)
        case .failure(let f): failure = f
        case nil: break
        }
        if failure == nil, case .failure(let f) = slot.storeFile { failure = f }
        if failure == nil, case .success(let file) = slot.storeFile {
            do {
                try file.commit(to: store.path(forKey: item.itemKey))
            } catch {
                failure = ItemFailure(.store, "\(error)")
                condition.lock()
                if fatal == nil { fatal = error }
                condition.unlock()
            }
        } else if case .success(let file) = slot.storeFile {
            file.discard()
        }
        if failure != nil {
            // An item without a usable image has no store file, not even an old one.
            store.delete(forKey: item.itemKey)
            png = nil
        }
        let date =
            item.dateCreated ?? header?.dateTimeOriginal ?? Self.modificationDate(item.imagePath!)
            ?? manifest.modificationDate
        slot.ready = archived(item, date: date, png: png)
        if let failure {
            slot.failure = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
        }
        return slot
    }

    private func archived(_ item: ManifestItem, date: Date, png: Data?) -> ArchivedItem {
        ArchivedItem(
            itemName: item.itemName, serialNumber: item.serialNumber, valueInDollars: item.valueInDollars,
            dateCreated: item.dateCreated ?? date, itemKey: item.itemKey, thumbnailData: png)
    }

    /// Appends every finished item at the head of the queue to the archive. Called with the lock held.
    private func drain() {
        while let slot = slots[nextToWrite], let ready = slot.ready {
            var clock = StageClock()
            do {
                try writer!.append(ready)
            } catch {
                if fatal == nil { fatal = error }
                return
            }
            archiveSeconds += clock.lap()
            let item = manifest.items[nextToWrite]
            if let failure = slot.failure {
                failures.append(failure)
                onFailure?(failure)
            } else if item.imagePath != nil {
                succeeded += 1
            }
            sourceBytes += slot.bytesRead
            if !slot.spans.isEmpty { timings.record(slot.spans) }
            slots[nextToWrite] = nil
            nextToWrite += 1
            onProgress?(nextToWrite)
            condition.broadcast()
        }
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
