import Foundation
import ThumbpipeCore

extension RunCommand {
    /// The lines a finished run ends with: the plan's classes (moves and removals
    /// named), the trace's cap, the duplicates, the guessed dates and the totals.
    static func printSummary(_ report: RunReport, run: Run, trace: TraceWriter?, terminal: Terminal) {
        if report.classes.contains(where: { $0.key != .new && $0.value > 0 }) {
            terminal.diagnostic("thumbpipe: \(report.planSummary); \(report.incremental.decoded) decoded")
            let moved = report.incremental.movedItems
            for move in moved.prefix(20) {
                terminal.diagnostic("  moved: \(Terminal.shown(move.itemName)) \(move.from) → \(move.to)")
            }
            if moved.count > 20 {
                let more = moved.count == RunReport.listedItems ? "at least \(moved.count - 20)" : "\(moved.count - 20)"
                terminal.diagnostic("  moved: … and \(more) more (see report.json)")
            }
            if report.incremental.removed > 0 {
                terminal.diagnostic(
                    IncrementalPlan.list(
                        report.incremental.removedItems, total: report.incremental.removed, limit: 20,
                        prefix: "  removed: "))
            }
        }
        if let trace, trace.droppedItems > 0 {
            terminal.warning(
                "the trace reached its \(TraceWriter.defaultByteLimit >> 20) MB cap: \(trace.droppedItems) items after it are not in it; --trace-sample N traces one item in N over the whole run"
            )
        }
        if !report.duplicates.isEmpty {
            let items = report.duplicates.reduce(0) { $0 + $1.count }
            let capped = items >= RunState.duplicateItemLimit
            let count = capped ? "at least \(items)" : "\(items)"
            terminal.diagnostic(
                "thumbpipe: \(count) items share their photo with another (the same content): "
                    + DuplicateItem.line(report.duplicates.map { $0.map(\.itemName) })
                    + (report.duplicates.count > 5 || capped ? " (see duplicates in the report)" : ""))
        }
        for line in report.datesFromFileTimeSummary { terminal.diagnostic(Terminal.shown(line)) }
        let total = run.manifest.items.count
        let failed = report.failures.count
        let known = report.failures.filter { $0.known == true }.count
        // The wall time of the whole command (planning, state, archive and report included),
        // not only the items' part: what a user timing the night sees.
        let wall = ProcessClock.secondsSinceStart() ?? Date().timeIntervalSince(mainStarted)
        let rate = Double(total) / max(wall, 1e-9)
        let archive = "\(run.request.output.path)/\(run.request.settings.archive.fileName)"
        terminal.diagnostic(
            "thumbpipe: \(total) items in \(String(format: "%.2f", wall)) s (\(String(format: "%.1f", rate)) items/s): "
                + "\(report.counts.succeeded) done\(report.warnings.isEmpty ? "" : " (\(report.warnings.count) with warnings)"), \(failed) failed\(known > 0 ? " (\(known) known from earlier runs)" : ""), \(report.counts.withoutImage) without image → \(archive)"
        )
    }
}
