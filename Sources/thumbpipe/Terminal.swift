import Foundation
import Synchronization
import ThumbpipeCore

/// stderr output: diagnostics, and a progress bar only on a terminal.
final class Terminal: Sendable {
    private struct State {
        var lastDraw: UInt64 = 0
        var barShown = false
        var failures = 0
    }
    let showProgress: Bool
    /// `-q`/`--quiet`: no progress bar, no waiting messages.
    let quiet: Bool
    let colour: Bool
    /// stderr is the journal (systemd's `JOURNAL_STREAM` names its device and
    /// inode): every line carries its syslog priority, `<3>` to `<6>`.
    let journal: Bool
    private let started = DispatchTime.now().uptimeNanoseconds
    private let state = Mutex(State())

    init(quiet: Bool) {
        let environment = ProcessInfo.processInfo.environment
        let tty = isatty(STDERR_FILENO) == 1
        self.quiet = quiet
        showProgress = tty && !quiet && environment["TERM"] != "dumb"
        journal = JournalStream.isStandardError(environment["JOURNAL_STREAM"])
        colour = tty && !journal && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
    }

    /// syslog priorities, as the journal reads a `<N>` prefix.
    enum Priority: Int {
        case error = 3, warning = 4, notice = 5, info = 6
    }

    /// Writes one diagnostic line to stderr, clearing the progress bar first; to
    /// the journal, each of its lines with `priority`.
    func diagnostic(_ line: String, priority: Priority = .info) {
        let text = journal ? JournalStream.prefixed(line, priority: priority.rawValue) : line
        state.withLock { state in
            if state.barShown { Self.write("\r\u{1B}[2K") }
            state.barShown = false
            Self.write(text + "\n")
        }
    }

    /// Text from a manifest, an archive or a file name as a terminal may show it:
    /// control characters (an escape sequence that clears the screen or retitles
    /// the window, a carriage return that hides the line) become visible `\u{1B}`.
    static func shown(_ text: String) -> String { PlanText.shown(text) }

    /// A command's closing summary line, which `-q` silences.
    func summary(_ line: String) { if !quiet { diagnostic(line) } }

    /// Warnings and errors, coloured on a terminal.
    func warning(_ text: String) {
        diagnostic(colour ? "\u{1B}[33mwarning:\u{1B}[0m \(text)" : "warning: \(text)", priority: .warning)
    }
    func error(_ text: String) {
        diagnostic(colour ? "\u{1B}[31merror:\u{1B}[0m \(text)" : "error: \(text)", priority: .error)
    }

    /// Counts a failure for the bar.
    func countFailure() { state.withLock { $0.failures += 1 } }

    /// The terminal's width in columns (80 when it cannot tell).
    static func columns() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return Int(ProcessInfo.processInfo.environment["COLUMNS"] ?? "") ?? 80
    }

    /// The bar's line for a terminal `columns` wide: never wider (so it never wraps
    /// into a new line per redraw), dropping the bar first, then the rate.
    static func progressLine(done: Int, total: Int, elapsed: Double, failures: Int, columns: Int) -> String {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let count = "\(done)/\(total)"
        let failed = failures > 0 ? "  \(failures) failed" : ""
        let times = "  \(duration(elapsed)) elapsed, ETA \(duration(eta))"
        let speed = String(format: "  %.1f/s", rate)
        var text = count + failed + times + speed
        if text.count > columns - 1 { text = count + failed + times }
        if text.count > columns - 1 { text = count + failed }
        let room = columns - 1 - text.count - 1
        guard room >= 10 else { return String(text.prefix(max(1, columns - 1))) }
        let width = min(30, room)
        let filled = total > 0 ? width * done / total : width
        return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled) + " " + text
    }

    /// Redraws the bar: count, failures, elapsed time, ETA and rate, at most ten times a second.
    func progress(done: Int, total: Int) {
        guard showProgress else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { state in
            guard done == total || now - state.lastDraw > 100_000_000 else { return }
            state.lastDraw = now
            let elapsed = Double(now - started) / 1e9
            let line = Self.progressLine(
                done: done, total: total, elapsed: elapsed, failures: state.failures, columns: Self.columns())
            Self.write("\r\u{1B}[2K" + line)
            state.barShown = true
            if done == total {
                Self.write("\r\u{1B}[2K")
                state.barShown = false
            }
        }
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600
            ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }

    static func write(_ text: String) {
        writeAll(2, text)
    }
}

/// Standard output, for data and help: one line.
/// - Throws: ``ThumbpipeError`` (74) when it cannot be written.
func printOut(_ text: String) throws {
    try writeOut(text + "\n")
}

/// Writes data a command was asked for to standard output.
/// A reader that went away (`inspect --json | head -1`: EPIPE) ends the command
/// at once, quietly, with status 0, as ripgrep does: what it wanted it has.
/// Only commands that print data call this (the dry run, inspect, scan, pipeline),
/// never a run that is writing an output folder.
/// - Throws: ``ThumbpipeError`` (74) when it cannot all be written (a full disk,
///   a closed descriptor): the output a user asked for never ends silently short.
func writeOut(_ text: String) throws {
    do { try FileDescriptor.standardOutput.write(text) } catch {
        if error.rawValue == EPIPE { exit(0) }
        throw ThumbpipeError(.ioError, "cannot write to standard output: \(error)")
    }
}

/// Writes all of `text` to `fd`; a closed descriptor or a reader that went away
/// (EBADF, EPIPE) loses the text, never the run.
func writeAll(_ fd: Int32, _ text: String) {
    try? FileDescriptor(borrowing: fd).write(text)
}
