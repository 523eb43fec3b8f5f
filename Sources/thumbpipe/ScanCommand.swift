import Foundation
import ThumbpipeCore

/// `thumbpipe scan`: a manifest of the images in folders.
enum ScanCommand {
    static let help = """
        USAGE: thumbpipe scan DIR... [-o FILE] [--recursive] [--ext LIST]

        Writes a manifest (JSONL) of the images in the folders, sorted by path: one
        item per image, named by its file name without the extension, its image
        path relative to the manifest's folder (to the current folder on standard
        output), and an itemKey derived from its path inside the scanned folder, so
        a re-scan, a manifest saved elsewhere and 'thumbpipe run DIR' keep the same
        keys. Files whose content is not an image are skipped (counted on stderr),
        whatever their names; hidden files and folders are skipped.

        OPTIONS:
          -o, --output FILE   write the manifest there (default: standard output)
          -r, --recursive     look in sub-folders too
          --force             with -o: overwrite an existing FILE (refused by default)
          --ext LIST          only files with these extensions, e.g. jpg,jpeg,heic
          -q, --quiet         no count of skipped files
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let output = try args.option("-o", "--output")
        let recursive = args.flag("-r", "--recursive")
        let force = args.flag("--force")
        let extensions = try args.option("--ext").map { Set($0.split(separator: ",").map(String.init)) }
        let folders = try args.finish(command: "scan")
        guard !folders.isEmpty else {
            throw ThumbpipeError(.usage, "scan needs at least one DIR (see 'thumbpipe scan --help')")
        }
        let result = try FolderScan.scan(folders, recursive: recursive, extensions: extensions)
        if let output {
            let base = URL(fileURLWithPath: output).deletingLastPathComponent().path
            do {
                try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
            } catch {
                throw ThumbpipeError(.cannotCreate, "\(base): cannot create: \(ThumbpipeError.describe(error))")
            }
            var protected = ProtectedPaths()
            let photos = result.entries.map(\.path)
            protected.protect(files: { photos }, as: "a photo the scan found")
            let target = try OutputTarget.resolve(output, for: "-o", protecting: protected)
            // A manifest is where users type names and values: never overwritten unasked.
            if target.kind == .file && !force && FileManager.default.fileExists(atPath: target.path) {
                throw ThumbpipeError(
                    .cannotCreate,
                    "\(output) exists (a manifest's names and values may have been edited there); --force overwrites it"
                )
            }
            let text = FolderScan.jsonLines(result.entries, relativeTo: base.isEmpty ? "." : base)
            try target.write(Data(text.utf8))
        } else {
            try writeOut(FolderScan.jsonLines(result.entries, relativeTo: FileManager.default.currentDirectoryPath))
        }
        terminal.summary(
            "thumbpipe: \(result.entries.count) images\(result.skippedSummary.map { "; \($0)" } ?? "")"
                + (output.map { " → \($0)" } ?? ""))
        return 0
    }
}
