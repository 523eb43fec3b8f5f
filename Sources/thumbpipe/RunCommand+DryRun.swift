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
            var items: [[String: Any]] = zip(manifest.items, plan.work).map { item, work in
                [
                    "itemKey": item.itemKey, "itemName": item.itemName, "source": item.image ?? "", "line": item.line,
                    "class": work.itemClass.rawValue,
                    "thumbnail": work.needsThumbnail, "store": work.needsStore, "reason": work.reason,
                ]
            }
            items += plan.removed.map {
                [
                    "itemKey": $0.itemKey, "itemName": $0.itemName, "source": $0.sourcePath, "class": "removed",
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
        for (item, work) in zip(manifest.items, plan.work) where work.itemClass != .unchanged {
            let outputs = [work.needsThumbnail ? "thumbnail" : nil, work.needsStore ? "store" : nil].compactMap { $0 }
            try printOut(
                "  \(work.itemClass.rawValue)\t\(item.itemName)\t\(item.image ?? "(no image)")\t\(item.itemKey)\t\(work.reason)\t\(outputs.joined(separator: "+"))"
            )
        }
        for item in plan.removed {
            try printOut("  removed\t\(item.itemName)\t\(item.sourcePath)\t\(item.itemKey)\tnot in the manifest")
        }
    }
}
