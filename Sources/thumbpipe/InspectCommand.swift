import Foundation
import ThumbpipeCore

/// `thumbpipe inspect`: lists an archive's items.
enum InspectCommand {
    static let help = """
        USAGE: thumbpipe inspect ARCHIVE [--json]

        Lists the items of an items.archive: key, name, serial number, value, date
        created and thumbnail size. With --json, one JSON object per item per line.
        A file that is not a valid items archive exits 65 with the reason.

        OPTIONS:
          --json              one JSON object per item per line
          -q, --quiet         nothing on standard error but errors
          -h, --help          this help
        """

    static func main(_ argv: [String]) throws -> Int32 {
        guard var args = try Arguments.forCommand(argv, help: help) else { return 0 }
        let json = args.flag("--json")
        let positionals = try args.finish(command: "inspect")
        guard positionals.count == 1 else { throw ThumbpipeError(.usage, "inspect takes one ARCHIVE") }
        let reader = try KeyedArchiveReader(path: positionals[0])
        var rows: [[String]] = []
        for index in 0..<reader.count {
            let item = try reader.validItem(at: index)
            let date = ISO8601Format.string(item.dateCreated)
            let size = item.thumbnailData.flatMap(PNGInfo.size)
            if json {
                var object: [String: Any] = [
                    "itemKey": item.itemKey, "itemName": item.itemName, "serialNumber": item.serialNumber,
                    "valueInDollars": Int(item.valueInDollars), "dateCreated": date,
                ]
                if let data = item.thumbnailData {
                    object["thumbnailBytes"] = data.count
                    if let size { object["thumbnailWidth"] = size.width; object["thumbnailHeight"] = size.height }
                }
                let line = try JSONSerialization.data(
                    withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                try printOut(String(decoding: line, as: UTF8.self))
            } else {
                let thumb =
                    item.thumbnailData.map { data in
                        (size.map { "\($0.width)×\($0.height) " } ?? "") + "\(data.count) B"
                    } ?? "-"
                rows.append([
                    item.itemKey, Terminal.shown(item.itemName), Terminal.shown(item.serialNumber),
                    "$\(item.valueInDollars)", date, thumb,
                ])
            }
        }
        if !json {
            try printOut(
                Table.render(header: ["KEY", "NAME", "SERIAL", "VALUE", "DATE CREATED", "THUMBNAIL"], rows: rows))
            try printOut("\(reader.count) items (\(reader.className))")
        }
        return 0
    }
}

/// Column-aligned text tables.
enum Table {
    static func render(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
