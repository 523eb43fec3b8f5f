import Foundation
import Synchronization

/// Runs a manifest through the pipeline: `jobs` slots, each driving one
/// worker process through ``Supervisor``, an ``OrderedSink`` that writes the
/// archive and the state in manifest order, and the incremental plan deciding
/// per item what is redone.
public final class BatchRunner: Sendable {
    let manifest: Manifest
    let settings: PipelineSettings
    let options: RunOptions
    let plan: IncrementalPlan?
    let state: RunState?
    let trace: TraceWriter?
    let hooks: RunHooks
    let store: ImageStore
    let fingerprints: ItemLedger.Fingerprints
    /// Store-file names a killed run claimed (its files, not strangers'), read before this run claims any.
    let claimedBefore: Set<String>
    /// The per-stage timings of this run.
    public let timings = StageTimings()
    /// Per worker slot: the time its worker spent on items, and waiting for one.
    let slotClocks: Mutex<[(busySeconds: Double, waitingSeconds: Double)]>

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
        store = ImageStore(output: options.output, settings: settings.store)
        fingerprints = ItemLedger.Fingerprints(settings: settings, plan: plan)
        claimedBefore = options.output.claims()
        slotClocks = Mutex(Array(repeating: (0, 0), count: options.jobs))
    }

    /// Runs every item; writes store files, then the report, then `items.archive`.
    /// - Parameters:
    ///   - cancel: a set flag kills the workers at once and leaves nothing partial.
    ///   - writeReport: called with the run's report (built by its sink) before the
    ///     archive is renamed into place; it may add to the report before writing it.
    /// - Throws: ``ThumbpipeError`` for failures of the run itself (71/73/74), or
    ///   ``RunCancelled`` when `cancel` was set.
    public func run(
        cancel: CancellationFlag = CancellationFlag(), writeReport: (inout RunReport) throws -> Void = { _ in }
    ) throws -> RunReport {
        let started = Spans.now
        let startTime = Date()
        let lock = try options.lock ?? options.output.prepare()
        let archivePath = options.output.layout.archive(settings.archive.fileName)
        let fingerprint = state == nil ? nil : IncrementalPlan.archiveFingerprint(manifest, settings)
        if let unchanged = try runUnchanged(
            started: started, startTime: startTime, archivePath: archivePath, fingerprint: fingerprint,
            writeReport: writeReport)
        {
            withExtendedLifetime(lock) {}
            return unchanged
        }
        let supervisor = try Supervisor(
            executable: options.workerExecutable, settings: settings, output: options.output,
            sandbox: options.sandbox, expectsHEIC: expectsHEIC)
        defer { supervisor.reapExiting() }
        let (sink, sampled) = try runSlots(supervisor: supervisor, archivePath: archivePath, cancel: cancel)
        if let error = cancel.signal != 0 ? RunCancelled(signal: cancel.signal) : sampled.fatal {
            abandon(sink)
            throw error
        }
        try forgetGone()
        let duplicates = try state?.recordDuplicates() ?? []
        let totals = sink.totals
        // The profile's stages are the items' alone: taken before the archive's time is added.
        let profile = profile(totals, started: started, loadAverage: sampled.meanLoadAverage, supervisor: supervisor)
        timings.record([.archive: totals.archiveSeconds])
        var report = sink.report(
            manifest: manifest, settings: settings, options: options, seconds: Double(Spans.now - started) / 1e9,
            timings: timings)
        report.startTime = ISO8601Format.string(startTime)
        report.timeline = sampled.timeline
        report.duplicates = duplicates
        report.profile = profile
        report.takeWorkers(
            supervisor, confined: options.sandbox != .off, sampledPeak: sampled.peak,
            proportionalPeak: sampled.proportionalPeak)
        report.take(plan, manifest: manifest, remade: totals.remade, imageKept: totals.imageKept)
        (report.incremental.archiveItemsCopied, report.incremental.archiveBytesCopied) = sink.archiveCopies
        let archiveHash: String
        do {
            try writeReport(&report)
            try trace?.finish()
            archiveHash = try sink.finishArchive()
        } catch {
            sink.abandonArchive()
            throw error
        }
        // What the next run compares to know it has nothing to write.
        if let fingerprint { try state?.sealArchive(fingerprint: fingerprint, path: archivePath, hash: archiveHash) }
        TemporaryFile.syncFolder(options.output.path)
        withExtendedLifetime(lock) {}
        return report
    }

    /// What the slots' run left besides its sink: the first fatal error, and the memory sampler's figures.
    struct SlotsRun {
        var fatal: (any Error)?
        var peak: Int
        var proportionalPeak: Int
        var meanLoadAverage: Double?
        var timeline: [TimelinePoint]
    }

    /// Runs `options.jobs` slots over the manifest, each on its own thread with its
    /// worker, into one ordered sink, until every item is delivered or one fails the run.
    private func runSlots(supervisor: Supervisor, archivePath: String, cancel: CancellationFlag) throws -> (
        OrderedSink, SlotsRun
    ) {
        let items = manifest.items
        let planned = plan?.work
        let dispenser = Dispenser(
            count: items.count, window: options.window, isLight: { !items.hasImage(at: $0) },
            weight: { position in
                // A photo's file size stands for its cost; nothing to redo costs nothing.
                if let item = planned?[position], !item.needsThumbnail && !item.needsStore { return 0 }
                return items[position].imagePath.map { Int(FileInfo(path: $0)?.size ?? 0) } ?? 0
            })
        let sink = OrderedSink(
            writer: try KeyedArchiveWriter(
                path: archivePath, className: settings.archive.className, itemCount: manifest.items.count,
                indexPath: state == nil ? nil : options.output.layout.index),
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
                    try Slot(runner: self, slot: slot, dispenser: dispenser, sink: sink, supervisor: supervisor).run()
                } catch {
                    fatal.withLock { if $0 == nil { $0 = error } }
                    dispenser.stop()
                }
            }
            thread.name = "thumbpipe-slot-\(slot + 1)"
            thread.start()
        }
        done.wait()
        let (peak, timeline) = sampler.stop()
        supervisor.shutDown()
        return (
            sink,
            SlotsRun(
                fatal: fatal.withLock { $0 }, peak: peak, proportionalPeak: sampler.proportionalPeak,
                meanLoadAverage: sampler.meanLoadAverage, timeline: timeline)
        )
    }

    /// A run that stops: no archive, no trace, what is done committed, no temporaries left.
    private func abandon(_ sink: OrderedSink) {
        sink.abandonArchive()
        trace?.abandon()
        try? state?.commit()
        TemporaryFile.removeStale(in: options.output.path)
        TemporaryFile.removeStale(in: options.output.layout.work)
    }

    /// Items gone from the manifest lose their store file, as deleteImageForKey: does;
    /// so do the old names of moved items (their files now have their new names too).
    /// Then the state is committed and the claims journal cleared.
    private func forgetGone() throws {
        if let plan {
            let gone = plan.removed.map(\.itemKey) + plan.moves.values
            for key in gone { store.delete(forKey: key) }
            try state?.remove(keys: gone)
        }
        try state?.commit()
        if state != nil { options.output.clearClaims() }
    }

    /// The run's profile (what the time went on, and the hints), when an item was decoded.
    private func profile(
        _ totals: OrderedSink.Totals, started: UInt64, loadAverage: Double?, supervisor: Supervisor
    ) -> RunProfile? {
        guard totals.decodedItems > 0 else { return nil }
        var machine = HintFacts()
        machine.loadAverage = loadAverage
        machine.slowest = totals.profiles.slowest.map { ($0.source, $0.seconds) }
        machine.settingsOffPlanes = settings.store.settingsOffPlanes
        return RunProfile(
            groups: totals.profiles.groups,
            utilisation: RunProfile.Utilisation(
                jobs: options.jobs, wallSeconds: Double(Spans.now - started) / 1e9,
                slots: slotClocks.withLock { $0 }, startups: supervisor.workerStartups),
            stages: timings.summary(), machine: machine)
    }

    /// Whether an item this run decodes is named like a HEIC (`.heic`, `.heif`, `.hif`):
    /// its workers then load the HEVC decoder before their sandbox.
    var expectsHEIC: Bool {
        manifest.items.indices.contains { index in
            if let work = plan?.work[index], !work.needsThumbnail && !work.needsStore { return false }
            return manifest.items[index].imagePath.map(HeicPlaneStore.namedLikeHEIC) ?? false
        }
    }
}
