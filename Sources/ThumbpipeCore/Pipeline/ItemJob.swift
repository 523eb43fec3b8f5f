import Foundation

/// One item's work on its source: everything that sniffs, decodes or encodes
/// it. A worker process runs it (see ``Worker``) on the descriptor the parent
/// opened and passed with it; the parent never decodes.
public struct ItemJob: Sendable, Codable {
    /// The item's position in the manifest.
    public var index: Int
    /// The item's key (for messages; the store file name is the parent's business).
    public var itemKey: String
    /// The source image's path: the parent opens it; the worker only names it.
    public var source: String
    /// Make the thumbnail.
    public var makeThumbnail: Bool
    /// Make the store file.
    public var makeStore: Bool
    /// The parent hashes the source's content for the incremental state (never the worker).
    public var hashSource: Bool
    /// The photo's sidecars, as bytes the parent read and the worker parses.
    public var sidecars: [Sidecars.Bytes] = []
    /// Their stamp as the parent read them, for the item's record (the worker ignores it).
    public var sidecarStamp: String?
    /// The image-data hash the photo had when its outputs were made
    /// (``ImageDataHash``), sent when the photo changed but nothing else did: a
    /// worker that finds the same hash makes nothing and says so
    /// (``ItemOutcome/imageUnchanged``), the photo's metadata read as for a sidecar edit.
    public var recordedImageHash: String?

    /// Creates a job.
    public init(index: Int, itemKey: String, source: String, makeThumbnail: Bool, makeStore: Bool, hashSource: Bool) {
        self.index = index
        self.itemKey = itemKey
        self.source = source
        self.makeThumbnail = makeThumbnail
        self.makeStore = makeStore
        self.hashSource = hashSource
    }
}

/// What an ``ItemJob`` made. The worker fills in what it claims (the header,
/// the thumbnail's pixels, that a store file is attached, spans, warnings); the
/// parent drops every field it owns from a worker's reply and fills them from
/// its own checks (``WorkerReply``): the thumbnail PNG it encodes, the store
/// bytes it checked, every hash and stamp.
public struct ItemOutcome: Sendable, Codable {
    /// The source's header, when it could be read.
    public var header: SourceHeader?
    /// The worker's claim: the thumbnail's `width × height × 4` RGBA pixels.
    var thumbnailPixels: Data?
    /// The thumbnail PNG, encoded by the parent from the pixels it checked.
    public var thumbnail: Data?
    /// The worker's claim: a store file is attached (a sealed memory file); then,
    /// in the parent, whether ``store`` holds its checked bytes.
    public var storeWritten = false
    /// The store file's bytes, checked by the parent, to be written by it.
    public var store: Data?
    /// The hash of the store file's bytes (the parent's).
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
    /// The worker's claim: the photo's image data is the one its outputs were made
    /// from (``ItemJob/recordedImageHash``), so it made nothing: only its metadata changed.
    public var imageUnchanged = false
    /// The source's content hash (the parent's), when asked for.
    public var sourceHash: String?
    /// The source's size and modification time when the parent opened it: what
    /// the state records, so a source replaced while it was read counts as changed next run.
    var sourceStamp: FileStamp?
    /// The worker's peak resident memory so far.
    public var peakRSSBytes = 0
    /// How long the worker waited for this job after its last reply (or, for its
    /// first, after it was ready): time it sat idle for want of work from the parent.
    public var waitedNanoseconds: UInt64?
    /// With a worker's first outcome: when (monotonic clock, shared by every
    /// process) it was ready for its first job, to measure its start-up.
    public var readyAt: UInt64?
    /// With a worker's first outcome: the confinement it runs under.
    var confinement: Sandbox.Confinement?
    /// How the store file was made (when one was).
    public var storePath: StorePath?
    /// Why a JPEG's store file was made by libvips (the plan's reason, or libjpeg's refusal).
    public var storeReason: String?

    /// The route the report groups the item's time by: `planes`, `planes, converted`,
    /// `libvips`, or for a JPEG `libvips: ` and why.
    var storeRoute: String? { storePath.map { $0.rawValue + (storeReason.map { ": " + $0 } ?? "") } }

    /// An outcome that is only a failure.
    public init(failure: ItemFailure) { self.failure = failure }

    init() {}

    /// Drops every field the parent owns, whatever a worker put there.
    mutating func dropParentFields() {
        thumbnail = nil
        store = nil
        storeHash = nil
        sourceHash = nil
        sourceStamp = nil
        bytesRead = 0
    }
}

/// Runs item jobs with one pipeline's settings.
public struct ItemJobRunner: Sendable {
    let settings: PipelineSettings
    let thumbnailer: Thumbnailer
    let store: ImageStore
    /// Whether JPEG sources may take the plane path (``StorePath``); off keeps every
    /// item on libvips (`THUMBPIPE_JPEG_PLANES=off`, and tests that compare the two).
    var planes = !StorePath.disabled
    /// Whether HEIC sources may take the HEIC route (``HeicPlaneStore``); off keeps them
    /// on libvips (`THUMBPIPE_HEIC_PLANES=off`, and tests that compare the two).
    var heicPlanes = !HeicPlaneStore.disabled

    /// Prepares to run jobs with `settings`.
    public init(settings: PipelineSettings) {
        self.settings = settings
        thumbnailer = Thumbnailer(settings: settings)
        store = ImageStore(output: nil, settings: settings.store)
    }

    /// Runs `job` on the source open as `descriptor`: header, the decode plan,
    /// then what the job asks for. Never throws: every failure is in the outcome.
    /// - Parameter storeFile: where the store file's bytes go (a memory file the
    ///   worker seals and passes back); nil when the job makes none.
    /// - Parameter beforeOpen: called just before the source's bytes are read.
    public func run(
        _ job: ItemJob, descriptor: FileDescriptor, storeFile: FileDescriptor?, beforeOpen: () -> Void = {}
    ) -> ItemOutcome {
        _ = Vips.takeWarnings()
        var outcome = ItemOutcome()
        beforeOpen()
        var spans = Spans()
        // Bad metadata or a bad sidecar is a warning, never the photo's failure
        // (not even under limits.failOn warning).
        var metadataWarnings: [String] = []
        do {
            let (source, header) = try spans.measure(.header) { () throws(ItemFailure) in
                let source = try SourceBytes(descriptor: descriptor, limit: settings.limits.maxFileBytes)
                // A HEIC the route reads has its header from the route's own parse.
                if heicPlanes, let own = HeicPlaneStore.header(of: source, limits: settings.limits) {
                    return (source, own)
                }
                return (source, try thumbnailer.decode.header(of: source))
            }
            // The reply's header: what it says, without the worker's own image and tables.
            var reported = header
            reported.loaded = nil
            reported.conversion = nil
            reported.heif = nil
            reported.sidecars = SidecarReader.read(
                job.sidecars, photoName: URL(fileURLWithPath: job.source).lastPathComponent)
            metadataWarnings = header.embedded.warnings + reported.sidecars.warnings
            if job.hashSource && header.format == ImageFormat.jpeg.displayName {
                reported.imageHash = source.withUnsafeBytes { ImageDataHash.jpeg($0, orientation: header.orientation) }
            }
            outcome.header = reported
            outcome.imageUnchanged = job.recordedImageHash != nil && reported.imageHash == job.recordedImageHash
            // A job that makes nothing reads the photo's metadata (its sidecars or its
            // metadata alone changed).
            if (job.makeThumbnail || job.makeStore) && !outcome.imageUnchanged {
                try make(job, source: source, header: header, storeFile: storeFile, outcome: &outcome, spans: &spans)
            }
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
            outcome.storeWritten = false
            outcome.thumbnailPixels = nil
        }
        outcome.warnings += metadataWarnings
        outcome.spans = spans
        outcome.peakRSSBytes = ProcessMemory.peakResidentBytes()
        return outcome
    }

    /// The work after the header, by the item's ``ItemPlan``: one switch over its route.
    private func make(
        _ job: ItemJob, source path: SourceBytes, header: SourceHeader, storeFile: FileDescriptor?,
        outcome: inout ItemOutcome,
        spans: inout Spans
    ) throws {
        let job = Job(job: job, storeFile: storeFile)
        let sampling = header.jpegColour == nil ? nil : path.withUnsafeBytes(ItemPlan.frameSampling)
        let plan = ItemPlan.make(
            header: header, sourceBytes: path.count, sampling: sampling, makeStore: job.makeStore,
            canvasWidth: thumbnailer.scale.width, canvasHeight: thumbnailer.scale.height, store: settings.store,
            planes: planes, heicPlanes: heicPlanes)
        if case .libvips(let reason) = plan.store { outcome.storeReason = reason }
        outcome.decoded = true
        // Decoding and colour happen inside whatever pulls the pixels: timed apart.
        let clocks = PipelineClocks()
        switch plan {
        case .planes(let planes), .heic(let planes):
            let isHEIC = if case .heic = plan { true } else { false }
            let refused =
                isHEIC
                ? try heicItem(job, source: path, header: header, planes: planes, outcome: &outcome, spans: &spans)
                : try planeItem(job, source: path, header: header, planes: planes, outcome: &outcome, spans: &spans)
            if let refused {
                // A change of plan, recorded: libvips for both, the attempt's time kept.
                outcome.storeReason = refused
                try tapThenStore(
                    job, source: path, header: header, factor: planes.factor, clocks: clocks, outcome: &outcome,
                    spans: &spans)
            } else if job.makeStore, case .libvips = planes.store {
                // The thumbnail came from the planes (so it never depends on the store's
                // settings); the store's settings need libvips.
                try writeStore(job, outcome: &outcome, spans: &spans, clocks: clocks) {
                    try thumbnailer.decode.fullSize(path, header: header, clocks: clocks)
                }
            }
        case .tap(let factor, _):
            try tapThenStore(
                job, source: path, header: header, factor: factor, clocks: clocks, outcome: &outcome, spans: &spans)
        case .once:
            let decoded = try spans.measure(.decode) { () throws(ItemFailure) in
                try thumbnailer.decode.fullSize(path, header: header, inMemory: true, clocks: clocks)
            }
            spans.split(lastOf: .decode, into: clocks.parts)
            if job.makeThumbnail {
                outcome.thumbnailPixels = Data(try thumbnailer.pixels(from: decoded, spans: &spans).pixels)
            }
            if job.makeStore { try writeStore(job, outcome: &outcome, spans: &spans) { decoded } }
        case .twice:
            if job.makeThumbnail {
                outcome.thumbnailPixels = Data(try thumbnailer.pixels(for: path, header: header, spans: &spans).pixels)
            }
            if job.makeStore {
                try writeStore(job, outcome: &outcome, spans: &spans, clocks: clocks) {
                    try thumbnailer.decode.fullSize(path, header: header, clocks: clocks)
                }
            }
        }
    }

    /// The tap plan on libvips: one streaming decode; the store (or a drain) pulls
    /// every pixel past the tap.
    private func tapThenStore(
        _ job: Job, source path: SourceBytes, header: SourceHeader, factor: Int, clocks: PipelineClocks,
        outcome: inout ItemOutcome, spans: inout Spans
    ) throws {
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
                outcome.thumbnailPixels = Data(
                    try thumbnailer.pixels(fromTap: tap, header: header, spans: &spans).pixels)
            }
        }
    }

    /// The tap plan through the JPEG's planes: the thumbnail's blocks read from
    /// them (or from its bands converted to sRGB), and with `writesStore` the
    /// store file encoded from them (``StorePath/planes``,
    /// ``StorePath/planesConverted``). When libjpeg refuses the source, nothing
    /// is made and the reason is returned (the caller then takes libvips for
    /// both); the attempt's time stays in `spans`.
    private func planeItem(
        _ job: Job, source: SourceBytes, header: SourceHeader, planes: ItemPlan.Planes, outcome: inout ItemOutcome,
        spans: inout Spans
    ) throws -> String? {
        let writesStore = planes.store == .planes || planes.store == .planesConverted
        guard job.makeThumbnail || writesStore else { return nil }
        let made = try JpegPlaneStore(store: store).write(
            source, header: header, into: writesStore ? job.storeFile : nil, planes: planes,
            tap: { width, height in
                guard job.makeThumbnail else { return nil }
                return try thumbnailer.scale.tap(
                    width: width, height: height, bands: 3, factor: planes.tapFactor, orientation: header.orientation)
            }, spans: &spans)
        if let refused = made.refused { return refused }
        try take(made, header: header, outcome: &outcome, spans: &spans)
        return nil
    }

    /// The HEIC route (``HeicPlaneStore``): the thumbnail tapped from the tiles'
    /// planes, the store encoded from them. When the route refuses the source,
    /// nothing is made and the reason is returned (the caller takes libvips).
    private func heicItem(
        _ job: Job, source: SourceBytes, header: SourceHeader, planes: ItemPlan.Planes, outcome: inout ItemOutcome,
        spans: inout Spans
    ) throws -> String? {
        let writesStore = job.makeStore && planes.store == .planesConverted
        // The tap reads the tiles as stored; the turn is the container's (libvips's
        // header gives the turned size, orientation 1).
        var stored = header
        let made = try HeicPlaneStore(store: store, maxPixels: settings.limits.maxPixels).write(
            source, parsed: header.heif, into: writesStore ? job.storeFile : nil,
            tap: { width, height, orientation in
                stored.orientation = orientation
                guard job.makeThumbnail else { return nil }
                return try thumbnailer.scale.tap(
                    width: width, height: height, bands: 3, factor: planes.tapFactor, orientation: orientation)
            }, spans: &spans)
        if let refused = made.refused { return "HEIC route: " + refused }
        try take(made, header: stored, outcome: &outcome, spans: &spans)
        return nil
    }

    /// What a plane route made, into the outcome: its store file, and the thumbnail
    /// from its tap (scaled and turned as `header` says).
    private func take(
        _ made: JpegPlaneStore.Made, header: SourceHeader, outcome: inout ItemOutcome, spans: inout Spans
    ) throws {
        if made.wroteStore {
            outcome.storeWritten = true
            outcome.storePath = made.path
        }
        if let tap = made.tap {
            outcome.thumbnailPixels = Data(try thumbnailer.pixels(fromTap: tap, header: header, spans: &spans).pixels)
        }
    }

    /// Runs a libvips step, turning its error into the item's failure.
    private static func vips<T>(format: String = "image", _ body: () throws -> T) throws(ItemFailure) -> T {
        do {
            return try body()
        } catch {
            throw ItemFailure(error, format: format, stage: .decode)
        }
    }

    /// Encodes the store file into the job's memory file (the parent checks and writes it).
    /// With `clocks`, the decoding and colour the encoder pulled are split out of the store span.
    private func writeStore(
        _ job: Job, outcome: inout ItemOutcome, spans: inout Spans, clocks: PipelineClocks? = nil,
        _ decode: () throws -> DecodedImage
    ) throws {
        guard let file = job.storeFile else { return }
        try spans.measure(.store) {
            try store.encode(try decode(), to: file, named: "store file")
        }
        if let clocks { spans.split(lastOf: .store, into: clocks.parts) }
        outcome.storeWritten = true
        outcome.storePath = .libvips
    }

    /// A job with the memory file its store goes to.
    struct Job {
        let job: ItemJob
        let storeFile: FileDescriptor?
        var makeThumbnail: Bool { job.makeThumbnail }
        var makeStore: Bool { job.makeStore && storeFile != nil }
    }
}
