import Foundation

/// Two runs side by side on one page (`report OUT --against OTHER`, and every
/// run's page against the run before it): per stage and per format the median
/// and 95th percentile then and now, throughput and peak memory then and now, and
/// the items whose time changed most. Bounded like the rest of the page: a few
/// stages, formats and items, whatever the runs' sizes.
extension HTMLReport {
    /// The run a page is compared with, and how the page names it.
    public struct Against: Sendable {
        public var report: RunReport
        /// `the previous run (2026-12-04T02:31:05Z)`, `out-last-week`.
        public var label: String

        public init(report: RunReport, label: String) {
            self.report = report
            self.label = label
        }

        /// The run `path` names: an output folder (its report.json) or a report.json itself.
        /// - Throws: ``ThumbpipeError`` (66) when there is no report there, (65) when it is not one.
        public static func read(_ path: String) throws -> Against {
            let file = FileSystem.isFolder(path) ? OutputFolder(path).layout.report : path
            return Against(report: try RunReport.read(file), label: path)
        }

        /// The run before `report` in `output`'s history (`.thumbpipe/reports/`), if any.
        public static func previous(in output: OutputFolder, before report: RunReport) -> Against? {
            let folder = output.layout.reports
            let now = (report.startTime ?? "").filter { $0.isNumber || $0 == "T" || $0 == "Z" }
            let names = FileSystem.textNames(in: folder).filter { $0.hasSuffix(".json") && $0 != now + ".json" }
            guard let name = names.last(where: { now.isEmpty || $0 < now + ".json" }),
                let earlier = try? RunReport.read(folder + "/" + name)
            else { return nil }
            return Against(report: earlier, label: "the previous run (\(earlier.startTime ?? name))")
        }
    }

    /// The most items listed as having changed most.
    static let changedItems = 10

    static func against(_ now: RunReport, _ then: Against?) -> String {
        guard let then else { return "" }
        let old = then.report
        var html = "<section id=\"against\"><h2>Against \(e(then.label))</h2>"
        html += "<p class=\"muted\">Then: \(e(old.startTime ?? "?")), now: \(e(now.startTime ?? "?")).</p>"
        html += runFigures(now, old)
        html += stageTable(now, old)
        html += formatTable(now, old)
        html += changedItemsTable(now, old)
        return html + "</section>\n"
    }

    /// A change in percent, `+12 %`, or `–` when there is nothing to compare.
    static func change(_ then: Double?, _ now: Double?) -> String {
        guard let then, let now, then > 0 else { return "–" }
        let percent = (now - then) / then * 100
        return String(format: "%+.0f %%", percent)
    }

    private static func runFigures(_ now: RunReport, _ old: RunReport) -> String {
        let rows: [(String, Double?, Double?, (Double) -> String)] = [
            ("wall time", old.throughput.seconds, now.throughput.seconds, { String(format: "%.2f s", $0) }),
            ("items/s", old.throughput.itemsPerSecond, now.throughput.itemsPerSecond, { String(format: "%.1f", $0) }),
            (
                "images decoded/s", old.throughput.imagesPerSecond, now.throughput.imagesPerSecond,
                { String(format: "%.2f", $0) }
            ),
            (
                "source MB/s", old.throughput.sourceMegabytesPerSecond, now.throughput.sourceMegabytesPerSecond,
                { String(format: "%.1f", $0) }
            ),
            (
                "peak memory, all processes", Double(old.peakRSSBytes), Double(now.peakRSSBytes),
                { String(format: "%.1f MB", $0 / 1e6) }
            ),
            (
                "peak PSS", old.memory.peakPSSBytes.map(Double.init), now.memory.peakPSSBytes.map(Double.init),
                { String(format: "%.1f MB", $0 / 1e6) }
            ),
        ]
        var html =
            "<h3>Throughput and memory</h3><table><tr><th></th><th class=n>then</th><th class=n>now</th><th class=n>change</th></tr>"
        for (name, then, now, format) in rows {
            html +=
                "<tr><td>\(e(name))</td><td class=n>\(then.map(format) ?? "–")</td><td class=n>\(now.map(format) ?? "–")</td><td class=n>\(change(then, now))</td></tr>"
        }
        return html + "</table>"
    }

    private static func stageTable(_ now: RunReport, _ old: RunReport) -> String {
        let order = Dictionary(uniqueKeysWithValues: Stage.allCases.enumerated().map { ($1.rawValue, $0) })
        let stages = Set(now.stages.keys).union(old.stages.keys).sorted {
            (order[$0] ?? Int.max, $0) < (order[$1] ?? Int.max, $1)
        }
        var html =
            "<h3>By stage</h3><table><tr><th></th><th class=n>p50 then</th><th class=n>p50 now</th><th class=n>change</th><th class=n>p95 then</th><th class=n>p95 now</th><th class=n>change</th></tr>"
        for stage in stages.prefix(32) {
            let a = old.stages[stage], b = now.stages[stage]
            html +=
                "<tr><td>\(e(stage))</td>" + cells(a?.p50Ms, b?.p50Ms) + cells(a?.p95Ms, b?.p95Ms) + "</tr>"
        }
        return html + "</table>"
    }

    private static func formatTable(_ now: RunReport, _ old: RunReport) -> String {
        let before = Dictionary(
            (old.profile?.byFormat ?? []).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(
            (now.profile?.byFormat ?? []).map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let names = Set(before.keys).union(after.keys).sorted()
        guard !names.isEmpty else { return "" }
        var html =
            "<h3>By format</h3><table><tr><th></th><th class=n>items then</th><th class=n>items now</th><th class=n>p50 then</th><th class=n>p50 now</th><th class=n>change</th><th class=n>p95 then</th><th class=n>p95 now</th><th class=n>change</th></tr>"
        for name in names.prefix(32) {
            let a = before[name], b = after[name]
            html +=
                "<tr><td>\(e(name))</td><td class=n>\(a.map { "\($0.items)" } ?? "–")</td><td class=n>\(b.map { "\($0.items)" } ?? "–")</td>"
                + cells(a?.p50Ms, b?.p50Ms) + cells(a?.p95Ms, b?.p95Ms) + "</tr>"
        }
        return html + "</table>"
    }

    /// Then, now and the change of a time in milliseconds, as three cells.
    private static func cells(_ then: Double?, _ now: Double?) -> String {
        "<td class=n>\(then.map(SVGChart.milliseconds) ?? "–")</td><td class=n>\(now.map(SVGChart.milliseconds) ?? "–")</td><td class=n>\(change(then, now))</td>"
    }

    /// The items among both runs' slowest whose time changed most (the reports
    /// keep per-item times for their slowest items only).
    private static func changedItemsTable(_ now: RunReport, _ old: RunReport) -> String {
        let before = Dictionary(old.slowest.map { ($0.itemKey, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(now.slowest.map { ($0.itemKey, $0) }, uniquingKeysWith: { first, _ in first })
        let keys = Set(before.keys).union(after.keys)
        let ranked = keys.map { key in (key, (after[key]?.seconds ?? 0) - (before[key]?.seconds ?? 0)) }
            .sorted { abs($0.1) > abs($1.1) || (abs($0.1) == abs($1.1) && $0.0 < $1.0) }
        guard !ranked.isEmpty else { return "" }
        var html =
            "<h3>Items whose time changed most</h3><p class=\"muted\">Among either run's slowest items; – where the item was not among a run's slowest.</p><table><tr><th>item</th><th>source</th><th class=n>then</th><th class=n>now</th><th class=n>change</th></tr>"
        for (key, _) in ranked.prefix(changedItems) {
            let a = before[key], b = after[key]
            let name = (b ?? a)?.itemName ?? key
            html +=
                "<tr><td>\(e(name))</td><td>\(e((b ?? a)?.source ?? ""))</td><td class=n>\(a.map { String(format: "%.3f s", $0.seconds) } ?? "–")</td><td class=n>\(b.map { String(format: "%.3f s", $0.seconds) } ?? "–")</td><td class=n>\(change(a?.seconds, b?.seconds))</td></tr>"
        }
        return html + "</table>"
    }
}
