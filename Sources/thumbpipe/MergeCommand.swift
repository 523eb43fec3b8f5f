import Foundation
import ThumbpipeCore

/// `thumbpipe merge`: joins shard outputs.
enum MergeCommand {
    static let help = """
        USAGE: thumbpipe merge PART... -o OUT [--run-id ID] [--wait SECONDS]

        Joins the partial output folders of 'thumbpipe run MANIFEST --shard K/N' (one
        per shard, 0 to N-1) into OUT: store files hard-linked when on the same file
        system (copied otherwise), the archive's items in manifest order (byte-identical
        to a single-machine run), the reports summed. Parts from different manifests or
        settings, a missing shard or a shard given twice are refused before anything
        is written. Each part is read under a shared lock: a part whose run is still
        going is refused (65), and no run can start on a part while it is merged.

        OPTIONS:
          -o, --output DIR     the merged output folder (required)
          --run-id ID          merge only parts that 'run --run-id ID' wrote: a part
                               left from an earlier run is refused (65), naming it
          --wait SECONDS       wait up to SECONDS for parts that are missing, still
                               running or from another run, then refuse (65) with
                               the part that was not ready (default 0: refuse at once)
          -q, --quiet          no waiting messages
          -h, --help           this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        guard let output = try args.option("-o", "--output") else {
            throw ThumbpipeError(.usage, "merge needs -o OUT")
        }
        let runId = try args.option("--run-id").map(RunIdentity.parse)
        let wait =
            try args.option("--wait").map { value -> Double in
                guard let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= 7 * 86_400 else {
                    throw ThumbpipeError(.usage, "--wait takes seconds from 0 to 604800, not '\(value)'")
                }
                return seconds
            } ?? 0
        let parts = try args.finish(command: "merge")
        let result = try Merge.run(parts: parts, output: output, runId: runId, wait: wait) { waiting in
            if !terminal.quiet { terminal.diagnostic("thumbpipe: waiting: \(waiting)") }
        }
        terminal.diagnostic(
            "thumbpipe: merged \(parts.count) parts: \(result.items) items, \(result.linked) store files linked, \(result.copied) copied"
                + (result.removed > 0 ? ", \(result.removed) gone items' store files removed" : "")
                + (result.failures > 0 ? ", \(result.failures) failed in their parts" : "") + " → \(output)"
        )
        return result.failures > 0 ? 1 : 0
    }
}
