import Foundation
import ThumbpipeCore

/// `thumbpipe contact-sheet`: every thumbnail of an archive on one page (or several).
enum ContactSheetCommand {
    static let help = """
        USAGE: thumbpipe contact-sheet ARCHIVE -o SHEET.png [--columns N] [--per-sheet N]

        Draws every thumbnail of ARCHIVE in a grid on a neutral grey background,
        each with its item name under it; items without a thumbnail show as a dark
        box. Each character of a name is drawn with an installed font that has it;
        names with characters no font has are counted in a warning that says which
        font package to install. Past --per-sheet items (default 100) it continues in SHEET-2.png,
        SHEET-3.png and so on. A sheet has at most 64 Mpx, so its memory stays
        near 256 MB whatever the thumbnails' size: large thumbnails get fewer
        columns and items per sheet.

        OPTIONS:
          -o, --output FILE   the first sheet's path (default: contact-sheet.png)
          --columns N         thumbnails per row (default 10)
          --per-sheet N       items per sheet (default 100)
          -q, --quiet         no summary line
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let output = try args.option("-o", "--output") ?? "contact-sheet.png"
        guard output.lowercased().hasSuffix(".png") else {
            throw ThumbpipeError(.usage, "contact-sheet writes PNG files: name the output .png, not '\(output)'")
        }
        let columns = try args.option("--columns").map { try Int(option: $0, name: "--columns", range: 1...200) } ?? 10
        let perSheet =
            try args.option("--per-sheet").map { try Int(option: $0, name: "--per-sheet", range: 1...100_000) } ?? 100
        let positionals = try args.finish(command: "contact-sheet")
        guard positionals.count == 1 else { throw ThumbpipeError(.usage, "contact-sheet takes one ARCHIVE") }
        var protected = ProtectedPaths()
        protected.protect(file: positionals[0], as: "the archive")
        let target = try OutputTarget.resolve(output, for: "-o", protecting: protected)
        let reader = try KeyedArchiveReader(path: positionals[0])
        try reader.checkKeysUnique()
        // Failed items are told from items without a photo by the run's report, when it is there.
        let folder = URL(fileURLWithPath: positionals[0]).deletingLastPathComponent().path
        let report = try? RunReport.read(OutputFolder(folder.isEmpty ? "." : folder).layout.report)
        let failures = Dictionary(
            (report?.failures ?? []).map { ($0.itemKey, $0.message) }, uniquingKeysWith: { first, _ in first })
        let paths = try ContactSheet.write(
            from: reader, to: target.kind == .file ? target.path : output, columns: columns, perSheet: perSheet,
            failures: failures, target: target, warn: { terminal.warning("contact-sheet: " + $0) })
        terminal.summary(
            "thumbpipe: \(reader.count) items on \(paths.count) sheet(s): \(paths.joined(separator: ", "))")
        return 0
    }
}
