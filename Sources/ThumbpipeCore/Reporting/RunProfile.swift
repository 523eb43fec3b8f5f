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

    /// A suggestion and the figure it rests on.
    public struct Hint: Sendable, Codable, Equatable {
        public var text: String
        public var figure: String
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

    /// Builds the section from a run's figures.
    init(groups: ProfileGroups, utilisation: Utilisation?, stages: [String: StageTimings.Summary]) {
        byFormat = groups.groups(\.formats)
        byPath = groups.groups(\.paths)
        bySize = groups.groups(\.sizes)
        self.utilisation = utilisation
        hints = Self.hints(
            byFormat: byFormat, bySize: bySize, jpegPaths: groups.groups(\.jpegPaths), utilisation: utilisation,
            stages: stages)
    }

    static func percent(_ share: Double) -> String { "\(Int((share * 100).rounded())) %" }

    /// The hints the figures support, most telling first.
    static func hints(
        byFormat: [Group], bySize: [Group], jpegPaths: [Group] = [], utilisation: Utilisation?,
        stages: [String: StageTimings.Summary]
    ) -> [Hint] {
        var hints: [Hint] = []
        // JPEGs off the plane path (their profile, or the store's settings): what they cost.
        if let off = jpegPaths.first(where: { $0.name == StorePath.libvips.rawValue }), off.timeShare >= 0.1 {
            let planes = jpegPaths.first { $0.name == StorePath.planes.rawValue }
            let compared =
                planes.map { String(format: ", p50 %.0f ms an item against %.0f on the planes", off.p50Ms, $0.p50Ms) }
                ?? ""
            hints.append(
                Hint(
                    text:
                        "JPEGs on libvips take \(percent(off.timeShare)) of the JPEG time\(compared): those with profiles that are not sRGB are converted (sRGB exports take the plane path), and store.keepMetadata or store.orientation tag keep every JPEG off it",
                    figure:
                        "JPEG on libvips: \(percent(off.itemShare)) of JPEG items, \(percent(off.timeShare)) of JPEG time"
                ))
        }
        // A format that costs far more than its share of items.
        for group in byFormat
        where byFormat.count > 1 && group.timeShare >= 0.2 && group.timeShare >= 1.5 * group.itemShare {
            hints.append(
                Hint(
                    text:
                        "\(group.name) takes \(percent(group.timeShare)) of the time for \(percent(group.itemShare)) of the items: converting those sources ahead, or a separate run for them, shortens the night",
                    figure: "\(group.name): \(percent(group.itemShare)) of items, \(percent(group.timeShare)) of time"))
        }
        for group in bySize where bySize.count > 1 && group.timeShare >= 0.4 && group.itemShare < 0.2 {
            hints.append(
                Hint(
                    text:
                        "sources of \(group.name) take \(percent(group.timeShare)) of the time: limits.maxPixels could refuse the largest",
                    figure: "\(group.name): \(percent(group.itemShare)) of items, \(percent(group.timeShare)) of time"))
        }
        if let u = utilisation, u.wallSeconds > 1 {
            let idle = 1 - u.busyShare
            let cores = ProcessInfo.processInfo.activeProcessorCount
            let waiting = u.waitingOnParentSeconds / max(u.wallSeconds * Double(u.jobs), 1e-9)
            if waiting >= 0.15 {
                hints.append(
                    Hint(
                        text:
                            "workers waited on the parent \(percent(waiting)) of the time: the parent's archive and state writes are the limit, not the decoders; more jobs will not help",
                        figure: "waiting on the parent: \(String(format: "%.1f", u.waitingOnParentSeconds)) s"))
            } else if idle >= 0.25 && u.jobs < cores {
                hints.append(
                    Hint(
                        text: "workers idle \(percent(idle)): raise --jobs (\(u.jobs) of \(cores) cores)",
                        figure:
                            "busy \(percent(u.busyShare)) of \(String(format: "%.1f", u.wallSeconds)) s × \(u.jobs) jobs"
                    ))
            }
            let startup = u.workerStartupSeconds / max(u.wallSeconds * Double(u.jobs), 1e-9)
            if startup >= 0.1 {
                hints.append(
                    Hint(
                        text: "worker start-up is \(percent(startup)) of the run: fewer, larger runs spread it",
                        figure: "\(u.workersStarted) workers, \(String(format: "%.0f", u.workerStartupMeanMs)) ms each")
                )
            }
        }
        let workerStages: Set<String> = ["header", "decode", "colour", "scale", "clip", "encode", "store"]
        let workerTime = stages.filter { workerStages.contains($0.key) }.values.reduce(0) { $0 + $1.totalSeconds }
        if let colour = stages["colour"]?.totalSeconds, workerTime > 0, colour / workerTime >= 0.1 {
            hints.append(
                Hint(
                    text:
                        "colour conversion (sources with non-sRGB profiles) takes \(percent(colour / workerTime)) of the workers' time: sources exported as sRGB skip it",
                    figure: "colour: \(String(format: "%.1f", colour)) s of \(String(format: "%.1f", workerTime)) s"))
        }
        return hints
    }
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
