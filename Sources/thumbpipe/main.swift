import Foundation
import ThumbpipeCore

/// When `main` started: the wall time a run's summary gives counts from the
/// process's start (``ProcessClock``), and from here only when /proc cannot say.
let mainStarted = Date()

/// Whether standard input was closed when thumbpipe started (`run - <&-`). Its
/// descriptor, and those of stdout and stderr, are then held on /dev/null, so no
/// file thumbpipe opens can take their numbers (and be read or written as them).
let standardInputClosed: Bool = {
    let closed = !FileDescriptor.isOpen(0)
    for fd: Int32 in 0...2 where !FileDescriptor.isOpen(fd) {
        guard let null = try? FileDescriptor.open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) else { continue }
        if null.rawValue == fd {
            try? null.keepOnExec()
            _ = null.release()
        } else {
            try? null.duplicate(as: fd)
        }
    }
    return closed
}()

/// The `thumbpipe` command: a thin front over ThumbpipeCore.
let usage = """
    thumbpipe \(RunReport.version): turn a photo collection into a Homepwner item archive with
    thumbnails and a full-size JPEG image store, in one parallel batch over libvips.

    USAGE:
      thumbpipe run MANIFEST|DIR|- [-o OUT] [--pipeline NAME|FILE] [--jobs N] [--scale S] ...
      thumbpipe scan DIR... [-o FILE] [--recursive] [--ext LIST]
      thumbpipe inspect ARCHIVE [--json]
      thumbpipe extract ARCHIVE DIR
      thumbpipe contact-sheet ARCHIVE [-o SHEET.png]
      thumbpipe merge PART... -o OUT
      thumbpipe report OUT [-o FILE]
      thumbpipe pipeline show [NAME|FILE] | list
      thumbpipe --help | --version
      thumbpipe COMMAND --help

    COMMANDS:
      run       process a manifest (.jsonl, .ndjson, .json, .csv), a folder of photos or
                a JSONL manifest on stdin (-) into an output folder
      scan      write a manifest of the images in folders
      inspect   list the items of an items.archive
      extract   write the thumbnails of an items.archive as PNG files
      contact-sheet  draw all thumbnails of an items.archive in a grid, named
      merge     join the partial outputs of 'run --shard K/N' into one output
      report    draw a run's report as one self-contained HTML page with charts
      pipeline  print a pipeline's effective settings, or list the pipelines

    EXIT STATUS:
      0 all items done   1 some items failed   64 bad command line
      65 bad manifest, pipeline or archive   66 input cannot be opened
      73 output cannot be created   74 read/write failure   130/143 interrupted
    """

func main() -> Int32 {
    _ = standardInputClosed
    var arguments = Array(CommandLine.arguments.dropFirst())
    guard let command = arguments.first else {
        writeAll(2, usage + "\n")
        return ThumbpipeError.Kind.usage.rawValue
    }
    arguments.removeFirst()
    let terminal = Terminal(quiet: arguments.contains("-q") || arguments.contains("--quiet"))
    do {
        switch command {
        case "--help", "-h", "help":
            try printOut(usage)
            return 0
        case "--version", "-V", "version":
            try writeOut(BuildInfo.description + "\n")
            return 0
        case "run": return try RunCommand.main(arguments, terminal: terminal)
        case "inspect": return try InspectCommand.main(arguments)
        case "extract": return try ExtractCommand.main(arguments, terminal: terminal)
        case "contact-sheet": return try ContactSheetCommand.main(arguments, terminal: terminal)
        case "merge": return try MergeCommand.main(arguments, terminal: terminal)
        case "report": return try ReportCommand.main(arguments, terminal: terminal)
        case "scan": return try ScanCommand.main(arguments, terminal: terminal)
        case "pipeline": return try PipelineCommand.main(arguments, terminal: terminal)
        default:
            let commands = [
                "run", "scan", "inspect", "extract", "contact-sheet", "merge", "report", "pipeline", "help",
            ]
            var hint = Suggestion.closest(to: command, in: commands).map { "; did you mean '\($0)'?" } ?? ""
            // A folder or a manifest typed where the command goes: the likely fix is `run`.
            if hint.isEmpty, FileSystem.exists(command) {
                hint = "; to run it: thumbpipe run \(([command] + arguments).joined(separator: " "))"
            }
            throw ThumbpipeError(.usage, "unknown command '\(command)'\(hint) (see 'thumbpipe --help')")
        }
    } catch let error as ThumbpipeError {
        // A message of several lines (one item a line, as the --max-removed refusal
        // lists them) is shown line by line, each escaped on its own.
        terminal.error(
            error.message.split(separator: "\n", omittingEmptySubsequences: false).map {
                Terminal.shown(String($0))
            }.joined(separator: "\n"))
        return error.exitStatus
    } catch let error as RunCancelled {
        terminal.diagnostic("thumbpipe: stopped by signal \(error.signal); nothing partial was written")
        return error.exitStatus
    } catch {
        terminal.error("\(error)")
        return ThumbpipeError.Kind.software.rawValue
    }
}

if CommandLine.arguments.count == 2 && CommandLine.arguments[1] == Worker.footprintSubcommand {
    Allocator.configureForBatchWork()
    exit(Worker.printFootprint())
}
if CommandLine.arguments.count >= 2 && CommandLine.arguments[1] == Worker.subcommand {
    // A worker process of a run (see Worker): not a command for users.
    Allocator.configureForBatchWork()
    exit(Worker.main(arguments: Array(CommandLine.arguments.dropFirst(2))))
}
if CommandLine.arguments.count >= 2 && CommandLine.arguments[1] == "__docs" {
    // `make docs`: rewrites the generated option lists of the manual and the completions.
    exit(DocsCommand.main(Array(CommandLine.arguments.dropFirst(2))))
}
Allocator.configureForBatchWork()
if CommandLine.arguments.count >= 2 && CommandLine.arguments[1] == "run" {
    // A run's parent decodes nothing (its workers do): no libvips module to load.
    LibVips.loadNoModules()
}
// Past a file-size limit (ulimit -f) a write should fail with EFBIG and be
// reported (exit 74), not kill the process with SIGXFSZ.
signal(SIGXFSZ, SIG_IGN)
// A reader that goes away (`run … | head -2`) must not kill a run with its
// archive half-done: writes to it fail with EPIPE, which diagnostics ignore.
signal(SIGPIPE, SIG_IGN)
exit(main())
