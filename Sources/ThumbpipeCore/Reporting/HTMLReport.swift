import Foundation

/// `.thumbpipe/report.html`: one self-contained page (inline CSS and SVG, no
/// script, nothing from the network) that shows a run: where the time went,
/// which formats and sizes cost most, whether memory stayed flat, which items
/// failed. Its size follows the report's aggregates and samples, never the
/// run's item count (tables are capped).
public enum HTMLReport {
    /// Rows shown per failures or warnings table; the rest are counted.
    public static let tableRows = 500

    static let stageColours: [String: String] = [
        "header": "#9c755f", "decode": "#4e79a7", "colour": "#bab0ac", "store": "#f28e2b", "write": "#ff9da7",
        "scale": "#59a14f", "clip": "#e15759", "encode": "#76b7b2", "archive": "#edc948", "state": "#b07aa1",
    ]
    static let formatColours = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]

    /// Renders `report`; `thumbnails` gives PNG bytes by item key for the slowest items.
    /// With `against`, the page compares the run with that one (``against(_:_:)``).
    public static func render(_ report: RunReport, thumbnails: [String: Data] = [:], against: Against? = nil)
        -> String
    {
        var html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>thumbpipe report</title>
            <style>
            body{font-family:-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
            h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
            table{border-collapse:collapse;font-size:12px;width:100%}th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eee;vertical-align:top}
            th{background:#f6f6f6}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
            .facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:6px 16px;font-size:13px}
            .facts b{display:block;font-size:11px;color:#666;font-weight:normal}
            .charts{display:flex;flex-wrap:wrap;gap:12px}.muted{color:#777;font-size:12px}
            img.thumb{width:40px;height:40px;image-rendering:auto}
            </style></head><body>

            """
        html += header(report)
        html += hints(report)
        html += Self.against(report, against)
        html += stageBar(report)
        html += profile(report)
        html += histograms(report)
        html += timeline(report)
        html += scatter(report)
        html += slowest(report, thumbnails: thumbnails)
        html += failures(report)
        html += warnings(report)
        html += incremental(report)
        html += leftOut(report)
        html += datesFromFileTime(report)
        html +=
            "<p class=\"muted\">thumbpipe \(e(report.thumbpipeVersion)) · this page is self-contained: it loads nothing.</p>\n</body></html>\n"
        return html
    }

    /// Renders the report of an output folder and writes it (atomically) to `path`,
    /// by default `OUT/.thumbpipe/report.html`.
    /// - Returns: the path written.
    /// - Throws: ``ThumbpipeError`` (66) without a report, (74) when the page cannot be written.
    /// The page compares the run with `against`, by default the run before it in the
    /// folder's history.
    @discardableResult
    public static func write(from output: OutputFolder, to path: OutputTarget? = nil, against: Against? = nil) throws
        -> String
    {
        let report = try RunReport.read(output.layout.report)
        var thumbnails: [String: Data] = [:]
        let archive = output.layout.archive(report.settings?.archive.fileName ?? "items.archive")
        if let reader = try? KeyedArchiveReader(path: archive) {
            for item in report.slowest {
                guard let position = item.position, position < reader.count,
                    let archived = try? reader.validItem(at: position), archived.itemKey == item.itemKey,
                    let png = archived.thumbnailData
                else { continue }
                thumbnails[item.itemKey] = png
            }
        }
        let compared = against ?? Against.previous(in: output, before: report)
        return try Self.write(render(report, thumbnails: thumbnails, against: compared), in: output, to: path)
    }

    /// Renders the report of the run that just ended from the JSON it wrote
    /// (so the page is the one ``write(from:to:)`` would draw from the
    /// file, figures rounded alike), with the thumbnails its slowest items carry
    /// in memory: nothing is read back from disk.
    public static func render(justRun report: RunReport, written json: Data, against: Against? = nil) throws -> String {
        var thumbnails: [String: Data] = [:]
        for item in report.slowest { thumbnails[item.itemKey] = item.thumbnail }
        return render(try RunReport.decoded(json), thumbnails: thumbnails, against: against)
    }

    /// Writes a rendered page (atomically) to `path`, by default `OUT/.thumbpipe/report.html`.
    /// - Returns: the path written.
    @discardableResult
    public static func write(_ page: String, in output: OutputFolder, to target: OutputTarget? = nil) throws -> String {
        let target = target ?? .own(output.layout.html)
        try target.write(Data(page.utf8))
        return target.path
    }

    // MARK: - Sections

    static func header(_ r: RunReport) -> String {
        let seconds = r.throughput.seconds
        var facts: [(String, String)] = [
            ("manifest", r.manifest ?? (r.mergedFrom.map { "merged from \($0.count) parts" } ?? "?")),
            ("output", r.output ?? "?"), ("started", r.startTime ?? "?"),
            ("wall time", String(format: "%.2f s", seconds)),
            ("items", "\(r.counts.items)"), ("items/s", String(format: "%.1f", r.throughput.itemsPerSecond)),
            ("images decoded/s", String(format: "%.2f", r.throughput.imagesPerSecond)),
            ("source MB/s", String(format: "%.1f", r.throughput.sourceMegabytesPerSecond)),
            ("done", "\(r.counts.succeeded) (\(r.counts.withWarnings) with warnings)"),
            ("failed", "\(r.counts.failed)"), ("without image", "\(r.counts.withoutImage)"),
            ("peak memory, all processes", megabytes(r.peakRSSBytes)),
            ("peak memory, parent", megabytes(r.memory.parentPeakRSSBytes)),
            ("peak memory, largest worker", megabytes(r.memory.largestWorkerPeakRSSBytes)),
            ("jobs", r.jobs.map(String.init) ?? "?"), ("thumbpipe", r.thumbpipeVersion),
        ]
        if let s = r.settings {
            facts.append(
                (
                    "thumbnail",
                    "\(s.thumbnail.pixelWidth)×\(s.thumbnail.pixelHeight) px, radius \(SVGChart.number(s.thumbnail.pixelRadius)) px"
                ))
            facts.append(("store", "JPEG Q\(s.store.vipsQuality), \(s.store.orientation.rawValue)"))
            facts.append(("formats", s.limits.formats.sorted.map(\.rawValue).joined(separator: ", ")))
            facts.append(("timeout", "\(SVGChart.number(s.limits.timeoutSeconds)) s"))
        }
        var html = "<header id=\"run\"><h1>thumbpipe run</h1><div class=\"facts\">"
        for (name, value) in facts { html += "<div><b>\(e(name))</b>\(e(value))</div>" }
        return html + "</div></header>\n"
    }

    static func stageBar(_ r: RunReport) -> String {
        // Longest first; equal times by name, so the page does not follow a dictionary's order.
        let stages = r.stages.sorted {
            ($0.value.totalSeconds, $1.key) > ($1.value.totalSeconds, $0.key)
        }
        let total = stages.reduce(0) { $0 + $1.value.totalSeconds }
        var chart = SVGChart(width: 1000, height: 80)
        var x = chart.left
        let width = chart.plotWidth
        for (stage, summary) in stages where total > 0 {
            let w = width * summary.totalSeconds / total
            chart.bar(
                x: x, y: 30, width: w, height: 22, fill: stageColours[stage] ?? "#999",
                title:
                    "\(stage): \(String(format: "%.2f", summary.totalSeconds)) s (\(percent(summary.totalSeconds, total)))"
            )
            x += w
        }
        chart.legend(
            stages.map { ("\($0.key) \(percent($0.value.totalSeconds, total))", stageColours[$0.key] ?? "#999") })
        var html = "<section id=\"stages\"><h2>Where the time went</h2>"
        html +=
            "<p class=\"muted\">Stage time summed over items (\(String(format: "%.1f", total)) s in all, across every worker).</p>"
        html +=
            chart.svg(title: "stage time, stacked")
            + "<table><tr><th>stage</th><th>items</th><th>p50</th><th>p95</th><th>max</th><th>total</th><th>what it measures</th></tr>"
        for (stage, s) in stages {
            let definition = Stage(rawValue: stage)?.definition ?? ""
            html +=
                "<tr><td>\(e(stage))</td><td class=n>\(s.count)</td><td class=n>\(s.p50Ms.map { SVGChart.milliseconds($0) } ?? "–")</td><td class=n>\(s.p95Ms.map { SVGChart.milliseconds($0) } ?? "–")</td><td class=n>\(SVGChart.milliseconds(s.maxMs))</td><td class=n>\(String(format: "%.2f s", s.totalSeconds))</td><td class=\"muted\">\(e(definition))</td></tr>"
        }
        return html + "</table></section>\n"
    }

    static func histograms(_ r: RunReport) -> String {
        var html = "<section id=\"histograms\"><h2>Time per item, per stage</h2><div class=\"charts\">"
        for (stage, buckets) in r.histograms.sorted(by: { $0.key < $1.key }) where !buckets.isEmpty {
            // Re-bin the 2 % buckets into 24 logarithmic bins for drawing.
            let values = buckets.map { ($0.first ?? 0, $0.count > 1 ? $0[1] : 0) }
            let lo = max(values.map(\.0).min() ?? 0.001, 0.001)
            let hi = max(values.map(\.0).max() ?? 1, lo * 10)
            let axis = SVGChart.Axis(lo / 1.2, hi * 1.2, logarithmic: true)
            var bins = [Double](repeating: 0, count: 24)
            for (ms, count) in values {
                let i = min(23, Int(axis.fraction(ms) * 24))
                bins[i] += count
            }
            var chart = SVGChart(width: 330, height: 190)
            let yAxis = SVGChart.Axis(0, max(1, bins.max() ?? 1))
            chart.axes(
                x: axis, y: yAxis, xLabel: "\(stage) time (log)", yLabel: "items", xFormat: SVGChart.milliseconds)
            for (i, count) in bins.enumerated() where count > 0 {
                let x0 = chart.left + chart.plotWidth * Double(i) / 24
                let top = chart.y(count, yAxis)
                chart.bar(
                    x: x0 + 0.5, y: top, width: chart.plotWidth / 24 - 1, height: chart.y(0, yAxis) - top,
                    fill: stageColours[stage] ?? "#999", title: "\(Int(count)) items")
            }
            html += chart.svg(title: "\(stage) histogram")
        }
        return html + "</div></section>\n"
    }

    static func timeline(_ r: RunReport) -> String {
        var html = "<section id=\"timeline\"><h2>Throughput and memory over the run</h2>"
        guard r.timeline.count >= 2 else {
            return html + "<p class=\"muted\">The run was too short to sample.</p></section>\n"
        }
        let end = r.timeline.last?.t ?? 1
        let tAxis = SVGChart.Axis(0, max(end, 0.001))
        var rate: [(Double, Double)] = []
        for (a, b) in zip(r.timeline, r.timeline.dropFirst()) where b.t > a.t {
            rate.append((b.t, Double(b.items - a.items) / (b.t - a.t)))
        }
        var throughput = SVGChart(width: 500, height: 200)
        let rAxis = SVGChart.Axis(0, max(1, rate.map(\.1).max() ?? 1) * 1.1)
        throughput.axes(x: tAxis, y: rAxis, xLabel: "seconds", yLabel: "items/s")
        throughput.polyline(rate, x: tAxis, y: rAxis, stroke: "#4e79a7")
        var memory = SVGChart(width: 500, height: 200)
        let mAxis = SVGChart.Axis(0, Double(r.timeline.map(\.rssBytes).max() ?? 1) / 1e6 * 1.1)
        memory.axes(x: tAxis, y: mAxis, xLabel: "seconds", yLabel: "MB resident (all processes)")
        memory.polyline(r.timeline.map { ($0.t, Double($0.rssBytes) / 1e6) }, x: tAxis, y: mAxis, stroke: "#e15759")
        html += "<div class=\"charts\">" + throughput.svg(title: "items per second over time")
        html += memory.svg(title: "resident memory over time") + "</div></section>\n"
        return html
    }

    static func scatter(_ r: RunReport) -> String {
        var html = "<section id=\"scatter\"><h2>Item time against size</h2>"
        guard !r.sample.isEmpty else { return html + "<p class=\"muted\">No item was decoded.</p></section>\n" }
        let formats = Array(Set(r.sample.map(\.format))).sorted()
        let colour = Dictionary(
            uniqueKeysWithValues: formats.enumerated().map { ($1, formatColours[$0 % formatColours.count]) })
        let xAxis = SVGChart.Axis(0, max(0.1, r.sample.map(\.megapixels).max() ?? 1) * 1.05)
        let yAxis = SVGChart.Axis(0, max(0.001, r.sample.map(\.seconds).max() ?? 1) * 1.05)
        var chart = SVGChart(width: 1000, height: 300)
        chart.axes(x: xAxis, y: yAxis, xLabel: "megapixels", yLabel: "seconds per item")
        for point in r.sample {
            chart.point(point.megapixels, point.seconds, x: xAxis, y: yAxis, fill: colour[point.format] ?? "#999")
        }
        chart.legend(formats.map { ($0, colour[$0] ?? "#999") })
        html +=
            "<p class=\"muted\">\(r.sample.count) items\(r.sample.count >= 2000 ? ", an even sample of all decoded items" : "").</p>"
        return html + chart.svg(title: "seconds per item against megapixels, by format") + "</section>\n"
    }

    static func slowest(_ r: RunReport, thumbnails: [String: Data]) -> String {
        var html = "<section id=\"slowest\"><h2>The \(r.slowest.count) slowest items</h2>"
        guard !r.slowest.isEmpty else { return html + "<p class=\"muted\">No item was decoded.</p></section>\n" }
        let stages = Array(Set(r.slowest.flatMap { $0.stages.keys })).sorted()
        html +=
            "<table><tr><th></th><th>key</th><th>name</th><th>line</th><th>source</th><th>format</th><th>size</th><th>total</th>"
        html += stages.map { "<th>\(e($0))</th>" }.joined() + "</tr>"
        for item in r.slowest {
            let image =
                thumbnails[item.itemKey].map {
                    "<img class=\"thumb\" alt=\"\" src=\"data:image/png;base64,\($0.base64EncodedString())\">"
                } ?? ""
            html +=
                "<tr class=\"slow\" data-key=\"\(e(item.itemKey))\"><td>\(image)</td><td>\(e(item.itemKey))</td><td>\(e(item.itemName))</td>"
            html += "<td class=n>\(item.line)</td><td>\(e(item.source))</td><td>\(e(item.format))</td>"
            html += "<td class=n>\(item.width)×\(item.height), \(megabytes(Int(item.bytes)))</td>"
            html += "<td class=n>\(String(format: "%.3f s", item.seconds))</td>"
            html += stages.map { "<td class=n>\(item.stages[$0].map { String(format: "%.3f", $0) } ?? "")</td>" }
                .joined()
            html += "</tr>"
        }
        return html + "</table></section>\n"
    }

    static func failures(_ r: RunReport) -> String {
        table(
            id: "failures", title: "Failures", rowClass: "failure",
            columns: ["line", "key", "source", "stage", "message"],
            rows: r.failures.map { ["\($0.line)", $0.itemKey, $0.source, $0.stage.rawValue, $0.message] })
    }

    static func warnings(_ r: RunReport) -> String {
        table(
            id: "warnings", title: "Warnings", rowClass: "warning", columns: ["line", "key", "source", "messages"],
            rows: r.warnings.map { ["\($0.line)", $0.itemKey, $0.source, $0.messages.joined(separator: "; ")] })
    }

    /// What a folder run's scan left out, and what to do about each.
    static func leftOut(_ r: RunReport) -> String {
        guard let l = r.leftOut, !l.isEmpty else { return "" }
        var facts: [String] = []
        let skipped = l.skipped.values.reduce(0, +)
        if skipped > 0 {
            let kinds = l.skipped.sorted { $0.value > $1.value }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            facts.append("<div><b>files skipped</b>\(skipped): \(e(kinds))</div>")
        }
        if !l.namesNotUTF8.isEmpty {
            facts.append("<div><b>names not UTF-8 (rename them to have them read)</b>\(l.namesNotUTF8.count)</div>")
        }
        if l.hidden > 0 { facts.append("<div><b>hidden files and folders (never scanned)</b>\(l.hidden)</div>") }
        if l.symlinkedFolders > 0 {
            facts.append(
                "<div><b>folders behind symlinks (not followed: name them to scan them)</b>\(l.symlinkedFolders)</div>")
        }
        if l.subfolders > 0 { facts.append("<div><b>sub-folders (add -r to scan them)</b>\(l.subfolders)</div>") }
        var html = "<section id=\"left-out\"><h2>Left out of the scan</h2><div class=\"facts\">"
        html += facts.joined() + "</div>"
        let rows = l.skippedFiles.map { ["", $0.path, $0.kind] } + l.namesNotUTF8.map { ["", $0, "name not UTF-8"] }
        if !rows.isEmpty {
            html += "<table><tr><th>#</th><th>file</th><th>why</th></tr>"
            for (i, row) in rows.prefix(tableRows).enumerated() {
                html += "<tr><td class=n>\(i + 1)</td><td>\(e(row[1]))</td><td>\(e(row[2]))</td></tr>"
            }
            html += "</table>"
        }
        return html + "</section>\n"
    }

    /// A section with a table of at most ``tableRows`` rows (the first column is a number).
    static func table(id: String, title: String, rowClass: String, columns: [String], rows: [[String]]) -> String {
        var html = "<section id=\"\(id)\"><h2>\(title) (\(rows.count))</h2>"
        guard !rows.isEmpty else { return html + "<p class=\"muted\">None.</p></section>\n" }
        html += "<table><tr>" + columns.map { "<th>\(e($0))</th>" }.joined() + "</tr>"
        for row in rows.prefix(tableRows) {
            html += "<tr class=\"\(rowClass)\">"
            for (i, cell) in row.enumerated() { html += i == 0 ? "<td class=n>\(e(cell))</td>" : "<td>\(e(cell))</td>" }
            html += "</tr>"
        }
        html += "</table>"
        if rows.count > tableRows {
            html += "<p class=\"muted\">… and \(rows.count - tableRows) more in report.json.</p>"
        }
        return html + "</section>\n"
    }

    static func incremental(_ r: RunReport) -> String {
        let i = r.incremental
        guard i.unchanged + i.changed + i.removed + i.metadata + i.moved + i.kept > 0 else { return "" }
        let by = i.changedBy.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        var html = """
            <section id="incremental"><h2>Against the previous run</h2><div class="facts">
            <div><b>new</b>\(i.new)</div><div><b>changed</b>\(i.changed)\(by.isEmpty ? "" : " (\(e(by)))")</div>
            <div><b>metadata</b>\(i.metadata)</div><div><b>moved</b>\(i.moved)</div>
            <div><b>unchanged</b>\(i.unchanged)</div><div><b>removed</b>\(i.removed)</div>
            <div><b>kept (source missing)</b>\(i.kept)</div><div><b>decoded</b>\(i.decoded)</div>
            <div><b>time saved</b>\(String(format: "%.1f s", i.timeSavedSeconds))</div></div>
            """
        if !i.removedItems.isEmpty {
            html += "<h3>Removed</h3><table><tr><th>name</th><th>source</th><th>key</th></tr>"
            for item in i.removedItems {
                html += "<tr><td>\(e(item.itemName))</td><td>\(e(item.source))</td><td>\(e(item.itemKey))</td></tr>"
            }
            html += "</table>"
        }
        return html + "</section>\n"
    }

    static func e(_ text: String) -> String { SVGChart.escape(text) }

    private static func megabytes(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }

    private static func percent(_ part: Double, _ total: Double) -> String {
        total > 0 ? String(format: "%.0f %%", part / total * 100) : "–"
    }
}
