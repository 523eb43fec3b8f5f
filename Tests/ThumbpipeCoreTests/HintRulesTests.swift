import Foundation
import Testing

@testable import ThumbpipeCore

/// The report's hints, rule by rule, on crafted profiles: each appears when its
/// figures say the action helps, names the figure and what it would save, and
/// stays away when they do not.
@Suite("The profile's hints")
struct HintRulesTests {
    static func group(_ name: String, items: Double, time: Double, p50: Double = 10, total: Int = 100)
        -> RunProfile.Group
    {
        RunProfile.Group(
            name: name, items: Int(items * Double(total)), seconds: time * 100, itemShare: items, timeShare: time,
            p50Ms: p50, p95Ms: p50 * 2)
    }

    static func stage(_ seconds: Double) -> StageTimings.Summary {
        StageTimings.Summary(count: 100, p50Ms: 1, p95Ms: 2, maxMs: 3, totalSeconds: seconds)
    }

    static func utilisation(jobs: Int, idle: [Double], waiting: Double = 0, wall: Double = 100)
        -> RunProfile.Utilisation
    {
        let busy = 1 - idle.reduce(0, +) / (wall * Double(jobs))
        return RunProfile.Utilisation(
            jobs: jobs, wallSeconds: wall, busyShare: busy, idleSecondsPerSlot: idle, waitingOnParentSeconds: waiting,
            workersStarted: jobs, workerStartupSeconds: 0.05 * Double(jobs), workerStartupMeanMs: 50)
    }

    /// A quiet run: busy workers on 4 cores, an even mix of formats, nothing slow.
    static var quiet: HintFacts {
        var facts = HintFacts()
        facts.cores = 4
        facts.byFormat = [group("JPEG", items: 0.5, time: 0.5), group("PNG", items: 0.5, time: 0.5)]
        facts.bySize = [group("4–12 Mpx", items: 0.5, time: 0.5), group("12–24 Mpx", items: 0.5, time: 0.5)]
        facts.utilisation = utilisation(jobs: 4, idle: [3, 3, 3, 3])
        facts.loadAverage = 4.0
        facts.stages = ["decode": stage(200), "store": stage(150), "write": stage(5)]
        facts.slowest = [("a.jpg", 1.2), ("b.jpg", 1.1)]
        return facts
    }

    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var change: @Sendable (inout HintFacts) -> Void
        /// The start of the one hint expected, or nil for none.
        var expected: String?
        /// Text the figure must hold.
        var figure: String = ""
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(name: "a quiet run: nothing to say", change: { _ in }, expected: nil),
        Case(
            name: "idle workers with fewer jobs than cores: raise --jobs",
            change: {
                $0.utilisation = utilisation(jobs: 2, idle: [40, 40])
                $0.loadAverage = 1.2
            }, expected: "raise --jobs to 4", figure: "idle 40 % per slot"),
        Case(
            name: "idle workers with a job per core on an idle machine: the sources' reads",
            change: { $0.utilisation = utilisation(jobs: 4, idle: [30, 30, 30, 30]) },
            expected: "workers were idle with a job per core: reading the sources", figure: "idle 30 % per slot"),
        Case(
            name: "idle workers waiting on the parent: not more jobs",
            change: { $0.utilisation = utilisation(jobs: 4, idle: [40, 40, 40, 40], waiting: 120) },
            expected: "workers waited on the parent 30 %", figure: "waiting on the parent 120 s"),
        Case(
            name: "a loaded machine: other processes took the CPU",
            change: {
                $0.utilisation = utilisation(jobs: 4, idle: [5, 5, 5, 5])
                $0.loadAverage = 9
            }, expected: "the machine was loaded", figure: "load average 9.0 on 4 cores"),
        Case(
            name: "a load that is thumbpipe's own workers: nothing",
            change: { $0.loadAverage = 4.4 }, expected: nil),
        Case(
            name: "the disk: writes take a fifth of the stage time",
            change: { $0.stages["write"] = stage(120) }, expected: "writing store files", figure: "write: 120 s"),
        Case(
            name: "HEIF far over its share: the decoder's cost, nothing to convert ahead",
            change: {
                $0.byFormat = [
                    group("HEIF", items: 0.08, time: 0.61, p50: 900), group("JPEG", items: 0.92, time: 0.39),
                ]
            }, expected: "HEIF is the decoder's cost (libheif)", figure: "HEIF: 8 % of items, 61 % of time"),
        Case(
            name: "PNG far over its share: a separate run",
            change: { $0.byFormat = [group("PNG", items: 0.1, time: 0.5), group("JPEG", items: 0.9, time: 0.5)] },
            expected: "PNG sources take 50 % of the time for 10 % of the items", figure: "PNG: 10 %"),
        Case(
            name: "the largest sources take most of the time",
            change: {
                $0.bySize = [group("24 Mpx and over", items: 0.1, time: 0.6), group("4–12 Mpx", items: 0.9, time: 0.4)]
            }, expected: "sources of 24 Mpx and over take 60 % of the time: limits.maxPixels",
            figure: "24 Mpx and over: 10 % of items"),
        Case(
            name: "a few files far slower than the rest, by name",
            change: { $0.slowest = [("huge/panorama.tif", 30), ("scan.png", 15), ("a.jpg", 1.2)] },
            expected: "2 files take 45 % of the time", figure: "huge/panorama.tif 30 s, scan.png 15 s"),
        Case(
            name:
                "JPEGs on libvips, slower than the planes, default settings: the costliest reason, and what to export",
            change: {
                $0.jpegPaths = [
                    group("planes", items: 0.80, time: 0.55, p50: 50),
                    group("libvips: CMYK", items: 0.16, time: 0.38, p50: 170),
                    group("libvips: grey", items: 0.04, time: 0.07, p50: 120),
                ]
            },
            expected:
                "16 JPEGs were stored through libvips: export those photos as RGB JPEGs with an RGB matrix/TRC profile or none (they have CMYK",
            figure: "p50 170 ms an item against 50 ms on the planes"),
        Case(
            name: "JPEGs on libvips because of the user's settings: those settings, by name",
            change: {
                $0.jpegPaths = [
                    group("planes", items: 0.5, time: 0.3, p50: 50), group("libvips", items: 0.5, time: 0.7, p50: 170),
                ]
                $0.settingsOffPlanes = ["store.keepMetadata"]
            }, expected: "50 JPEGs were stored through libvips: set store.keepMetadata back to the default"),
        Case(
            name: "JPEGs on libvips as fast as the planes: no advice for the planes",
            change: {
                $0.jpegPaths = [
                    group("planes", items: 0.5, time: 0.5, p50: 60), group("libvips", items: 0.5, time: 0.5, p50: 58),
                ]
            }, expected: nil),
        Case(
            name: "colour conversion a tenth of the workers' time",
            change: { $0.stages["colour"] = stage(50) }, expected: "colour conversion", figure: "colour: 50 s of 400 s"),
    ]

    @Test("One rule a row: the hint, its figure and what it saves, or nothing", arguments: cases)
    func rule(_ row: Case) {
        var facts = Self.quiet
        row.change(&facts)
        let hints = HintRules.hints(facts)
        guard let expected = row.expected else {
            #expect(hints.isEmpty, "\(hints)")
            return
        }
        #expect(hints.count == 1, "one hint: \(hints)")
        let hint = hints.first
        #expect(hint?.text.hasPrefix(expected) == true, "\(hints)")
        if !row.figure.isEmpty { #expect(hint?.figure.contains(row.figure) == true, "\(hints)") }
        #expect(hint?.saves?.isEmpty == false, "every hint says what it would save: \(hints)")
    }

    @Test("No hint cites a setting at its default as a cause")
    func noDefaultSettingBlamed() {
        var facts = Self.quiet
        facts.jpegPaths = [
            Self.group("planes", items: 0.5, time: 0.3, p50: 50),
            Self.group("libvips", items: 0.5, time: 0.7, p50: 170),
        ]
        let text = HintRules.hints(facts).map(\.text).joined(separator: "\n")
        for setting in PipelineSettings.Store().settingsOffPlanes + ["store.keepMetadata", "store.orientation"] {
            #expect(!text.contains(setting), "\(text)")
        }
        #expect(PipelineSettings.Store().settingsOffPlanes.isEmpty)
        var tagged = PipelineSettings.Store()
        tagged.orientation = .tag
        tagged.keepMetadata = true
        #expect(tagged.settingsOffPlanes == ["store.keepMetadata", "store.orientation tag"])
    }
}
