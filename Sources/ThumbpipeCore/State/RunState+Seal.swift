import Foundation

/// What a run leaves in its state for the next night's "nothing to do": the
/// archive it wrote, sealed by fingerprint, stamp and hash, and the duplicates
/// it found (a night with nothing to do does not look for them).
extension RunState {
    /// Records the archive at `path` as this run's: the fingerprint of what it
    /// holds, its stamp and its content hash.
    func sealArchive(fingerprint: String, path: String, hash: String) throws {
        guard let stamp = FileStamp(path: path) else { return }
        try setMeta("archiveFingerprint", fingerprint)
        try setMeta("archiveStamp", "\(stamp.size):\(stamp.modified)")
        try setMeta("archiveHash", hash)
        try commit()
    }

    /// Whether the archive at `path` is the one the last run sealed for `fingerprint`,
    /// by stamp and by its bytes (one edited in place with its size and time kept is not).
    func archiveIsSealed(fingerprint: String, path: String) throws -> Bool {
        guard try meta("archiveFingerprint") == fingerprint, let stamp = FileStamp(path: path),
            try meta("archiveStamp") == "\(stamp.size):\(stamp.modified)", let recorded = try meta("archiveHash")
        else { return false }
        return ContentHash.file(path) == recorded
    }

    /// Finds the items that share a photo and keeps the list for the nights with nothing to do.
    func recordDuplicates() throws -> [[DuplicateItem]] {
        let duplicates = try duplicates()
        try setMeta(
            "duplicates", String(decoding: (try? JSONEncoder().encode(duplicates)) ?? Data("[]".utf8), as: UTF8.self))
        return duplicates
    }

    /// The duplicates the last run that looked found.
    func recordedDuplicates() throws -> [[DuplicateItem]] {
        try meta("duplicates").flatMap { try? JSONDecoder().decode([[DuplicateItem]].self, from: Data($0.utf8)) } ?? []
    }
}
