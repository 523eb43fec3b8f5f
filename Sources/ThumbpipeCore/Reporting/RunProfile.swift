import Foundation

/// The report's answer to "what should I change": where a run's worker time
/// went, by format and by size class, how busy the workers were, and hints
/// derived from those figures, each with the number behind it.
public struct RunProfile: Sendable, Codable {
    /// Items of one format or size class: how many, their share of the items and
    /// of the decoded items' time, and their time's median and 95th percentile.
    public struct Group: Sendable, Codable, Equatable {
        public var name: String
        public var items: Int
        public var seconds: Double
        public var itemShare: Double
        public var timeShare: Double
        public var p50Ms: Double
        public var p95Ms: Double
    }

    /// How busy the worker slots were.
    public struct Utilisation: Sendable, Codable, Equatable {
        public var jobs: Int
        public var wallSeconds: Double
        /// The workers' stage time over (wall time × jobs).
        public var busyShare: Double
        /// Per slot, the run's wall time its worker spent on no item.
        public var idleSecondsPerSlot: [Double]
        /// Time workers waited for their next job from the parent (with none queued).
        public var waitingOnParentSeconds: Double
        /// Workers started, and their start-up (spawn to ready for a first job: libvips,
        /// its modules, the sandbox) in all and on average.
        public var workersStarted: Int
        public var workerStartupSeconds: Double
        public var workerStartupMeanMs: Double
    }

    /// A suggestion (``HintRules``): the action, the figure it rests on and what it would save.
    public struct Hint: Sendable, Codable, Equatable {
        public var text: String
        public var figure: String
        /// What taking the action would save (absent in reports of earlier versions).
        public var saves: String?
    }

    public var byFormat: [Group] = []
    /// By how the store was made: `planes`, `libvips` (or `no store`).
    public var byPath: [Group] = []
    public var bySize: [Group] = []
    public var utilisation: Utilisation?
    public var hints: [Hint] = []
    /// Every stage with what its time measures (``Stage/definition``).
    public var stageDefinitions: [String: String] = Dictionary(
        uniqueKeysWithValues: Stage.allCases.map { ($0.rawValue, $0.definition) })

    /// The size class of a source of `megapixels`.
    static func sizeClass(_ megapixels: Double) -> String {
        switch megapixels {
        case ..<1: "under 1 Mpx"
        case ..<4: "1–4 Mpx"
        case ..<12: "4–12 Mpx"
        case ..<24: "12–24 Mpx"
        default: "24 Mpx and over"
        }
    }

    /// Builds the section from a run's figures; `machine` brings what the profile
    /// does not hold (load average, slowest files, settings), for the hints.
    init(
        groups: ProfileGroups, utilisation: Utilisation?, stages: [String: StageTimings.Summary],
        machine: HintFacts = HintFacts()
    ) {
        byFormat = groups.groups(\.formats)
        byPath = groups.groups(\.paths)
        bySize = groups.groups(\.sizes)
        self.utilisation = utilisation
        var facts = machine
        facts.byFormat = byFormat
        facts.bySize = bySize
        facts.jpegPaths = groups.groups(\.jpegPaths)
        facts.utilisation = utilisation
        facts.stages = stages
        hints = HintRules.hints(facts)
    }

    static func percent(_ share: Double) -> String { "\(Int((share * 100).rounded())) %" }

}

/// Collects decoded items' times by format and by size class, in memory that
/// does not grow with the run.
struct ProfileGroups: Sendable {
    var formats: [String: DurationHistogram] = [:]
    var paths: [String: DurationHistogram] = [:]
    var sizes: [String: DurationHistogram] = [:]
    /// JPEG items alone, by path: for the hint on JPEGs off the planes.
    var jpegPaths: [String: DurationHistogram] = [:]

    mutating func add(format: String, path: String?, megapixels: Double, seconds: Double) {
        formats[format, default: DurationHistogram()].add(seconds)
        paths[path ?? "no store", default: DurationHistogram()].add(seconds)
        if format == "JPEG" { jpegPaths[path ?? "no store", default: DurationHistogram()].add(seconds) }
        sizes[RunProfile.sizeClass(megapixels), default: DurationHistogram()].add(seconds)
    }

    /// The groups of one dimension, most time first.
    func groups(_ dimension: KeyPath<ProfileGroups, [String: DurationHistogram]>) -> [RunProfile.Group] {
        let all = self[keyPath: dimension]
        let items = all.values.reduce(0) { $0 + $1.count }
        let seconds = all.values.reduce(0) { $0 + $1.total }
        return all.map { name, h in
            RunProfile.Group(
                name: name, items: h.count, seconds: StageTimings.round(h.total),
                itemShare: StageTimings.round(Double(h.count) / Double(max(items, 1))),
                timeShare: StageTimings.round(h.total / max(seconds, 1e-9)),
                p50Ms: StageTimings.round(h.percentile(0.5) * 1000),
                p95Ms: StageTimings.round(h.percentile(0.95) * 1000))
        }.sorted { $0.seconds > $1.seconds || ($0.seconds == $1.seconds && $0.name < $1.name) }
    }
}

extension RunProfile.Utilisation {
    /// From the run's wall time, each slot's busy and waiting seconds, and the
    /// workers' start-ups.
    init(
        jobs: Int, wallSeconds wall: Double, slots: [(busySeconds: Double, waitingSeconds: Double)],
        startups: (count: Int, seconds: Double)
    ) {
        let busy = slots.reduce(0) { $0 + $1.busySeconds }
        self.init(
            jobs: jobs, wallSeconds: StageTimings.round(wall),
            busyShare: StageTimings.round(busy / max(wall * Double(jobs), 1e-9)),
            idleSecondsPerSlot: slots.map { StageTimings.round(max(0, wall - $0.busySeconds)) },
            waitingOnParentSeconds: StageTimings.round(slots.reduce(0) { $0 + $1.waitingSeconds }),
            workersStarted: startups.count, workerStartupSeconds: StageTimings.round(startups.seconds),
            workerStartupMeanMs: StageTimings.round(startups.seconds * 1000 / Double(max(startups.count, 1))))
    }
}
