import Foundation

/// An output's fingerprint: a hash of the settings that shape it and a hash of
/// the versions of the code that makes it (``OutputVersions``), as
/// `SETTINGS-CODE`, so a run can say whether an output is redone for a settings
/// change or for an upgrade.
enum Fingerprint {
    static func make(settings: String, code: String) -> String {
        ContentHash.hex(settings) + "-" + ContentHash.hex(code)
    }

    /// What moved between a recorded fingerprint and the current one.
    enum Change { case settings, code }

    /// Why `recorded` is not `current`: nil when equal; `.code` when only the
    /// code's half moved (an upgrade); `.settings` otherwise (a record of an older form too).
    static func change(from recorded: String, to current: String) -> Change? {
        guard recorded != current else { return nil }
        let old = recorded.split(separator: "-")
        let new = current.split(separator: "-")
        if old.count == 2, new.count == 2, old[0] == new[0] { return .code }
        return .settings
    }
}
