import Foundation
import ThumbpipeCore

/// `thumbpipe scan`: a manifest of the images in folders.
enum ScanCommand {
    static let help = """
        USAGE: thumbpipe scan DIR... [-o FILE | --update FILE] [--recursive] [--ext LIST]

        Writes a manifest (JSONL) of the images in the folders, sorted by path: one
        item per image, named by its photo's title (XMP, IPTC, a sidecar) or else
        its file name without the extension, with its description when it has one,
        its image path relative to the manifest's folder (to the current folder on
        standard output), and an itemKey derived from its path inside the scanned
        folder, so a re-scan, a manifest saved elsewhere and 'thumbpipe run DIR'
        keep the same keys. Titles and descriptions are read by confined workers,
        as a run reads them (no pixel decoded). Files whose content is not an
        image are skipped (counted on stderr), whatever their names; hidden files
        and folders are skipped.

        OPTIONS:
          -o, --output FILE   write the manifest there (default: standard output)
          -r, --recursive     look in sub-folders too
          --force             with -o: overwrite an existing FILE (refused by default)
          --update FILE       add the photos FILE (a JSONL manifest) does not name yet
                              at its end, keep every line of it as it is, and list
                              the photos it names that are gone
          --ext LIST          only files with these extensions, e.g. jpg,jpeg,heic
          --no-metadata       read no photo: name items by their file names only
          -j, --jobs N        workers reading titles and descriptions (default: cores)
          -q, --quiet         no count of skipped files
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let output = try args.option("-o", "--output")
        let update = try args.option("--update")
        let recursive = args.flag("-r", "--recursive")
        let force = args.flag("--force")
        let extensions = try args.option("--ext").map { Set($0.split(separator: ",").map(String.init)) }
        let readsMetadata = !args.flag("--no-metadata")
        let jobs =
            try args.option("-j", "--jobs").map { text -> Int in
                guard let n = Int(text), (1...256).contains(n) else {
                    throw ThumbpipeError(.usage, "--jobs takes a number from 1 to 256, not '\(text)'")
                }
                return n
            } ?? ProcessInfo.processInfo.activeProcessorCount
        let folders = try args.finish(command: "scan")
        guard !folders.isEmpty else {
            throw ThumbpipeError(.usage, "scan needs at least one DIR (see 'thumbpipe scan --help')")
        }
        let result = try FolderScan.scan(folders, recursive: recursive, extensions: extensions)
        // The photos' titles and descriptions, read by workers (nil with --no-metadata).
        let metadata = { (entries: [FolderScan.Entry]) throws -> [ScanMetadata.Read]? in
            guard readsMetadata else { return nil }
            let (reads, warnings) = try ScanMetadata.read(entries.map(\.path), jobs: jobs)
            for warning in warnings.prefix(20) { terminal.warning(warning) }
            return reads
        }
        if let update {
            guard output == nil else { throw ThumbpipeError(.usage, "--update FILE and -o FILE: give one") }
            try Self.update(update, with: result, metadata: metadata, terminal: terminal)
        } else if let output {
            try writeManifest(result, to: output, force: force, metadata: metadata)
        } else {
            try writeOut(
                FolderScan.jsonLines(
                    result.entries, relativeTo: FileSystem.currentFolder, metadata: try metadata(result.entries)))
        }
        tell(result, recursive: recursive, terminal: terminal)
        terminal.summary(
            "thumbpipe: \(result.entries.count) images\(result.skippedSummary.map { "; \($0)" } ?? "")"
                + (output.map { " → \($0)" } ?? ""))
        return 0
    }

    /// `scan -o FILE`: the manifest written to FILE (never over an existing one
    /// unless forced, never over a photo the scan found), with its `.seen` list.
    static func writeManifest(
        _ result: FolderScan.Result, to output: String, force: Bool,
        metadata: ([FolderScan.Entry]) throws -> [ScanMetadata.Read]?
    ) throws {
        let base = URL(fileURLWithPath: output).deletingLastPathComponent().path
        do {
            try FileSystem.createFolder(base, intermediate: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(base): cannot create: \(ThumbpipeError.describe(error))")
        }
        var protected = ProtectedPaths()
        let photos = result.entries.map(\.path)
        protected.protect(files: { photos }, as: "a photo the scan found")
        let target = try OutputTarget.resolve(output, for: "-o", protecting: protected)
        // A manifest is where users type names and values: never overwritten unasked.
        if target.kind == .file && !force && FileSystem.exists(target.path) {
            throw ThumbpipeError(
                .cannotCreate,
                "\(output) exists (a manifest's names and values may have been edited there); --force overwrites it"
            )
        }
        let text = FolderScan.jsonLines(
            result.entries, relativeTo: base.isEmpty ? "." : base, metadata: try metadata(result.entries))
        try target.write(Data(text.utf8))
        if target.kind == .file {
            try FolderScan.Seen.write(
                Set(FolderScan.Seen.names(result.entries, manifest: target.path)), for: target.path)
        }
    }

    /// What the scan left out or could not read, named on stderr.
    static func tell(_ result: FolderScan.Result, recursive: Bool, terminal: Terminal) {
        // Named, not only counted: a JPEG libvips could read with warnings may be among them.
        for file in result.skippedFiles.prefix(20) {
            terminal.diagnostic("thumbpipe: skipped \(Terminal.shown(file.path)): \(file.kind)")
        }
        if result.skipped - result.badNames.count > 20 {
            terminal.diagnostic("thumbpipe: … and \(result.skipped - result.badNames.count - 20) more skipped")
        }
        for name in result.badNames.prefix(20) {
            terminal.diagnostic(
                "thumbpipe: skipped \(name): its name is not UTF-8; rename it (as UTF-8) to have it read")
        }
        for folder in result.unreadableFolders {
            terminal.warning("cannot read sub-folder \(folder); its photos are not listed")
        }
        if result.unreadableFiles > 0 {
            terminal.warning(
                "\(FolderScan.counted(result.unreadableFiles, "file")) cannot be read; listed, so their items fail and say why"
            )
        }
        if result.followedLinks > 0 {
            terminal.diagnostic("thumbpipe: followed \(FolderScan.counted(result.followedLinks, "symlink")) to folders")
        }
        if result.symlinkedFolders > 0 {
            terminal.diagnostic(
                "thumbpipe: \(FolderScan.counted(result.symlinkedFolders, "symlink")) to folders not followed (\(recursive ? "a loop, or a folder scanned anyway" : "add -r"))"
            )
        }
        for line in FolderScan.libraryNotes(result) { terminal.warning(line) }
    }

    /// `scan --update FILE`: the photos FILE does not name yet appended as new lines;
    /// its own lines kept byte for byte, in their order; the photos it names that
    /// are gone listed (their lines stay: whether they go is the user's call).
    static func update(
        _ path: String, with result: FolderScan.Result, metadata: ([FolderScan.Entry]) throws -> [ScanMetadata.Read]?,
        terminal: Terminal
    ) throws {
        guard path.hasSuffix(".jsonl") || path.hasSuffix(".ndjson") else {
            throw ThumbpipeError(.usage, "--update takes a JSONL manifest (.jsonl), not \(path)")
        }
        let manifest = try Manifest.read(path: path)
        let named = Set(manifest.items.compactMap { $0.imagePath.map { FolderScan.absolute($0) } })
        // A photo this manifest named once and no longer does: the user deleted its line; it stays out.
        let seen = FolderScan.Seen.read(for: path)
        let names = FolderScan.Seen.names(result.entries, manifest: path)
        let fresh = zip(result.entries, names).filter { !named.contains(FolderScan.absolute($0.0.path)) }
        let added = fresh.filter { !seen.contains($0.1) }.map(\.0)
        let excluded = fresh.count - added.count
        let namedNow = Set(manifest.items.compactMap { $0.image })
        let gone = manifest.items.filter { item in item.imagePath.map { FileInfo(path: $0) == nil } ?? false }
        var text: Data
        do { text = try FileSystem.contents(of: path) } catch {
            throw ThumbpipeError(.noInput, "\(path): cannot read: \(error)")
        }
        if !added.isEmpty {
            if let last = text.last, last != UInt8(ascii: "\n") { text.append(UInt8(ascii: "\n")) }
            let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
            let lines = FolderScan.jsonLines(
                added, relativeTo: base.isEmpty ? "." : base, metadata: try metadata(added))
            text.append(Data(lines.utf8))
            // Written as every -o FILE is: atomically, a symlink followed to the file it names.
            try OutputTarget.resolve(path, for: "--update", protecting: ProtectedPaths()).write(text)
        }
        try FolderScan.Seen.write(
            seen.union(namedNow).union(FolderScan.Seen.names(added, manifest: path)), for: path)
        if excluded > 0 {
            terminal.diagnostic(
                "thumbpipe: \(path): \(excluded) photos left out: their lines were deleted from it (\(FolderScan.Seen.path(for: path)) remembers them; remove their names there to add them again)"
            )
        }
        for item in gone.prefix(20) {
            terminal.warning("\(path):\(item.line): \(item.image ?? "") (\(item.itemName)) is gone; its line is kept")
        }
        if gone.count > 20 { terminal.warning("… and \(gone.count - 20) more photos gone") }
        terminal.summary(
            "thumbpipe: \(path): \(added.count) new photos added, \(manifest.items.count) lines kept as they were"
                + (gone.isEmpty ? "" : ", \(gone.count) photos gone"))
    }
}
