import Foundation

/// A dry run's plan as text (counts, then one line per item that is not
/// unchanged) or as JSON: what `run --dry-run` prints.
public enum PlanText {
    /// The plan of `manifest`, each line of it in order.
    public static func lines(
        _ plan: IncrementalPlan, manifest: Manifest, json: Bool, settingsChange: SettingsChange? = nil
    ) -> [String] {
        var lines: [String] = []
        func printOut(_ line: String) { lines.append(line) }
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
                printOut(String(decoding: data, as: UTF8.self))
            }
            return lines
        }
        if let settingsChange { printOut(settingsChange.description) }
        printOut("plan: " + plan.summary)
        for (position, (item, work)) in zip(manifest.items.indices, zip(manifest.items, plan.work))
        where work.itemClass != .unchanged {
            let outputs = [work.needsThumbnail ? "thumbnail" : nil, work.needsStore ? "store" : nil].compactMap { $0 }
            // The app knows items by key: a move to a new key names both.
            let key =
                plan.moves[position].map { $0 == item.itemKey ? item.itemKey : "\($0) → \(item.itemKey)" }
                ?? item.itemKey
            printOut(
                "  \(work.itemClass.rawValue)\t\(column(item.itemName))\t\(column(item.image ?? "(no image)"))\t\(key)\t\(work.reason)\t\(outputs.joined(separator: "+"))"
            )
        }
        for item in plan.removed {
            printOut(
                "  removed\t\(column(item.itemName))\t\(column(item.source))\t\(item.itemKey)\tnot in the manifest")
        }
        return lines
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
        return shown(out)
    }

    /// Text from a manifest, an archive or a file name as a terminal may show it:
    /// control characters (an escape sequence that clears the screen or retitles
    /// the window, a carriage return that hides the line) become visible `\u{1B}`.
    public static func shown(_ text: String) -> String {
        func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
