import Foundation
import ThumbpipeCore

extension RunCommand {
    /// Prints a dry run's plan: counts, then one line per item that is not unchanged.
    static func printPlan(
        _ plan: IncrementalPlan, manifest: Manifest, json: Bool, settingsChange: SettingsChange? = nil
    )
        throws
    {
        let counts = plan.counts
        if json {
            var items: [[String: Any]] = zip(manifest.items.indices, zip(manifest.items, plan.work)).map {
                position, pair in
                let (item, work) = pair
                var entry: [String: Any] = [
                    "itemKey": item.itemKey, "itemName": item.itemName, "source": item.image ?? "", "line": item.line,
                    "class": work.itemClass.rawValue,
                    "thumbnail": work.needsThumbnail, "store": work.needsStore, "reason": work.reason,
                ]
                if let old = plan.moves[position], old != item.itemKey { entry["movedFrom"] = old }
                return entry
            }
            items += plan.removed.map {
                [
                    "itemKey": $0.itemKey, "itemName": $0.itemName, "source": $0.source, "class": "removed",
                    "reason": "not in the manifest",
                ]
            }
            let object: [String: Any] = [
                "counts": Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }), "items": items,
                "changedBy": plan.changeKinds,
                "settingsChanged": settingsChange?.differences ?? [],
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]) {
                try printOut(String(decoding: data, as: UTF8.self))
            }
            return
        }
        if let settingsChange { try printOut(settingsChange.description) }
        try printOut("plan: " + plan.summary)
        for (position, (item, work)) in zip(manifest.items.indices, zip(manifest.items, plan.work))
        where work.itemClass != .unchanged {
            let outputs = [work.needsThumbnail ? "thumbnail" : nil, work.needsStore ? "store" : nil].compactMap { $0 }
            // The app knows items by key: a move to a new key names both.
            let key =
                plan.moves[position].map { $0 == item.itemKey ? item.itemKey : "\($0) → \(item.itemKey)" }
                ?? item.itemKey
            try printOut(
                "  \(work.itemClass.rawValue)\t\(column(item.itemName))\t\(column(item.image ?? "(no image)"))\t\(key)\t\(work.reason)\t\(outputs.joined(separator: "+"))"
            )
        }
        for item in plan.removed {
            try printOut(
                "  removed\t\(column(item.itemName))\t\(column(item.source))\t\(item.itemKey)\tnot in the manifest")
        }
    }

    /// A name or path as one column of the dry run: tabs, newlines and backslashes escaped
    /// (`\t`, `\n`, `\\`), other control characters shown as the terminal shows them.
    static func column(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\\": out += "\\\\"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return Terminal.shown(out)
    }
}
