import Foundation

/// The report page's profile: hints first, where the workers' time went by
/// format and size class, how busy they were, and the items dated by file time.
extension HTMLReport {
    static func hints(_ r: RunReport) -> String {
        guard let hints = r.profile?.hints, !hints.isEmpty else { return "" }
        var html =
            "<section id=\"hints\"><h2>What to change</h2><table><tr><th>hint</th><th>the figure</th><th>it would save</th></tr>"
        for hint in hints {
            html += "<tr><td>\(e(hint.text))</td><td>\(e(hint.figure))</td><td>\(e(hint.saves ?? ""))</td></tr>"
        }
        return html + "</table></section>\n"
    }

    static func profile(_ r: RunReport) -> String {
        guard let p = r.profile else { return "" }
        func table(_ title: String, _ groups: [RunProfile.Group]) -> String {
            var html =
                "<h3>\(e(title))</h3><table><tr><th></th><th class=n>items</th><th class=n>share of items</th><th class=n>time</th><th class=n>share of time</th><th class=n>p50</th><th class=n>p95</th></tr>"
            for g in groups {
                html +=
                    "<tr><td>\(e(g.name))</td><td class=n>\(g.items)</td><td class=n>\(RunProfile.percent(g.itemShare))</td><td class=n>\(String(format: "%.2f s", g.seconds))</td><td class=n>\(RunProfile.percent(g.timeShare))</td><td class=n>\(SVGChart.milliseconds(g.p50Ms))</td><td class=n>\(SVGChart.milliseconds(g.p95Ms))</td></tr>"
            }
            return html + "</table>"
        }
        var html = "<section id=\"profile\"><h2>By format and size</h2>"
        html += "<p class=\"muted\">Decoded items' time, all their worker stages.</p>"
        html += table("by format", p.byFormat) + table("by store path", p.byPath) + table("by size", p.bySize)
        if let u = p.utilisation {
            html += "<h3>Workers</h3><div class=\"facts\">"
            html +=
                "<div><b>busy</b>\(RunProfile.percent(u.busyShare)) of \(String(format: "%.1f", u.wallSeconds)) s × \(u.jobs)</div>"
            html +=
                "<div><b>idle per slot</b>\(u.idleSecondsPerSlot.map { String(format: "%.1f s", $0) }.joined(separator: ", "))</div>"
            html += "<div><b>waiting on the parent</b>\(String(format: "%.2f s", u.waitingOnParentSeconds))</div>"
            html +=
                "<div><b>start-up</b>\(u.workersStarted) workers, \(String(format: "%.0f ms", u.workerStartupMeanMs)) each</div>"
            html += "</div>"
        }
        return html + "</section>\n"
    }

    static func datesFromFileTime(_ r: RunReport) -> String {
        guard !r.datesFromFileTime.isEmpty else { return "" }
        var html =
            "<section id=\"dates\"><h2>Dated by file time</h2><p class=\"muted\">\(r.datesFromFileTimeCount) items have no usable EXIF date: their dateCreated is the file's modification time, a guess to check after a migration\(r.datesFromFileTimeCount > r.datesFromFileTime.count ? " (the first \(r.datesFromFileTime.count) listed)" : "").</p>"
        html += "<table><tr><th>line</th><th>key</th><th>source</th><th>why</th></tr>"
        for guess in r.datesFromFileTime.prefix(200) {
            html +=
                "<tr><td class=n>\(guess.line)</td><td>\(e(guess.itemKey))</td><td>\(e(guess.source))</td><td>\(e(guess.reason))</td></tr>"
        }
        return html + "</table></section>\n"
    }
}
