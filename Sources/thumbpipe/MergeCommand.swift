import Foundation
import ThumbpipeCore

/// `thumbpipe merge`: joins shard outputs.
enum MergeCommand {
    static let help = """
        USAGE: thumbpipe merge PART... -o OUT

        Joins the partial output folders of 'thumbpipe run MANIFEST --shard K/N' (one
        per shard, 0 to N-1) into OUT: store files hard-linked when on the same file
        system (copied otherwise), the archive's items in manifest order (byte-identical
        to a single-machine run), the reports summed. Parts from different manifests or
        settings, a missing shard or a shard given twice are refused before anything
        is written.
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = Arguments.forCommand(argv, help: help) else { return 0 }
        guard let output = try args.option("-o", "--output") else {
            throw ThumbpipeError(.usage, "merge needs -o OUT")
        }
        let parts = try args.finish(command: "merge")
        let result = try Merge.run(parts: parts, output: output)
        terminal.diagnostic(
            "thumbpipe: merged \(parts.count) parts: \(result.items) items, \(result.linked) store files linked, \(result.copied) copied"
                + (result.removed > 0 ? ", \(result.removed) gone items' store files removed" : "")
                + (result.failures > 0 ? ", \(result.failures) failed in their parts" : "") + " → \(output)"
        )
        return result.failures > 0 ? 1 : 0
    }
}
