import Foundation

extension Run {
    /// The manifest a run was given: a file, a folder of photos, an app's
    /// `items.archive`, or `-` for a JSONL manifest on standard input.
    /// - Parameters:
    ///   - scanned: a folder run's scan (what it left out goes into the report).
    ///   - notice: what the user should hear of the input (files skipped, thumbnails kept).
    static func loadManifest(
        _ request: RunRequest, scanned: inout FolderScan.Result?, notice: (String) -> Void
    ) throws -> Manifest {
        let input = request.input
        let settings = request.settings
        if input == "-" {
            if request.standardInputClosed {
                throw ThumbpipeError(
                    .noInput, "standard input is closed: give it a JSONL manifest (thumbpipe run - < items.jsonl)")
            }
            // Read in chunks, as a file is: a million lines on a pipe are never held whole.
            var manifest = try Manifest.readJSONLines(
                descriptor: FileDescriptor(borrowing: 0), fileName: "stdin", folder: FileSystem.currentFolder)
            manifest.path = "stdin"
            manifest.modificationDate = Date()
            return manifest
        }
        if FileSystem.isFolder(input) {
            let found = try FolderScan.scan(
                [input], recursive: request.flags.recursive, extensions: request.flags.extensions,
                formats: settings.limits.formats)
            try FolderScan.checkRunInput(
                input, result: found, recursive: request.flags.recursive, output: request.output.path,
                archiveFileName: settings.archive.fileName, formats: settings.limits.formats)
            if let skipped = found.skippedSummary { notice("thumbpipe: \(input): \(skipped)") }
            for line in FolderScan.libraryNotes(found) { notice("warning: " + line) }
            for folder in found.unreadableFolders {
                notice(
                    "thumbpipe: \(input): cannot read sub-folder \(folder); its photos are not scanned, and items made from them keep their outputs"
                )
            }
            scanned = found
            let state =
                FileSystem.exists(request.output.layout.state)
                ? try RunState(output: request.output, readOnly: true) : nil
            let (result, _) = try FolderScan.keepingVanishedFolders(
                found, root: input, state: state, pruneMissing: request.flags.pruneMissing)
            return FolderScan.manifest(result, name: input)
        }
        if ArchiveInput.isArchive(input) {
            let result = try ArchiveInput.read(input)
            if result.keptThumbnails > 0 {
                notice(
                    "thumbpipe: \(result.keptThumbnails) items have no store file in \(URL(fileURLWithPath: input).deletingLastPathComponent().path): their archived thumbnails are kept as they are"
                )
            }
            if result.legacyThumbnails > 0 {
                notice(
                    "thumbpipe: \(result.legacyThumbnails) items archived a UIImage thumbnail (first edition): made again as thumbnailData from their store files"
                )
            }
            return result.manifest
        }
        return try Manifest.read(path: input)
    }
}
