import Foundation
import ThumbpipeCore

/// `thumbpipe extract`: writes an archive's thumbnails as PNG files.
enum ExtractCommand {
    static let help = """
        USAGE: thumbpipe extract ARCHIVE DIR

        Writes each item's thumbnail as DIR/<itemKey>.png (DIR is created when
        missing). Items without a thumbnail are skipped. A key too long for a file
        name with .png (over 251 bytes) is written as its first 200 bytes, '~' and
        a hash of the whole key, and listed on stderr.

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
            try FileSystem.createFolder(folder, intermediate: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(folder): cannot create: \(error.localizedDescription)")
        }
        var written = 0
        for index in 0..<reader.count {
            let item = try reader.validItem(at: index)
            guard let data = item.thumbnailData else { continue }
            let name = fileName(forKey: item.itemKey)
            if name != item.itemKey + ".png" {
                terminal.diagnostic(
                    Terminal.shown("thumbpipe: key too long for a file name: \(item.itemKey) → \(name)"))
            }
            try TemporaryFile.write(data, to: "\(folder)/\(name)")
            written += 1
        }
        terminal.summary("thumbpipe: \(written) thumbnails of \(reader.count) items → \(folder)")
        return 0
    }

    /// `<key>.png`, or, past NAME_MAX (255 bytes), the key's first 200 bytes
    /// (whole characters), `~` and the key's hash: unique, and still readable.
    static func fileName(forKey key: String) -> String {
        guard key.utf8.count + 4 > 255 else { return key + ".png" }
        var head = ""
        for character in key {
            guard head.utf8.count + character.utf8.count <= 200 else { break }
            head.append(character)
        }
        return head + "~" + ContentHash.hex(key) + ".png"
    }
}
