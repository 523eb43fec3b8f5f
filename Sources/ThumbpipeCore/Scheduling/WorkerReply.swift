import CSandbox
import Foundation

/// A source the parent opened for a worker: the descriptor it passes (read-only,
/// never blocking on a FIFO), and the facts the parent takes itself, before the
/// worker reads a byte: its stamp, size and, when asked, content hash.
final class OpenedSource: Sendable {
    let descriptor: FileDescriptor
    let stamp: FileStamp
    let size: Int64
    let hash: String?

    /// Opens `path` for a job.
    /// - Throws: ``ItemFailure`` at `.decode`, as the worker once said it: file not
    ///   found, a directory, not a regular file, empty, over `limits.maxFileBytes`.
    init(_ path: String, limits: PipelineSettings.Limits, hash: Bool) throws(ItemFailure) {
        let fd: FileDescriptor
        let info: FileInfo
        do {
            fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY)
            info = try fd.info()
        } catch {
            throw ItemFailure(.decode, error == .noEntry ? "file not found" : "cannot open: \(error)")
        }
        var failure: ItemFailure?
        if info.kind == .directory {
            failure = ItemFailure(.decode, "is a directory, not an image")
        } else if info.kind != .regular {
            failure = ItemFailure(.decode, "not a regular file")
        } else if info.size == 0 {
            failure = ItemFailure(.decode, "empty file (0 bytes)")
        } else if limits.maxFileBytes > 0 && info.size > limits.maxFileBytes {
            failure = ItemFailure(
                .decode, "file is \(info.size) bytes, over limits.maxFileBytes (\(limits.maxFileBytes))")
        }
        if let failure { throw failure }
        descriptor = fd
        stamp = FileStamp(info)
        size = info.size
        self.hash = hash ? ContentHash.descriptor(fd) : nil
    }
}

/// What the parent checks of a worker's reply before it takes any of it: it
/// vouches for every byte it commits. A worker's claims (hashes, stamps, sizes)
/// are dropped; the thumbnail is encoded here from pixels of exactly the
/// canvas's size; the store file must come as a sealed memory file holding a
/// well-formed baseline JPEG of the expected size (``StoreCheck``), hashed here.
struct WorkerReply: Sendable {
    let settings: PipelineSettings
    let encode = PNGEncode()

    /// The largest store file taken from a worker: 4 bytes a pixel of the largest image allowed, at least 64 MiB.
    var maxStoreBytes: Int {
        max(64 << 20, min(settings.limits.maxPixels, Int.max / 8) * 4)
    }

    /// Turns a worker's reply into an outcome the parent vouches for; a reply
    /// that fails a check fails its item, naming the check.
    func vouch(for outcome: inout ItemOutcome, job: ItemJob, source: OpenedSource, store: FileDescriptor?) {
        outcome.dropParentFields()
        outcome.sourceStamp = source.stamp
        if outcome.decoded || outcome.imageUnchanged {
            outcome.bytesRead = source.size
            if job.hashSource { outcome.sourceHash = source.hash }
        }
        let pixels = outcome.thumbnailPixels
        outcome.thumbnailPixels = nil
        let storeClaimed = outcome.storeWritten
        outcome.storeWritten = false
        guard outcome.failure == nil, outcome.writeError == nil else { return }
        do throws(ItemFailure) {
            // Its image data as recorded: nothing made, whatever came with the claim dropped.
            if outcome.imageUnchanged {
                guard job.recordedImageHash != nil else { throw refused("an unchanged image it was not asked about") }
                return
            }
            if job.makeThumbnail {
                outcome.thumbnail = try thumbnail(pixels, spans: &outcome.spans)
            }
            if job.makeStore, storeClaimed {
                guard let header = outcome.header else { throw refused("a store file without a header") }
                let bytes = try storeBytes(store, header: header)
                outcome.store = bytes
                outcome.storeHash = bytes.withUnsafeBytes { ContentHash.hex(bytes: $0) }
                outcome.storeWritten = true
            }
        } catch {
            outcome.thumbnail = nil
            outcome.store = nil
            outcome.storeWritten = false
            outcome.failure = error
        }
    }

    private func refused(_ what: String) -> ItemFailure {
        ItemFailure(.sandbox, "the worker's reply failed the parent's check: \(what)")
    }

    /// The thumbnail PNG, encoded here from the worker's pixels.
    private func thumbnail(_ pixels: Data?, spans: inout Spans) throws(ItemFailure) -> Data {
        let width = settings.thumbnail.pixelWidth
        let height = settings.thumbnail.pixelHeight
        guard let pixels else { throw refused("no thumbnail") }
        guard pixels.count == width * height * 4 else {
            throw refused("a thumbnail of \(pixels.count) bytes, not \(width)×\(height) RGBA (\(width * height * 4))")
        }
        let buffer = RGBABuffer(width: width, height: height, pixels: [UInt8](pixels))
        return try spans.measure(.encode) { () throws(ItemFailure) in try encode.apply(buffer) }
    }

    /// The store file's bytes, from a sealed memory file, checked.
    private func storeBytes(_ store: FileDescriptor?, header: SourceHeader) throws(ItemFailure) -> Data {
        guard let store else { throw refused("a store file claimed, none attached") }
        guard store.isSealed else { throw refused("a store file not sealed against change") }
        guard let info = try? store.info(), info.kind == .regular else {
            throw refused("a store file that is not a memory file")
        }
        guard info.size > 0, info.size <= maxStoreBytes else {
            throw refused("a store file of \(info.size) bytes")
        }
        guard let bytes = store.mappedSealedContents(count: Int(info.size)) else {
            throw refused("a store file that could not be mapped")
        }
        let expected =
            settings.store.orientation == .rotate ? header.uprightSize : (width: header.width, height: header.height)
        let problem = bytes.withUnsafeBytes {
            StoreCheck.problem(
                $0, width: expected.width, height: expected.height, metadata: settings.store.keepMetadata)
        }
        if let problem { throw refused("the store file \(problem)") }
        return bytes
    }
}

extension ItemJobRunner {
    /// Runs `job` in this process as a worker and its parent do between them:
    /// the source opened and passed by descriptor, the store encoded into a
    /// sealed memory file, the reply checked (``WorkerReply``). For tests and
    /// tools; a run's jobs go to confined workers.
    public func runHere(_ job: ItemJob) -> ItemOutcome {
        let source: OpenedSource
        do {
            source = try OpenedSource(job.source, limits: settings.limits, hash: job.hashSource)
        } catch {
            return ItemOutcome(failure: error)
        }
        let storeFile = job.makeStore ? FileDescriptor.memoryFile() : nil
        var outcome = run(job, descriptor: source.descriptor, storeFile: storeFile)
        if let storeFile, !outcome.storeWritten || (try? storeFile.seal()) == nil {
            WorkerReply(settings: settings).vouch(for: &outcome, job: job, source: source, store: nil)
            return outcome
        }
        WorkerReply(settings: settings).vouch(for: &outcome, job: job, source: source, store: storeFile)
        return outcome
    }
}
