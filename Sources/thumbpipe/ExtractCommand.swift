import Foundation
import ThumbpipeCore

/// `thumbpipe extract`: writes an archive's thumbnails as PNG files.
enum ExtractCommand {
    static let help = """
        USAGE: thumbpipe extract ARCHIVE DIR

        Writes each item's thumbnail as DIR/<itemKey>.png (DIR is created when
        missing). Items without a thumbnail are skipped.

        OPTIONS:
          -q, --quiet         no summary line
          -h, --help          this help
        """

    static func main(_ argv: [String], terminal: Terminal) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let positionals = try args.finish(command: "extract")
        guard positionals.count == 2 else { throw ThumbpipeError(.usage, "extract takes ARCHIVE and DIR") }
        let reader = try KeyedArchiveReader(path: positionals[0])
        try reader.checkKeysUnique()
        let folder = positionals[1]
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(folder): cannot create: \(error.localizedDescription)")
        }
        var written = 0
        for index in 0..<reader.count {
            let item = try reader.validItem(at: index)
            guard let data = item.thumbnailData else { continue }
            try TemporaryFile.write(data, to: "\(folder)/\(item.itemKey).png")
            written += 1
        }
        terminal.summary("thumbpipe: \(written) thumbnails of \(reader.count) items → \(folder)")
        return 0
    }
}
