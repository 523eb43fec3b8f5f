import Foundation
import Synchronization

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
    /// How the changed items changed (``IncrementalPlan/changeKinds``).
    public var changeKinds: [String: Int] = [:]
    /// The items removed, by name and last source.
    public var removed: [IncrementalPlan.RemovedItem] = []
    /// The plan in one line (``IncrementalPlan/summary``).
    public var planSummary: String { IncrementalPlan.summary(classes, changeKinds) }
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
    /// Items that share a photo (the same content), in groups.
    public var duplicates: [[DuplicateItem]] = []
    /// Where the workers' time went, and what to change (nil when nothing was decoded).
    public var profile: RunProfile?
    /// The items whose photo moved to a new key (old → new), in manifest order.
    public var moved: [RunReport.MovedItem] = []
    /// The layers the run's workers reported they ran under (nil when no worker ran, or `--sandbox off`).
    public var sandbox: String?
}

extension RunResult {
    /// The result of a run from its sink's totals.
    init(totals: OrderedSink.Totals, manifest: Manifest, seconds: Double) {
        self.init(
            total: manifest.items.count, succeeded: totals.succeeded,
            withoutImage: manifest.items.count - manifest.items.withImageCount, failures: totals.failures,
            warnings: totals.warnings, seconds: seconds, sourceBytes: totals.sourceBytes)
        decodedItems = totals.decodedItems
        slowest = totals.profiles.slowest
        sample = totals.profiles.sample
        datesFromFileTime = totals.dateGuesses
        datesFromFileTimeCount = totals.dateGuessCount
    }

    /// The plan's figures: classes, changes, removals, moves (old key → new key)
    /// and the time the reused items saved; all items new without a plan.
    mutating func take(_ plan: IncrementalPlan?, manifest: Manifest) {
        guard let plan else {
            classes = [.new: manifest.items.count]
            return
        }
        classes = plan.counts
        changeKinds = plan.changeKinds
        removed = plan.removed
        moved = plan.moves.sorted { $0.key < $1.key }.compactMap { position, from in
            let item = manifest.items[position]
            return from == item.itemKey
                ? nil : RunReport.MovedItem(from: from, to: item.itemKey, itemName: item.itemName)
        }
        timeSavedSeconds = plan.savedSeconds
    }

    /// The workers' memory and confinement (when they were confined), and the run's peaks.
    mutating func takeWorkers(_ supervisor: Supervisor, confined: Bool, sampledPeak: Int, proportionalPeak: Int) {
        parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        workersPeakRSSBytes = supervisor.workersPeakRSSBytes
        largestWorkerPeakRSSBytes = supervisor.largestWorkerPeakRSSBytes
        if confined, let confinement = supervisor.confinement {
            sandbox =
                confinement.description
                + (confinement.problems.isEmpty ? "" : "; missing: \(confinement.problems.joined(separator: "; "))")
        }
        peakRSSBytes = max(sampledPeak, parentPeakRSSBytes, largestWorkerPeakRSSBytes)
        peakPSSBytes = proportionalPeak
    }
}
