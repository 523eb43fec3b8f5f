import Foundation

/// One item's work on its source: everything that opens, sniffs, decodes or
/// encodes it. A worker process runs it (see ``Worker``); the parent never does.
public struct ItemJob: Sendable, Codable {
    /// The item's position in the manifest.
    public var index: Int
    /// The item's key (for messages; the store file name is the parent's business).
    public var itemKey: String
    /// The source image's path.
    public var source: String
    /// Make the thumbnail PNG.
    public var makeThumbnail: Bool
    /// Make the store file, under ``temporaryPath``.
    public var makeStore: Bool
    /// Where the store file is written and closed; the parent flushes and renames it.
    public var temporaryPath: String
    /// Hash the source's content for the incremental state.
    public var hashSource: Bool

    /// Creates a job.
    public init(
        index: Int, itemKey: String, source: String, makeThumbnail: Bool, makeStore: Bool,
        temporaryPath: String, hashSource: Bool
    ) {
        self.index = index
        self.itemKey = itemKey
        self.source = source
        self.makeThumbnail = makeThumbnail
        self.makeStore = makeStore
        self.temporaryPath = temporaryPath
        self.hashSource = hashSource
    }
}

/// What an ``ItemJob`` made, as the worker hands it back.
public struct ItemOutcome: Sendable, Codable {
    /// The source's header, when it could be read.
    public var header: SourceHeader?
    /// The thumbnail PNG, when one was asked for and made.
    public var thumbnail: Data?
    /// Whether the store file was written (and closed) under the job's temporary path.
    public var storeWritten = false
    /// The hash of the written store file.
    public var storeHash: String?
    /// Why the item failed, if it did.
    public var failure: ItemFailure?
    /// A failed write (disk full, file size limit): the run's failure, not the item's.
    public var writeError: String?
    /// What the decoders warned about while reading this source.
    public var warnings: [String] = []
    /// The stage spans, on the system-wide monotonic clock.
    public var spans = Spans()
    /// Source bytes read.
    public var bytesRead: Int64 = 0
    /// Whether the source's pixels were decoded.
    public var decoded = false
    /// The source's content hash, when asked for.
    public var sourceHash: String?
    /// The source's size and modification time before it was opened: what the
    /// state records, so a source replaced while it was read counts as changed next run.
    var sourceStamp: FileStamp?
    /// The worker's peak resident memory so far.
    public var peakRSSBytes = 0
    /// How long the worker waited for this job after its last reply (or, for its
    /// first, after it was ready): time it sat idle for want of work from the parent.
    public var waitedNanoseconds: UInt64?
    /// With a worker's first outcome: when (monotonic clock, shared by every
    /// process) it was ready for its first job, to measure its start-up.
    public var readyAt: UInt64?
    /// How the store file was made (when one was).
    public var storePath: StorePath?

    /// An outcome that is only a failure.
    public init(failure: ItemFailure) { self.failure = failure }

    init() {}
}

/// Runs item jobs with one pipeline's settings.
public struct ItemJobRunner: Sendable {
    let settings: PipelineSettings
    let thumbnailer: Thumbnailer
    let store: ImageStore
    /// Whether JPEG sources may take the plane path (``StorePath``); off keeps every
    /// item on libvips (`THUMBPIPE_JPEG_PLANES=off`, and tests that compare the two).
    var planes = !StorePath.disabled

    /// Prepares to run jobs with `settings`, writing store files into `outputFolder`.
    public init(settings: PipelineSettings, outputFolder: String) {
        self.settings = settings
        thumbnailer = Thumbnailer(settings: settings)
        store = ImageStore(folder: outputFolder, settings: settings.store)
    }

    /// Runs `job`: header, the decode plan, then what the job asks for. Never
    /// throws: every failure is in the outcome.
    /// - Parameter beforeOpen: called once the source's stamp is taken, just before it is opened.
    public func run(_ job: ItemJob, beforeOpen: () -> Void = {}) -> ItemOutcome {
        _ = Vips.takeWarnings()
        var outcome = ItemOutcome()
        outcome.sourceStamp = FileStamp(path: job.source)
        beforeOpen()
        var spans = Spans()
        do {
            let header = try spans.measure(.header) { () throws(ItemFailure) in
                try thumbnailer.decode.header(of: job.source)
            }
            outcome.header = header
            try make(job, header: header, outcome: &outcome, spans: &spans)
        } catch let failure as ItemFailure {
            outcome.failure = failure
        } catch let error as ThumbpipeError {
            outcome.writeError = error.message
        } catch {
            outcome.failure = ItemFailure(error, format: outcome.header?.format ?? "image", stage: .decode)
        }
        outcome.warnings = Vips.takeWarnings()
        if outcome.failure == nil && outcome.writeError == nil && settings.limits.failOn == .warning,
            let first = outcome.warnings.first
        {
            outcome.failure = ItemFailure(.decode, "decoded with warnings (limits.failOn warning): \(first)")
        }
        if outcome.failure != nil || outcome.writeError != nil {
            if outcome.storeWritten { unlink(job.temporaryPath) }
            outcome.storeWritten = false
            outcome.thumbnail = nil
        }
        if outcome.decoded {
            outcome.bytesRead = Self.fileSize(job.source)
            if job.hashSource && outcome.sourceHash == nil { outcome.sourceHash = ContentHash.file(job.source) }
        }
        outcome.spans = spans
        outcome.peakRSSBytes = ProcessMemory.peakResidentBytes()
        return outcome
    }

    /// The work after the header, by the item's ``DecodePlan``.
    private func make(_ job: ItemJob, header: SourceHeader, outcome: inout ItemOutcome, spans: inout Spans) throws {
        let path = job.source
        let plan = DecodePlan.choose(
            for: header, canvasWidth: thumbnailer.scale.width, canvasHeight: thumbnailer.scale.height)
        outcome.decoded = true
        // Decoding and colour happen inside whatever pulls the pixels: timed apart.
        let clocks = PipelineClocks()
        do {
            switch plan {
            case .tap(let factor) where planes && StorePath.readsPlanes(header, plan: plan):
                // The thumbnail comes from the planes whatever the store's settings (so it never
                // depends on them); the store too, unless its settings need libvips.
                let storeOnPlanes =
                    job.makeStore && StorePath.choose(for: header, plan: plan, store: settings.store) == .planes
                if try planeItem(
                    job, header: header, factor: factor, writesStore: storeOnPlanes, outcome: &outcome, spans: &spans)
                {
                    if job.makeStore && !storeOnPlanes {
                        try writeStore(job, outcome: &outcome, spans: &spans, clocks: clocks) {
                            try thumbnailer.decode.fullSize(path, header: header, clocks: clocks)
                        }
                    }
                    break
                }
                try tapThenStore(job, header: header, factor: factor, clocks: clocks, outcome: &outcome, spans: &spans)
            case .tap(let factor):
                try tapThenStore(job, header: header, factor: factor, clocks: clocks, outcome: &outcome, spans: &spans)
            case .once:
                let decoded = try spans.measure(.decode) { () throws(ItemFailure) in
                    try thumbnailer.decode.fullSize(path, header: header, inMemory: true, clocks: clocks)
                }
                spans.split(lastOf: .decode, into: clocks.parts)
                if job.makeThumbnail { outcome.thumbnail = try thumbnailer.thumbnail(from: decoded, spans: &spans) }
                if job.makeStore { try writeStore(job, outcome: &outcome, spans: &spans) { decoded } }
            case .twice:
                if job.makeThumbnail {
                    outcome.thumbnail = try thumbnailer.thumbnail(for: path, header: header, spans: &spans)
                }
                if job.makeStore {
                    try writeStore(job, outcome: &outcome, spans: &spans, clocks: clocks) {
                        try thumbnailer.decode.fullSize(path, header: header, clocks: clocks)
                    }
                }
            }
        }
    }

    /// The tap plan on libvips: one streaming decode; the store (or a drain) pulls
    /// every pixel past the tap.
    private func tapThenStore(
        _ job: ItemJob, header: SourceHeader, factor: Int, clocks: PipelineClocks, outcome: inout ItemOutcome,
        spans: inout Spans
    ) throws {
        let path = job.source
        var decoded = try thumbnailer.decode.fullSize(path, header: header, clocks: clocks)
        let tap = try Self.vips {
            try thumbnailer.scale.tap(for: decoded.image, factor: factor, orientation: header.orientation)
        }
        do {
            decoded.image = try Self.vips { try tap.tapping(decoded.image) }
            if job.makeStore {
                try writeStore(job, outcome: &outcome, spans: &spans, clocks: clocks) { decoded }
            } else {
                try spans.measure(.decode) { () throws(ItemFailure) in
                    try Self.vips(format: header.format) { try ThumbnailTap.drain(decoded.image) }
                }
                spans.split(lastOf: .decode, into: [(.colour, clocks.colourNanoseconds)])
            }
            if job.makeThumbnail {
                outcome.thumbnail = try thumbnailer.thumbnail(fromTap: tap, header: header, spans: &spans)
            }
        }
    }

    /// The tap plan through the JPEG's planes: the thumbnail's blocks read from
    /// them, and with `writesStore` the store file encoded from them
    /// (``StorePath/planes``). False, with nothing done, when the planes cannot be
    /// had (the caller then takes libvips for both).
    private func planeItem(
        _ job: ItemJob, header: SourceHeader, factor: Int, writesStore: Bool, outcome: inout ItemOutcome,
        spans: inout Spans
    ) throws -> Bool {
        guard job.makeThumbnail || writesStore else { return true }
        var attempt = Spans()
        guard
            let made = try JpegPlaneStore(store: store).write(
                job.source, header: header, temporaryPath: writesStore ? job.temporaryPath : nil,
                hashSource: job.hashSource,
                tap: { width, height in
                    guard job.makeThumbnail else { return nil }
                    return try thumbnailer.scale.tap(
                        width: width, height: height, bands: 3, factor: factor, orientation: header.orientation)
                }, spans: &attempt)
        else { return false }
        spans.append(attempt)
        if let hash = made.sourceHash { outcome.sourceHash = hash }
        if let file = made.file {
            try spans.measure(.write) { try file.closeForCommit() }
            outcome.storeWritten = true
            outcome.storeHash = made.storeHash
            outcome.storePath = .planes
        }
        if let tap = made.tap {
            outcome.thumbnail = try thumbnailer.thumbnail(fromTap: tap, header: header, spans: &spans)
        }
        return true
    }

    /// Runs a libvips step, turning its error into the item's failure.
    private static func vips<T>(format: String = "image", _ body: () throws -> T) throws(ItemFailure) -> T {
        do {
            return try body()
        } catch {
            throw ItemFailure(error, format: format, stage: .decode)
        }
    }

    /// Writes the store file under the job's temporary path, closed (the parent flushes it).
    /// With `clocks`, the decoding and colour the encoder pulled are split out of the store span.
    private func writeStore(
        _ job: ItemJob, outcome: inout ItemOutcome, spans: inout Spans, clocks: PipelineClocks? = nil,
        _ decode: () throws -> DecodedImage
    ) throws {
        let file = try spans.measure(.store) {
            try store.writeTemporary(try decode(), to: job.temporaryPath)
        }
        if let clocks { spans.split(lastOf: .store, into: clocks.parts) }
        // Flushed by the parent, which renames it, while this worker goes on.
        try spans.measure(.write) { try file.closeForCommit() }
        outcome.storeWritten = true
        outcome.storeHash = ContentHash.file(job.temporaryPath)
        outcome.storePath = .libvips
    }

    static func fileSize(_ path: String) -> Int64 {
        FileInfo(path: path)?.size ?? 0
    }
}
