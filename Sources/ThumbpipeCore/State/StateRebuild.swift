import Foundation

/// `run --rebuild-state`: the way back from a damaged or lost `state.sqlite`.
///
/// The damaged state is moved aside (`state.sqlite.damaged`, with its WAL), and
/// a new one records, as thumbpipe's own, the items of the archive in the
/// folder and the store files at the keys of the archive or the manifest. What
/// made those outputs (source stamps, settings) is not known, so every such
/// record is marked rebuilt: the run makes each item again (an item whose
/// source is missing keeps its outputs), writes over the adopted store files,
/// and removes the archived items the manifest no longer has, under
/// `--max-removed` as any run.
public enum StateRebuild {
    /// What a rebuild found.
    public struct Summary: Sendable, Equatable {
        /// Items read from the archive.
        public var archivedItems = 0
        /// Store files adopted (of archived items or manifest items).
        public var storeFiles = 0
        /// Where the damaged state was moved, when there was one.
        public var movedAside: String?
        /// Why the archive was not read, when it was not.
        public var archiveProblem: String?

        /// One line for the terminal.
        public var description: String {
            var text =
                "state rebuilt: \(archivedItems) items from the archive\(archiveProblem.map { " (\($0))" } ?? ""), "
                + "\(storeFiles) store files adopted; every item is made again"
            if let movedAside { text += "; the previous state is kept as \(movedAside)" }
            return text
        }
    }

    /// Rebuilds the state of `folder` (whose lock the caller holds).
    /// - Throws: ``ThumbpipeError`` (73) when the old state cannot be moved aside or the new one written.
    public static func run(output: OutputFolder, manifest: Manifest, settings: PipelineSettings) throws -> Summary {
        var summary = Summary()
        let layout = output.layout
        summary.movedAside = try moveAside(layout.state)
        // The archive's index described an archive the new state never saw: not used.
        try? FileSystem.remove(layout.index)
        let state = try RunState(output: output)
        let items = manifest.items
        let index = manifest.keyIndex
        var adopted = Set<String>()
        func adopt(key: String, thumbnail: Data?, date: Date?) throws {
            guard !adopted.contains(key) else { return }
            let position = index.position(of: key)
            let source = position.flatMap { items.hasImage(at: $0) ? items[$0].imagePath : nil }
            let store = regularFile(layout.store(key: key))
            // Without a photo, a store file or a thumbnail, there is nothing of the item's to adopt.
            guard source != nil || store != nil || thumbnail != nil else { return }
            if store != nil { summary.storeFiles += 1 }
            adopted.insert(key)
            try state.save(
                ItemRecord(
                    itemKey: key, sourcePath: source ?? ItemRecord.rebuiltSource, sourceSize: -1, sourceModified: -1,
                    sourceHash: "", thumbnailFingerprint: ItemRecord.rebuilt, storeFingerprint: ItemRecord.rebuilt,
                    dateCreated: date?.timeIntervalSince1970, storeSize: store?.size ?? -1,
                    storeModified: store?.modified ?? -1, storeHash: "", failure: nil, seconds: 0),
                thumbnail: thumbnail)
        }
        let archivePath = layout.archive(settings.archive.fileName)
        if OutputGuard.exists(archivePath) {
            do {
                let reader = try KeyedArchiveReader(path: archivePath)
                try reader.checkKeysUnique()
                for position in 0..<reader.count {
                    let item = try reader.validItem(at: position)
                    try adopt(key: item.itemKey, thumbnail: item.thumbnailData, date: item.dateCreated)
                    summary.archivedItems += 1
                }
            } catch let error as ThumbpipeError {
                summary.archiveProblem = "it could not be read: \(error.message)"
            }
        } else {
            summary.archiveProblem = "there is none"
        }
        // Store files of the manifest's items that the archive does not list (it is lost too).
        for position in items.indices where items.hasImage(at: position) {
            let key = items.itemKey(at: position)
            if regularFile(layout.store(key: key)) != nil {
                try adopt(key: key, thumbnail: nil, date: nil)
            }
        }
        try state.commit()
        return summary
    }

    /// A damaged state (and its WAL files) moved aside as `.damaged`; its new name, or nil when there was none.
    private static func moveAside(_ statePath: String) throws -> String? {
        guard OutputGuard.exists(statePath) else { return nil }
        let aside = statePath + ".damaged"
        for suffix in ["", "-wal", "-shm"] where OutputGuard.exists(statePath + suffix) {
            do { try FileSystem.rename(statePath + suffix, to: aside + suffix) } catch {
                throw ThumbpipeError(.cannotCreate, "\(statePath + suffix): cannot move aside: \(error)")
            }
        }
        return aside
    }

    /// The stamp of a regular file at `path` itself (a symlink there is not adopted).
    private static func regularFile(_ path: String) -> FileStamp? {
        guard let info = FileInfo(path: path, followingLinks: false), info.kind == .regular else { return nil }
        return FileStamp(info)
    }
}

extension ItemRecord {
    /// The fingerprint of a record `--rebuild-state` made: its outputs are the
    /// folder's, but nothing proves what made them.
    static let rebuilt = "rebuilt"
    /// The source path of a rebuilt record whose item the manifest does not have.
    static let rebuiltSource = "(rebuilt)"

    /// Whether `--rebuild-state` made this record.
    var isRebuilt: Bool { thumbnailFingerprint == Self.rebuilt }
}
