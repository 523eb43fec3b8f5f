import Foundation

/// What changed in the settings since the last run into an output folder, and
/// what that redoes: a nightly run with a different `--scale` than last night's
/// says so before it redoes every thumbnail, never silently.
public struct SettingsChange: Sendable, Equatable {
    /// Each setting that differs, e.g. `thumbnail.scale 3 → 2`.
    public var differences: [String]
    /// How many thumbnails and store files the plan redoes for a settings change.
    public var thumbnailsRedone: Int
    public var storeFilesRedone: Int

    /// The state's record of the settings of the last run that finished.
    static let metaKey = "settings"

    /// Compares `settings` with those the state recorded; nil when there is no
    /// record (a first run) or nothing differs.
    public static func since(
        lastRunOf state: RunState?, to settings: PipelineSettings, plan: IncrementalPlan
    ) throws -> SettingsChange? {
        guard let state, let recorded = try state.meta(metaKey),
            let before = try? JSONParser.parse(Array(recorded.utf8)),
            let after = try? JSONParser.parse([UInt8](try settings.pipelineFileJSON()))
        else { return nil }
        let differences = Self.differences(before, after, prefix: "")
        guard !differences.isEmpty else { return nil }
        var change = SettingsChange(differences: differences, thumbnailsRedone: 0, storeFilesRedone: 0)
        for work in plan.work {
            if work.reasons.contains(.thumbnailSettingsChanged) { change.thumbnailsRedone += 1 }
            if work.reasons.contains(.storeSettingsChanged) { change.storeFilesRedone += 1 }
        }
        return change
    }

    /// Records `settings` as the last run's, once the run has finished.
    public static func record(_ settings: PipelineSettings, in state: RunState) throws {
        try state.setMeta(metaKey, String(decoding: try settings.pipelineFileJSON(), as: UTF8.self))
        try state.commit()
    }

    /// One line: `settings changed since the last run: thumbnail.scale 3 → 2; 33 thumbnails will be redone`.
    public var description: String {
        var redone: [String] = []
        if thumbnailsRedone > 0 { redone.append("\(thumbnailsRedone) thumbnail\(thumbnailsRedone == 1 ? "" : "s")") }
        if storeFilesRedone > 0 { redone.append("\(storeFilesRedone) store file\(storeFilesRedone == 1 ? "" : "s")") }
        return "settings changed since the last run: \(differences.joined(separator: ", "))"
            + (redone.isEmpty ? "" : "; \(redone.joined(separator: " and ")) will be redone")
    }

    private static func differences(_ a: JSONValue, _ b: JSONValue, prefix: String) -> [String] {
        guard case .object(let x, _) = a, case .object(let y, _) = b else {
            return a == b ? [] : ["\(prefix) \(text(a)) → \(text(b))"]
        }
        var result: [String] = []
        let keys = Set(x.map(\.key)).union(y.map(\.key)).subtracting(["name"]).sorted()
        for key in keys {
            let path = prefix.isEmpty ? key : prefix + "." + key
            let (left, right) = (a[key] ?? .null, b[key] ?? .null)
            if case .object = left, case .object = right {
                result += differences(left, right, prefix: path)
            } else if left != right {
                result.append("\(path) \(text(left)) → \(text(right))")
            }
        }
        return result
    }

    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: "(unset)"
        case .bool(let b): b ? "true" : "false"
        case .number(let n):
            Double(n).map { $0 == $0.rounded() && abs($0) < 1e15 ? String(Int64($0)) : String($0) } ?? n
        case .string(let s): s
        case .array(let items): items.map(text).joined(separator: ",")
        case .object: "{…}"
        }
    }
}
