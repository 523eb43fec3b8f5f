import Foundation
import ThumbpipeCore

/// `thumbpipe report`: a run's report as one self-contained HTML page.
enum ReportCommand {
    static let help = """
        USAGE: thumbpipe report OUT [-o FILE] [--against OTHER]

        Draws OUT/.thumbpipe/report.json as one HTML page (inline CSS and SVG, no
        script, nothing from the network): the run's settings and figures, stage
        time, per-stage histograms, throughput and memory over the run, item time
        against size by format, the 20 slowest items with their thumbnails, and
        the failures and warnings; and against another run (by default the one
        before it in OUT): per stage and format the median and 95th percentile then
        and now, throughput and memory then and now, the items whose time changed
        most. 'run' writes it after every run unless --no-html.

        OPTIONS:
          -o, --output FILE   where to write it (default: OUT/.thumbpipe/report.html)
          --against OTHER     compare with OTHER: an output folder or a report.json
                              (default: the run before it in OUT/.thumbpipe/reports)
          -q, --quiet         no summary line
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let target = try args.option("-o", "--output")
        let against = try args.option("--against").map(HTMLReport.Against.read)
        let positionals = try args.finish(command: "report")
        guard positionals.count == 1 else { throw ThumbpipeError(.usage, "report takes one output folder") }
        var protected = ProtectedPaths()
        let output = OutputFolder(positionals[0])
        protected.protect(output: output, archiveFileName: "items.archive")
        let resolved = try target.map { try OutputTarget.resolve($0, for: "-o", protecting: protected) }
        let path = try HTMLReport.write(from: output, to: resolved, against: against)
        terminal.summary("thumbpipe: report → \(path)")
        return 0
    }
}
