import Foundation
import ThumbpipeCore

extension RunCommand {
    /// The manifest `run` was given: a file, a folder of photos, or `-` for standard input.
    static func loadManifest(
        _ input: String, recursive: Bool, extensions: Set<String>?, settings: PipelineSettings, output: String,
        terminal: Terminal, scanned: inout FolderScan.Result?
    ) throws -> Manifest {
        if input == "-" {
            if standardInputClosed {
                throw ThumbpipeError(
                    .noInput, "standard input is closed: give it a JSONL manifest (thumbpipe run - < items.jsonl)")
            }
            // Read in chunks, as a file is: a million lines on a pipe are never held whole.
            var manifest = try Manifest.readJSONLines(
                descriptor: 0, fileName: "stdin", folder: FileManager.default.currentDirectoryPath)
            manifest.path = "stdin"
            manifest.modificationDate = Date()
            return manifest
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), isDirectory.boolValue {
            let found = try FolderScan.scan(
                [input], recursive: recursive, extensions: extensions, formats: settings.limits.formats)
            try FolderScan.checkRunInput(
                input, result: found, recursive: recursive, output: output,
                archiveFileName: settings.archive.fileName, formats: settings.limits.formats)
            if let skipped = found.skippedSummary { terminal.diagnostic("thumbpipe: \(input): \(skipped)") }
            scanned = found
            let state =
                FileManager.default.fileExists(atPath: RunState.path(in: output))
                ? try RunState(folder: output, readOnly: true) : nil
            let (result, _) = try FolderScan.keepingVanishedFolders(found, root: input, state: state)
            return FolderScan.manifest(result, name: input)
        }
        if ArchiveInput.isArchive(input) {
            let result = try ArchiveInput.read(input)
            if result.keptThumbnails > 0 {
                terminal.diagnostic(
                    "thumbpipe: \(result.keptThumbnails) items have no store file in \(URL(fileURLWithPath: input).deletingLastPathComponent().path): their archived thumbnails are kept as they are"
                )
            }
            if result.legacyThumbnails > 0 {
                terminal.diagnostic(
                    "thumbpipe: \(result.legacyThumbnails) items archived a UIImage thumbnail (first edition): made again as thumbnailData from their store files"
                )
            }
            return result.manifest
        }
        return try Manifest.read(path: input)
    }
}
