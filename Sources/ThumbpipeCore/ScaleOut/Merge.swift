import Foundation

/// Joins the partial outputs of `run --shard K/N` into one output whose
/// archive is byte-identical to a single-machine run's.
public enum Merge {
    /// What a merge did.
    public struct Result: Sendable {
        /// Items in the merged archive.
        public var items: Int
        /// Store files hard-linked (same file system) and copied (otherwise).
        public var linked: Int
        public var copied: Int
        /// Items that failed in their part.
        public var failures = 0
        /// Store files of an earlier merge into the same folder whose items are gone.
        public var removed = 0
    }

    /// Checks the parts and merges them into `output`.
    /// - Parameters:
    ///   - runId: when given, every part must record this `run --run-id`.
    ///   - wait: seconds to wait for parts that are not ready (missing, still
    ///     running, or from another run) before refusing them; 0 refuses at once.
    ///   - onWait: told, whenever it changes, which parts are being waited for.
    /// - Throws: ``ThumbpipeError``: 64 for a part given twice, 65 for parts from
    ///   different manifests, settings or runs, parts still running or a missing shard,
    ///   66 for a folder that is not a part; nothing is written then. 73/74 when the
    ///   output cannot be written.
    public static func run(
        parts: [String], output: String, runId: String? = nil, wait: Double = 0,
        onWait: (String) -> Void = { _ in }
    ) throws -> Result {
        try checkArguments(parts: parts, output: output)
        let folders = parts.map(OutputFolder.init)
        // Held until the merge ends: no run can start writing a part under us.
        let opened = try PartSet.open(folders, runId: runId, wait: wait, onWait: onWait)
        defer { withExtendedLifetime(opened) {} }
        let infos = opened.infos
        try checkShards(parts: parts, infos: infos)
        let loaded = try zip(folders, infos).map { try Part(folder: $0, info: $1) }
        guard infos.map(\.positions.count).reduce(0, +) == infos[0].manifestItems else {
            throw ThumbpipeError(
                .dataError,
                "the parts hold \(infos.map(\.positions.count).reduce(0, +)) items, the manifest \(infos[0].manifestItems)"
            )
        }
        let out = OutputFolder(output)
        let lock = try out.prepare()
        defer { withExtendedLifetime(lock) {} }
        var earlierKeys = try earlierMerge(into: out, archiveFileName: infos[0].archiveFileName)
        let writer = try KeyedArchiveWriter(
            path: out.layout.archive(infos[0].archiveFileName), className: infos[0].className,
            itemCount: infos[0].manifestItems)
        var result = Result(items: 0, linked: 0, copied: 0)
        do {
            try mergeItems(loaded, into: writer, at: out, earlierKeys: &earlierKeys, result: &result)
            result.failures = try mergeReports(loaded.map(\.report), parts: parts, output: out)
            try writer.finish()
            for key in earlierKeys where (try? FileSystem.remove(out.layout.store(key: key))) != nil {
                result.removed += 1
            }
        } catch {
            writer.abandon()
            throw error
        }
        TemporaryFile.syncFolder(output)
        return result
    }

    /// Refuses what a merge cannot mean: no parts, a part given twice, an output that is a part.
    private static func checkArguments(parts: [String], output: String) throws {
        guard !parts.isEmpty else { throw ThumbpipeError(.usage, "merge needs the partial output folders") }
        let resolved = parts.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        if let twice = Dictionary(grouping: resolved, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw ThumbpipeError(.usage, "\(twice) is given twice")
        }
        let out = URL(fileURLWithPath: output).standardizedFileURL.path
        // Compared as the file system sees them: -o may be a symlink to a part.
        let realParts = Set(parts.compactMap(OutputGuard.realPath))
        if resolved.contains(out) || OutputGuard.realPath(output).map(realParts.contains) == true {
            throw ThumbpipeError(.usage, "the output folder \(output) is one of the parts")
        }
    }

    /// Checks the parts are the shards of one run: one manifest, one settings, every shard once.
    private static func checkShards(parts: [String], infos: [ShardInfo]) throws {
        let first = infos[0]
        for (part, info) in zip(parts, infos) {
            guard info.manifestHash == first.manifestHash, info.manifestItems == first.manifestItems else {
                throw ThumbpipeError(.dataError, "\(part) comes from a different manifest than \(parts[0])")
            }
            guard info.settingsFingerprint == first.settingsFingerprint else {
                throw ThumbpipeError(.dataError, "\(part) was made with different pipeline settings than \(parts[0])")
            }
            guard info.shards == first.shards else {
                throw ThumbpipeError(
                    .dataError, "\(part) is shard \(info.shard)/\(info.shards), not one of \(first.shards)")
            }
        }
        let byShard = Dictionary(grouping: zip(infos, parts), by: { $0.0.shard })
        if let twice = byShard.first(where: { $0.value.count > 1 }) {
            throw ThumbpipeError(
                .usage,
                "shard \(twice.key)/\(first.shards) is given twice (\(twice.value.map(\.1).joined(separator: ", ")))")
        }
        let missing = (0..<first.shards).filter { byShard[$0] == nil }
        guard missing.isEmpty else {
            throw ThumbpipeError(
                .dataError,
                "shard\(missing.count > 1 ? "s" : "") \(missing.map { "\($0)/\(first.shards)" }.joined(separator: ", ")) missing"
            )
        }
    }

    /// One part, read and checked before anything is written: its archive (the one
    /// its shard.json describes), its report, and its state's store-file hashes.
    struct Part {
        let folder: OutputFolder
        let info: ShardInfo
        let reader: KeyedArchiveReader
        let report: RunReport
        /// The store files' hashes the part's state recorded: a store file replaced since is refused.
        let state: RunState?
        /// The next of its archive's items to merge.
        var cursor = 0

        init(folder: OutputFolder, info: ShardInfo) throws {
            self.folder = folder
            self.info = info
            let archive = folder.layout.archive(info.archiveFileName)
            if let hash = info.archiveHash,
                FileInfo(path: archive)?.size != info.archiveBytes || ContentHash.file(archive) != hash
            {
                throw ThumbpipeError(
                    .dataError,
                    "\(archive) is not the archive its shard.json describes (size or hash differ): the part was changed or mixed up with another; run that shard again"
                )
            }
            reader = try KeyedArchiveReader(path: archive)
            do {
                report = try RunReport.read(folder.layout.report)
            } catch let error as ThumbpipeError {
                throw ThumbpipeError(.dataError, "\(error.message); run that shard again")
            }
            state = FileSystem.exists(folder.layout.state) ? try? RunState(output: folder, readOnly: true) : nil
            guard reader.count == info.positions.count else {
                throw ThumbpipeError(
                    .dataError,
                    "\(folder.path): its archive has \(reader.count) items, its shard lists \(info.positions.count)")
            }
        }

        /// The part's store file of `item`, checked to be the one its run wrote.
        func storeFile(of item: ArchivedItem) throws -> String {
            let source = folder.layout.store(key: item.itemKey)
            guard let info = FileInfo(path: source, followingLinks: false) else {
                throw ThumbpipeError(.noInput, "\(source): store file missing from its part; run that shard again")
            }
            // Never followed: a symlink would publish whatever file it names.
            guard info.kind == .regular else {
                throw ThumbpipeError(
                    .dataError, "\(source): the store file is not a regular file (a symlink?); run that shard again")
            }
            if let record = try state?.record(forKey: item.itemKey), !record.storeHash.isEmpty,
                ContentHash.file(source) != record.storeHash
            {
                throw ThumbpipeError(
                    .dataError,
                    "\(source): the store file is not the one its part's run wrote (its hash differs from the state's); run that shard again"
                )
            }
            return source
        }
    }

    /// The keys an earlier merge into `out` archived (its store files are ours to
    /// remove); refuses an archive there that no merge wrote.
    private static func earlierMerge(into out: OutputFolder, archiveFileName: String) throws -> Set<String> {
        let archivePath = out.layout.archive(archiveFileName)
        guard FileSystem.exists(archivePath) else { return [] }
        guard (try? RunReport.read(out.layout.report))?.mergedFrom != nil else {
            throw ThumbpipeError(
                .cannotCreate, "\(archivePath) exists and was not written by thumbpipe merge; choose another -o")
        }
        var keys = Set<String>()
        let earlier = try KeyedArchiveReader(path: archivePath)
        for index in 0..<earlier.count {
            if let item = try? earlier.validItem(at: index), item.thumbnailData != nil { keys.insert(item.itemKey) }
        }
        return keys
    }

    /// Every manifest position in order, from the part that holds it: its item
    /// appended, its store file placed in `out`.
    private static func mergeItems(
        _ loaded: [Part], into writer: KeyedArchiveWriter, at out: OutputFolder, earlierKeys: inout Set<String>,
        result: inout Result
    ) throws {
        var parts = loaded
        let shards = parts[0].info.shards
        for position in 0..<parts[0].info.manifestItems {
            guard
                let part = parts.indices.first(where: {
                    parts[$0].cursor < parts[$0].info.positions.count
                        && parts[$0].info.positions[parts[$0].cursor] == position
                })
            else {
                throw ThumbpipeError(.dataError, "no part holds manifest item \(position + 1)")
            }
            let item = try parts[part].reader.validItem(at: parts[part].cursor)
            parts[part].cursor += 1
            // Every key must be its part's: a part's archive and shard.json swapped would merge out of order.
            let belongs = Shard.of(key: item.itemKey, count: shards)
            guard belongs == parts[part].info.shard else {
                throw ThumbpipeError(
                    .dataError,
                    "\(parts[part].folder.path): item \(item.itemKey) belongs to shard \(belongs)/\(shards), not \(parts[part].info.shard): its archive and shard.json do not match"
                )
            }
            earlierKeys.remove(item.itemKey)
            if item.thumbnailData != nil {
                let source = try parts[part].storeFile(of: item)
                if try place(source, at: out.layout.store(key: item.itemKey)) {
                    result.linked += 1
                } else {
                    result.copied += 1
                }
            }
            try writer.append(item)
            result.items += 1
        }
    }

    /// Hard-links `source` to `target` (through a temporary name, so an existing
    /// file is replaced atomically), or copies it across file systems.
    /// - Returns: true when linked.
    static func place(_ source: String, at target: String) throws -> Bool {
        // The file the source names, and the source itself (a symlink or not).
        guard let named = FileInfo(path: source), let own = FileInfo(path: source, followingLinks: false) else {
            throw ThumbpipeError(.noInput, "\(source): cannot read: \(Errno.current)")
        }
        guard named.kind == .regular else {
            throw ThumbpipeError(.dataError, "\(source): not a regular file; a store file must be one")
        }
        if let existing = FileInfo(path: target, followingLinks: false), named.device == existing.device,
            named.inode == existing.inode
        {
            return true  // already this very file (done before, or in place)
        }
        let folder = URL(fileURLWithPath: target).deletingLastPathComponent().path
        let path = TemporaryFile.name(in: folder)
        // Only a regular file is linked: link(2) on a symlink links the symlink
        // itself, and a relative one would then name another file from here.
        if own.kind == .regular && (try? FileSystem.link(source, to: path)) != nil {
            // rename between two links of one file succeeds and does nothing: never leave the temporary.
            defer { try? FileSystem.remove(path) }
            do { try FileSystem.rename(path, to: target) } catch {
                throw ThumbpipeError(.ioError, "\(target): cannot rename into place: \(error)")
            }
            return true
        }
        guard let data = try? FileSystem.contents(of: source) else {
            throw ThumbpipeError(.noInput, "\(source): cannot read")
        }
        try TemporaryFile.write(data, to: target)
        return false
    }

    /// Sums the parts' reports into the output's (``RunReport/merged(_:from:)``).
    /// - Returns: how many items failed in the parts.
    @discardableResult
    static func mergeReports(_ reports: [RunReport], parts: [String], output: OutputFolder) throws -> Int {
        let merged = RunReport.merged(reports, from: parts)
        try merged.write(to: output)
        return merged.failures.count
    }
}

/// The parts of a merge, each read under its reader's lock.
struct PartSet {
    var locks: [OutputLock]
    var infos: [ShardInfo]

    /// Why a part cannot be merged yet: it may become ready by itself.
    struct NotReady: Error {
        var error: ThumbpipeError
    }

    /// Opens every part, waiting up to `wait` seconds for those not ready.
    static func open(_ parts: [OutputFolder], runId: String?, wait: Double, onWait: (String) -> Void) throws
        -> PartSet
    {
        let deadline = Date().addingTimeInterval(wait)
        var lastMessage = ""
        while true {
            do {
                return try openOnce(parts, runId: runId)
            } catch let notReady as NotReady {
                let left = deadline.timeIntervalSinceNow
                guard left > 0 else {
                    guard wait > 0 else { throw notReady.error }
                    throw ThumbpipeError(
                        notReady.error.kind,
                        "gave up after waiting \(Int(wait.rounded())) s: \(notReady.error.message)")
                }
                if notReady.error.message != lastMessage {
                    lastMessage = notReady.error.message
                    onWait(lastMessage)
                }
                Thread.sleep(forTimeInterval: min(2, left))
            }
        }
    }

    private static func openOnce(_ parts: [OutputFolder], runId: String?) throws -> PartSet {
        var set = PartSet(locks: [], infos: [])
        for folder in parts {
            let part = folder.path
            guard FileSystem.isFolder(folder.layout.meta)
            else {
                throw NotReady(
                    error: ThumbpipeError(
                        .noInput, "\(part): not a shard's output (no .thumbpipe/shard.json; run it with --shard K/N)"))
            }
            do {
                set.locks.append(try OutputLock.reading(folder))
            } catch let error as ThumbpipeError {
                throw NotReady(error: ThumbpipeError(.dataError, "\(part) is still being written: \(error.message)"))
            }
            let info: ShardInfo
            do {
                info = try ShardInfo.read(from: folder)
            } catch let error as ThumbpipeError where error.kind == .noInput {
                throw NotReady(error: error)
            }
            if let runId, info.runId != runId {
                throw NotReady(
                    error: ThumbpipeError(
                        .dataError,
                        "\(part) is shard \(info.shard)/\(info.shards) of run \(info.runId.map { "'\($0)'" } ?? "(no --run-id)"), not of run '\(runId)': its run has not finished, or failed"
                    ))
            }
            set.infos.append(info)
        }
        return set
    }
}
