import Foundation

/// What a run's hints are judged on: the profile's figures, the machine the run
/// shared and the settings it ran with. A value, so the rules are table-tested
/// on crafted profiles.
public struct HintFacts: Sendable {
    public var byFormat: [RunProfile.Group] = []
    public var bySize: [RunProfile.Group] = []
    /// JPEG items alone, by how their store was made (`planes`, `libvips`).
    public var jpegPaths: [RunProfile.Group] = []
    public var utilisation: RunProfile.Utilisation?
    public var stages: [String: StageTimings.Summary] = [:]
    /// The machine's cores.
    public var cores = ProcessInfo.processInfo.activeProcessorCount
    /// The machine's mean load average over the run (the 1-minute figure, sampled
    /// with the memory), nil when unknown.
    public var loadAverage: Double?
    /// The slowest decoded items (source as shown, seconds), slowest first.
    public var slowest: [(source: String, seconds: Double)] = []
    /// The settings, set away from their defaults, that keep every JPEG off the
    /// plane path (`store.keepMetadata`, `store.orientation tag`).
    public var settingsOffPlanes: [String] = []

    public init() {}

    /// Every decoded item's time, in seconds (the format groups summed).
    var decodedSeconds: Double { byFormat.reduce(0) { $0 + $1.seconds } }
    var decodedItems: Int { byFormat.reduce(0) { $0 + $1.items } }
}

/// The rules that turn a run's figures into hints. Each hint names an action the
/// user can take, the figure it rests on and what it would save, and appears only
/// when its figures say the action would help: none cites a setting at its default
/// as a cause, none advises the plane path when libvips was as fast.
public enum HintRules {
    /// The hints `facts` support, most telling first.
    public static func hints(_ facts: HintFacts) -> [RunProfile.Hint] {
        [
            jpegsOffPlanes(facts), loadedMachine(facts), idleWorkers(facts), disk(facts), slowFormats(facts),
            largeSources(facts), slowestFiles(facts), startup(facts), colour(facts),
        ].flatMap { $0 }
    }

    static func percent(_ share: Double) -> String { RunProfile.percent(share) }
    static func seconds(_ s: Double) -> String { String(format: s >= 10 ? "%.0f s" : "%.1f s", s) }

    /// Worker seconds saved, as wall seconds over `jobs` slots.
    static func wall(_ workerSeconds: Double, _ facts: HintFacts) -> Double {
        workerSeconds / Double(max(facts.utilisation?.jobs ?? 1, 1))
    }

    /// JPEGs stored through libvips when the planes would have been faster.
    static func jpegsOffPlanes(_ facts: HintFacts) -> [RunProfile.Hint] {
        // The JPEGs on libvips, by why (`libvips: CMYK`): the group that costs most.
        let libvips = StorePath.libvips.rawValue
        guard
            let off = facts.jpegPaths.filter({ $0.name == libvips || $0.name.hasPrefix(libvips + ": ") })
                .max(by: { $0.timeShare < $1.timeShare }),
            let planes = facts.jpegPaths.first(where: { $0.name == StorePath.planes.rawValue }),
            off.timeShare >= 0.1, off.p50Ms > planes.p50Ms * 1.2
        else { return [] }
        let saved = Double(off.items) * (off.p50Ms - planes.p50Ms) / 1000
        let why = off.name.count > libvips.count + 2 ? String(off.name.dropFirst(libvips.count + 2)) : nil
        let action =
            facts.settingsOffPlanes.isEmpty
            ? "export those photos as RGB JPEGs with an RGB matrix/TRC profile or none"
                + (why.map { " (they have \($0), which only libvips converts)" } ?? "")
            : "set \(facts.settingsOffPlanes.joined(separator: " and ")) back to the default, which keeps every JPEG off the plane path"
        return [
            RunProfile.Hint(
                text: "\(off.items) JPEGs were stored through libvips: \(action)",
                figure: String(
                    format: "JPEG on libvips: %@ of JPEG time, p50 %.0f ms an item against %.0f ms on the planes",
                    percent(off.timeShare), off.p50Ms, planes.p50Ms),
                saves: "about \(seconds(wall(saved, facts))) of the run")
        ]
    }

    /// Other processes took the CPU the workers wanted.
    static func loadedMachine(_ facts: HintFacts) -> [RunProfile.Hint] {
        guard let load = facts.loadAverage, let u = facts.utilisation, u.wallSeconds > 1 else { return [] }
        let ours = Double(u.jobs) * u.busyShare
        let others = load - ours
        guard load > Double(facts.cores) + 0.5, others >= 1 else { return [] }
        // With `load` runnable on `cores`, each got cores/load of a core.
        let share = 1 - Double(facts.cores) / load
        return [
            RunProfile.Hint(
                text:
                    "the machine was loaded: other processes took the CPU; run when it is idle, or lower --jobs to leave them room",
                figure: String(
                    format: "load average %.1f on %d cores, thumbpipe's workers about %.1f of it", load, facts.cores,
                    ours),
                saves: "up to \(percent(share)) of the wall time (\(seconds(u.wallSeconds * share)))")
        ]
    }

    /// Worker slots idle: the parent, the jobs count, or reading the sources.
    static func idleWorkers(_ facts: HintFacts) -> [RunProfile.Hint] {
        guard let u = facts.utilisation, u.wallSeconds > 1, !u.idleSecondsPerSlot.isEmpty else { return [] }
        let idle = u.idleSecondsPerSlot.reduce(0, +) / Double(u.idleSecondsPerSlot.count) / u.wallSeconds
        guard idle >= 0.25 else { return [] }
        let figure =
            "idle \(percent(idle)) per slot of \(seconds(u.wallSeconds)) (\(u.idleSecondsPerSlot.map { seconds($0) }.joined(separator: ", ")))"
        let waiting = u.waitingOnParentSeconds / max(u.wallSeconds * Double(u.jobs), 1e-9)
        if waiting >= 0.15 {
            return [
                RunProfile.Hint(
                    text:
                        "workers waited on the parent \(percent(waiting)) of the time: its archive, state and store writes are the limit, not the decoders; more --jobs will not help, a faster output disk will",
                    figure: figure + ", waiting on the parent \(seconds(u.waitingOnParentSeconds))",
                    saves: "up to \(seconds(u.waitingOnParentSeconds / Double(max(u.jobs, 1))))")
            ]
        }
        if let load = facts.loadAverage, load > Double(facts.cores) + 0.5 { return [] }  // the loaded machine says why
        if u.jobs < facts.cores {
            let more = Double(facts.cores) / Double(u.jobs)
            return [
                RunProfile.Hint(
                    text: "raise --jobs to \(facts.cores): \(u.jobs) workers left cores unused",
                    figure: figure + ", --jobs \(u.jobs) of \(facts.cores) cores",
                    saves: "up to \(percent(1 - 1 / more)) of the wall time")
            ]
        }
        return [
            RunProfile.Hint(
                text:
                    "workers were idle with a job per core: reading the sources is the likely limit (a network share, a slow disk); copy the photos to a local disk first",
                figure: figure, saves: "up to \(percent(idle)) of the wall time")
        ]
    }

    /// The output disk: writing the store files.
    static func disk(_ facts: HintFacts) -> [RunProfile.Hint] {
        let total = facts.stages.values.reduce(0) { $0 + $1.totalSeconds }
        guard let write = facts.stages[Stage.write.rawValue]?.totalSeconds, total > 1, write / total >= 0.2 else {
            return []
        }
        return [
            RunProfile.Hint(
                text:
                    "writing store files (flush, close, rename) took \(percent(write / total)) of the stage time: put the output folder on a faster local disk",
                figure: "write: \(seconds(write)) of \(seconds(total))",
                saves: "most of \(seconds(write))")
        ]
    }

    /// A format that costs far more than its share of the items.
    static func slowFormats(_ facts: HintFacts) -> [RunProfile.Hint] {
        guard facts.byFormat.count > 1 else { return [] }
        return facts.byFormat.filter { $0.timeShare >= 0.2 && $0.timeShare >= 1.5 * $0.itemShare }.map { group in
            let figure =
                "\(group.name): \(percent(group.itemShare)) of items, \(percent(group.timeShare)) of time, p50 \(String(format: "%.0f", group.p50Ms)) ms"
            if ["HEIF", "AVIF"].contains(group.name) {
                return RunProfile.Hint(
                    text:
                        "\(group.name) is the decoder's cost (libheif): converting those photos ahead costs the same decode, so only cores help; a separate run for them on a larger machine keeps the rest of the night short",
                    figure: figure, saves: "\(seconds(wall(group.seconds, facts))) off this run")
            }
            return RunProfile.Hint(
                text:
                    "\(group.name) sources take \(percent(group.timeShare)) of the time for \(percent(group.itemShare)) of the items: a separate run for them keeps the rest of the night short",
                figure: figure, saves: "\(seconds(wall(group.seconds, facts))) off this run")
        }
    }

    /// The largest sources, when they dominate the time.
    static func largeSources(_ facts: HintFacts) -> [RunProfile.Hint] {
        guard facts.bySize.count > 1 else { return [] }
        return facts.bySize.filter { $0.timeShare >= 0.4 && $0.itemShare < 0.2 }.map { group in
            RunProfile.Hint(
                text:
                    "sources of \(group.name) take \(percent(group.timeShare)) of the time: limits.maxPixels can refuse the largest, if the app needs no such photos",
                figure: "\(group.name): \(percent(group.itemShare)) of items, \(percent(group.timeShare)) of time",
                saves: "\(seconds(wall(group.seconds, facts))) of worker time")
        }
    }

    /// A few files that take far longer than the rest, by name.
    static func slowestFiles(_ facts: HintFacts) -> [RunProfile.Hint] {
        let total = facts.decodedSeconds
        guard facts.decodedItems >= 10, total > 1 else { return [] }
        let mean = total / Double(facts.decodedItems)
        let outliers = facts.slowest.prefix(5).filter { $0.seconds >= 10 * mean }
        let sum = outliers.reduce(0) { $0 + $1.seconds }
        guard !outliers.isEmpty, sum / total >= 0.1 else { return [] }
        return [
            RunProfile.Hint(
                text:
                    "\(outliers.count == 1 ? "one file takes" : "\(outliers.count) files take") \(percent(sum / total)) of the time: check \(outliers.count == 1 ? "it" : "them") (an oversized or damaged photo) or leave \(outliers.count == 1 ? "it" : "them") out",
                figure: outliers.map { "\($0.source) \(seconds($0.seconds))" }.joined(separator: ", ")
                    + String(format: "; the mean item %.0f ms", mean * 1000),
                saves: "\(seconds(sum)) of worker time")
        ]
    }

    /// Worker start-up, when runs are short.
    static func startup(_ facts: HintFacts) -> [RunProfile.Hint] {
        guard let u = facts.utilisation, u.wallSeconds > 1 else { return [] }
        let share = u.workerStartupSeconds / max(u.wallSeconds * Double(u.jobs), 1e-9)
        guard share >= 0.1 else { return [] }
        return [
            RunProfile.Hint(
                text: "worker start-up is \(percent(share)) of the run: fewer, larger runs spread it",
                figure: "\(u.workersStarted) workers, \(String(format: "%.0f", u.workerStartupMeanMs)) ms each",
                saves: "most of \(seconds(u.workerStartupSeconds / Double(max(u.jobs, 1))))")
        ]
    }

    /// Colour conversion of sources whose profile is not sRGB.
    static func colour(_ facts: HintFacts) -> [RunProfile.Hint] {
        let workerStages: Set<String> = ["header", "decode", "colour", "scale", "clip", "encode", "store"]
        let workerTime = facts.stages.filter { workerStages.contains($0.key) }.values.reduce(0) {
            $0 + $1.totalSeconds
        }
        guard let colour = facts.stages[Stage.colour.rawValue]?.totalSeconds, workerTime > 0,
            colour / workerTime >= 0.1
        else { return [] }
        return [
            RunProfile.Hint(
                text:
                    "colour conversion (sources with profiles that are not sRGB) takes \(percent(colour / workerTime)) of the workers' time: photos exported as sRGB skip it",
                figure: "colour: \(seconds(colour)) of \(seconds(workerTime))",
                saves: "\(seconds(wall(colour, facts)))")
        ]
    }
}
