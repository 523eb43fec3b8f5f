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
            let before = PipelineSettings(recorded: recorded)
        else { return nil }
        let after = settings.summary
        let differences = zip(before.summary, after).compactMap { old, new in
            old.value == new.value ? nil : "\(new.key) \(old.value) → \(new.value)"
        }
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
}

extension PipelineSettings {
    /// The settings a state recorded (a pipeline file's JSON): every setting it
    /// names that this thumbpipe knows; nil when it is not such JSON.
    init?(recorded: String) {
        guard case .object(let sections, _)? = try? JSONParser.parse(Array(recorded.utf8)) else { return nil }
        self.init()
        for section in sections {
            guard case .object(let members, _) = section.value else { continue }
            for member in members { try? set("\(section.key).\(member.key)", member.value, at: "state") }
        }
    }
}
