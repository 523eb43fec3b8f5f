import Foundation
import ThumbpipeCore

/// `thumbpipe pipeline`: which pipelines there are and what they set.
enum PipelineCommand {
    static let help = """
        USAGE: thumbpipe pipeline show [NAME|FILE]
               thumbpipe pipeline list

        'show' prints the effective settings of a pipeline (default: homepwner) as a
        complete pipeline file: copy it to ~/.config/thumbpipe/pipelines/NAME.json,
        change what you need, and run with --pipeline NAME. 'list' prints every
        pipeline name with the file it comes from, or "built in".

        --pipeline NAME looks for NAME.json in these folders, in order, and takes
        the first it finds; a name none holds falls back to the pipelines built into
        the binary (homepwner, the Homepwner app's 40x40 pt thumbnail at scale 2
        with a 5 pt radius, and its JPEG store at quality 0.5):
          ./pipelines
          $THUMBPIPE_PIPELINES
          $XDG_CONFIG_HOME/thumbpipe/pipelines (default ~/.config/thumbpipe/pipelines)
          /etc/thumbpipe/pipelines
          PREFIX/share/thumbpipe/pipelines (PREFIX: the folder above the binary's bin/)
        A value with a '/' or ending in .json is a file's path.

        OPTIONS:
          -q, --quiet         no line on standard error saying where it came from
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let positionals = try args.finish(command: "pipeline")
        let catalog = PipelineCatalog()
        switch positionals.first {
        case "show":
            guard positionals.count <= 2 else { throw ThumbpipeError(.usage, "pipeline show takes one NAME or FILE") }
            let (settings, origin) = try catalog.resolve(
                positionals.count == 2 ? positionals[1] : PipelineCatalog.defaultName)
            if !terminal.quiet { terminal.diagnostic("thumbpipe: pipeline '\(settings.name)' from \(origin)") }
            try writeOut(try settings.pipelineFileText() + "\n")
            return 0
        case "list":
            guard positionals.count == 1 else { throw ThumbpipeError(.usage, "pipeline list takes nothing more") }
            try writeOut(catalog.all().map { "\($0.name)\t\($0.origin)\n" }.joined())
            return 0
        case nil:
            throw ThumbpipeError(.usage, "pipeline needs 'show' or 'list' (see 'thumbpipe pipeline --help')")
        case let other?:
            let hint = Suggestion.closest(to: other, in: ["show", "list"]).map { "; did you mean '\($0)'?" } ?? ""
            throw ThumbpipeError(.usage, "unknown pipeline command '\(other)'\(hint)")
        }
    }
}
