import Foundation

/// The output folder is the user's data: one thumbpipe at a time writes it
/// (an exclusive `flock`), and a run writes over no file it did not write itself.
public final class OutputLock: Sendable {
    private let descriptor: FileDescriptor

    /// Takes the output folder's lock, held until this object goes away (or the
    /// process ends, whatever kills it). The lock is on the `.thumbpipe` folder
    /// itself, so taking it writes nothing; with `recordPid`, `.thumbpipe/lock`
    /// names the holder for a second run's message.
    /// - Throws: ``ThumbpipeError`` (73) when another thumbpipe holds it or it cannot be taken.
    public convenience init(_ output: OutputFolder, recordPid: Bool = true) throws {
        try self.init(output, shared: false)
        if recordPid { try? TemporaryFile.write(Data("\(getpid())\n".utf8), to: output.layout.lock) }
    }

    /// Takes a reader's lock on a finished output (`merge` on its parts): any number
    /// of readers at once, but never while a run holds the folder, and no run can
    /// start on it while a reader holds it.
    /// - Throws: ``ThumbpipeError`` (73) when a run holds it, naming its pid.
    public static func reading(_ output: OutputFolder) throws -> OutputLock {
        try OutputLock(output, shared: true)
    }

    private init(_ output: OutputFolder, shared: Bool) throws {
        let meta = output.layout.meta
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(meta, O_RDONLY | O_DIRECTORY) } catch {
            throw ThumbpipeError(.cannotCreate, "\(meta): cannot open: \(error)")
        }
        do { try fd.lock(shared: shared) } catch {
            if error == .wouldBlock {
                let pid = FileSystem.text(of: output.layout.lock, limit: 64)?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                throw ThumbpipeError(
                    .cannotCreate,
                    "\(output.path) is in use by another thumbpipe\(pid.map { $0.isEmpty ? "" : " (pid \($0))" } ?? "")"
                )
            }
            throw ThumbpipeError(.cannotCreate, "\(meta): cannot lock: \(error)")
        }
        descriptor = fd
    }

    /// Takes the lock if the folder already has a `.thumbpipe` (a dry run writes nothing).
    public static func ifPresent(_ output: OutputFolder) throws -> OutputLock? {
        guard FileSystem.isFolder(output.layout.meta) else { return nil }
        return try OutputLock(output, recordPid: false)
    }
}

/// An output folder: the one place its layout is spelled (``Layout``), how a run
/// prepares and locks it, and the claims journal of the store files a run is
/// about to place.
public struct OutputFolder: Sendable, Hashable {
    /// Every path thumbpipe keeps in an output folder. A new output file is one line here.
    public struct Layout: Sendable, Hashable {
        /// The output folder itself.
        public let root: String

        /// The folder of thumbpipe's own files.
        public var meta: String { root + "/.thumbpipe" }
        /// The item archive, named by `archive.fileName`.
        public func archive(_ fileName: String) -> String { root + "/" + fileName }
        /// The store file of item `key` (one JPEG per item key, beside the archive).
        public func store(key: String) -> String { root + "/" + key }
        /// The incremental state (SQLite).
        public var state: String { meta + "/state.sqlite" }
        /// The archive's index of item offsets.
        public var index: String { meta + "/archive.index" }
        /// The last run's report, and its page.
        public var report: String { meta + "/report.json" }
        public var html: String { meta + "/report.html" }
        /// Earlier runs' reports, one file a run.
        public var reports: String { meta + "/reports" }
        /// The pid of the run that holds the folder.
        public var lock: String { meta + "/lock" }
        /// Store files about to be placed (``OutputFolder/claim(_:)``).
        public var claims: String { meta + "/claims" }
        /// The workers' scratch folders (libvips's spill); nothing in it is ever committed.
        public var work: String { meta + "/work" }
        /// A shard's description (`--shard K/N`), read by `merge`.
        public var shard: String { meta + "/shard.json" }
        /// The private scratch folder of the worker of `slot`: the one folder its
        /// sandbox lets it write to, emptied by the parent after each job.
        public func scratch(slot: Int) -> String { work + "/worker-\(slot + 1)" }
    }

    /// The folder's path, as the user gave it.
    public let path: String

    /// The output folder at `path`.
    public init(_ path: String) { self.path = path }

    /// Where everything is in it.
    public var layout: Layout { Layout(root: path) }

    /// Removes everything inside `folder` (never following a symlink, whatever
    /// bytes the names hold), leaving it empty.
    /// - Returns: how many entries were removed.
    @discardableResult
    static func empty(_ folder: String) -> Int {
        guard let fd = try? FileDescriptor.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else { return 0 }
        return empty(fd)
    }

    /// Empties the folder open as `folder`.
    private static func empty(_ folder: FileDescriptor) -> Int {
        var removed = 0
        for (_, name) in (try? folder.names()) ?? [] {
            guard let info = try? folder.info(of: name) else { continue }
            if info.kind == .directory {
                if let child = try? folder.open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) { removed += empty(child) }
                if (try? folder.remove(name, folder: true)) != nil { removed += 1 }
            } else if (try? folder.remove(name)) != nil {
                removed += 1
            }
        }
        return removed
    }

    /// Creates the output folder if needed, checks it can be written, takes its
    /// lock, and removes the temporaries of runs that no longer hold it.
    /// - Returns: the lock, held until it is released.
    /// - Throws: ``ThumbpipeError`` (73), also when another thumbpipe holds the folder.
    public func prepare() throws -> OutputLock {
        let folder = path
        do {
            try FileSystem.createFolder(folder, intermediate: true)
            try FileSystem.createFolder(layout.meta, intermediate: true)
            try FileSystem.createFolder(layout.work, intermediate: true)
        } catch {
            throw ThumbpipeError(.cannotCreate, "\(folder): cannot create output folder: \(error)")
        }
        guard FileSystem.allows(folder, W_OK) else {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): output folder is not writable: \(ThumbpipeError.errnoText())")
        }
        let lock = try OutputLock(self)
        // The lock is ours: every temporary here belongs to a run that is gone.
        TemporaryFile.removeStale(in: folder)
        TemporaryFile.removeStale(in: layout.meta)
        // Scratch files a killed run's workers left (libvips's spill) go too.
        Self.empty(layout.work)
        return lock
    }

    /// Notes that the store file `key` is about to be placed: a run killed between
    /// the rename and the state's commit still knows the file as its own.
    func claim(_ key: String) {
        guard let file = try? FileDescriptor.open(layout.claims, O_WRONLY | O_CREAT | O_APPEND) else { return }
        try? file.write(key + "\n")
    }

    /// The store-file names claimed and not yet recorded (by a run that was killed).
    func claims() -> Set<String> {
        Set(
            (FileSystem.text(of: layout.claims, limit: 1 << 30) ?? "").split(separator: "\n").map(String.init))
    }

    /// Forgets the claims once the state holds every item (the end of a run).
    func clearClaims() { try? FileSystem.remove(layout.claims) }
}

/// Which names in the output folder a run may write.
public enum OutputGuard {
    /// Refuses, before anything is written, a run that would write over a file
    /// it did not write: a key that is a name thumbpipe keeps for itself, a store
    /// file name held by the manifest or a source of this run, or an existing
    /// file that neither the state nor an interrupted run's claims record as ours.
    /// - Throws: ``ThumbpipeError`` (65) naming the manifest line, or (73) for an
    ///   archive in the folder that thumbpipe did not write.
    /// - Parameter state: the previous runs' state, nil when this folder has none yet.
    public static func check(
        manifest: Manifest, settings: PipelineSettings, state: RunState?, output: OutputFolder
    ) throws {
        let file = URL(fileURLWithPath: manifest.path).lastPathComponent
        // Store files are compared as the file system names them: the folder's real path.
        let real = OutputFolder.Layout(root: realPath(output.path) ?? output.path)
        let layout = output.layout
        let archive = layout.archive(settings.archive.fileName)
        // An archive given as the input (a migration in place) is the user's to replace.
        let archiveIsInput = realPath(archive).map { $0 == realPath(manifest.path) } ?? false
        if state == nil && exists(archive) && !archiveIsInput {
            throw ThumbpipeError(
                .cannotCreate,
                "\(archive) exists and thumbpipe has no record of writing it (no .thumbpipe/state.sqlite); "
                    + "choose another output folder or move it away, or, if thumbpipe wrote it and its state "
                    + "was lost, run again with --rebuild-state")
        }
        var protected = Set<String>()
        if let manifestPath = realPath(manifest.path) { protected.insert(manifestPath) }
        let items = manifest.items
        // Items without a photo are checked by key alone, without decoding them.
        let withImage = items.indices.filter { items.hasImage(at: $0) }
        for position in withImage {
            if let path = items[position].imagePath, let real = realPath(path) { protected.insert(real) }
        }
        for position in items.indices where items.itemKey(at: position) == settings.archive.fileName {
            throw ThumbpipeError.data(
                file, items[position].line,
                "itemKey '\(settings.archive.fileName)' is reserved: it is the archive's file name (archive.fileName)")
        }
        let claims = output.claims()
        for position in withImage {
            let item = items[position]
            guard let source = item.imagePath else { continue }
            let target = real.store(key: item.itemKey)
            // A migrated store file in place: it is its own target, and is not written.
            if item.carried == .storeFile && realPath(source) == target { continue }
            if protected.contains(target) {
                throw ThumbpipeError.data(
                    file, item.line,
                    "itemKey '\(item.itemKey)' would overwrite \(target), the manifest or a source of this run; "
                        + "choose another output folder or key")
            }
            // Looked up only where a file stands in the way: the state is not read whole.
            guard exists(target) && !claims.contains(item.itemKey) else { continue }
            if try state?.record(forKey: item.itemKey) == nil {
                throw ThumbpipeError.data(
                    file, item.line,
                    "itemKey '\(item.itemKey)': \(layout.store(key: item.itemKey)) exists and thumbpipe did not write it; "
                        + "move it away or choose another output folder or key"
                        + (state == nil ? " (if thumbpipe wrote it and its state was lost: --rebuild-state)" : ""))
            }
        }
    }

    /// Whether a name exists at all (a dangling symlink included).
    static func exists(_ path: String) -> Bool { FileSystem.exists(path, followingLinks: false) }

    /// The canonical path of an existing file, or nil.
    static func realPath(_ path: String) -> String? { FileSystem.realPath(path) }
}
