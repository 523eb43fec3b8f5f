import Foundation

/// The output folder is the user's data: one thumbpipe at a time writes it
/// (an exclusive `flock`), and a run writes over no file it did not write itself.
public final class OutputLock: Sendable {
    private let descriptor: Int32

    /// Takes the output folder's lock, held until this object goes away (or the
    /// process ends, whatever kills it). The lock is on the `.thumbpipe` folder
    /// itself, so taking it writes nothing; with `recordPid`, `.thumbpipe/lock`
    /// names the holder for a second run's message.
    /// - Throws: ``ThumbpipeError`` (73) when another thumbpipe holds it or it cannot be taken.
    public convenience init(folder: String, recordPid: Bool = true) throws {
        try self.init(folder: folder, shared: false)
        if recordPid { try? TemporaryFile.write(Data("\(getpid())\n".utf8), to: folder + "/.thumbpipe/lock") }
    }

    /// Takes a reader's lock on a finished output (`merge` on its parts): any number
    /// of readers at once, but never while a run holds the folder, and no run can
    /// start on it while a reader holds it.
    /// - Throws: ``ThumbpipeError`` (73) when a run holds it, naming its pid.
    public static func reading(folder: String) throws -> OutputLock {
        try OutputLock(folder: folder, shared: true)
    }

    private init(folder: String, shared: Bool) throws {
        let meta = folder + "/.thumbpipe"
        guard let fd = FileDescriptor.open(meta, O_RDONLY | O_DIRECTORY) else {
            throw ThumbpipeError(.cannotCreate, "\(meta): cannot open: \(ThumbpipeError.errnoText())")
        }
        if flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK {
                let pid = (try? String(contentsOfFile: meta + "/lock", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                throw ThumbpipeError(
                    .cannotCreate,
                    "\(folder) is in use by another thumbpipe\(pid.map { $0.isEmpty ? "" : " (pid \($0))" } ?? "")")
            }
            throw ThumbpipeError(.cannotCreate, "\(meta): cannot lock: \(ThumbpipeError.errnoText(code))")
        }
        descriptor = fd
    }

    /// Takes the lock if the folder already has a `.thumbpipe` (a dry run writes nothing).
    public static func ifPresent(folder: String) throws -> OutputLock? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder + "/.thumbpipe", isDirectory: &isDirectory),
            isDirectory.boolValue
        else { return nil }
        return try OutputLock(folder: folder, recordPid: false)
    }

    deinit { close(descriptor) }
}

/// An output folder: how a run prepares and locks it, and the folders thumbpipe makes in it.
public enum OutputFolder {
    /// Where the workers' scratch folders are (libvips's spill); nothing in it is
    /// ever committed: the parent writes every file of the output itself.
    public static func workFolder(_ folder: String) -> String { folder + "/.thumbpipe/work" }

    /// The private scratch folder of the worker of `slot`: the one folder its
    /// sandbox lets it write to, emptied by the parent after each job.
    static func scratchFolder(_ folder: String, slot: Int) -> String { workFolder(folder) + "/worker-\(slot + 1)" }

    /// Removes everything inside `folder` (never following a symlink, whatever
    /// bytes the names hold), leaving it empty.
    /// - Returns: how many entries were removed.
    @discardableResult
    static func empty(_ folder: String) -> Int {
        guard let fd = FileDescriptor.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else { return 0 }
        return empty(descriptor: fd)
    }

    /// Empties the folder open as `fd`, and closes it.
    private static func empty(descriptor fd: Int32) -> Int {
        guard let directory = fdopendir(fd) else {
            close(fd)
            return 0
        }
        defer { closedir(directory) }
        var removed = 0
        var names: [[CChar]] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix(while: { $0 != 0 })) + [0]
            }
            if name == [46, 0] || name == [46, 46, 0] { continue }
            names.append(name)
        }
        for name in names {
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                if child >= 0 { removed += empty(descriptor: child) }
                if unlinkat(fd, name, AT_REMOVEDIR) == 0 { removed += 1 }
            } else if unlinkat(fd, name, 0) == 0 {
                removed += 1
            }
        }
        return removed
    }

    /// Creates the output folder if needed, checks it can be written, takes its
    /// lock, and removes the temporaries of runs that no longer hold it.
    /// - Returns: the lock, held until it is released.
    /// - Throws: ``ThumbpipeError`` (73), also when another thumbpipe holds the folder.
    public static func prepare(_ folder: String) throws -> OutputLock {
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: folder + "/.thumbpipe", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(
                atPath: workFolder(folder), withIntermediateDirectories: true)
        } catch {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): cannot create output folder: \(ThumbpipeError.describe(error))")
        }
        guard access(folder, W_OK) == 0 else {
            throw ThumbpipeError(
                .cannotCreate, "\(folder): output folder is not writable: \(ThumbpipeError.errnoText())")
        }
        let lock = try OutputLock(folder: folder)
        // The lock is ours: every temporary here belongs to a run that is gone.
        TemporaryFile.removeStale(in: folder)
        TemporaryFile.removeStale(in: folder + "/.thumbpipe")
        // Scratch files a killed run's workers left (libvips's spill) go too.
        empty(workFolder(folder))
        return lock
    }
}

/// Which names in the output folder a run may write.
public enum OutputGuard {
    /// The file where a run lists the store files it is about to rename into
    /// place, before the state records them: a run killed between the two still
    /// knows them as its own.
    static func claimsPath(_ folder: String) -> String { folder + "/.thumbpipe/claims" }

    /// Notes that the store file `key` is about to be written.
    static func claim(_ key: String, in folder: String) {
        guard let fd = FileDescriptor.open(claimsPath(folder), O_WRONLY | O_CREAT | O_APPEND) else { return }
        let line = Array((key + "\n").utf8)
        _ = line.withUnsafeBytes { FileDescriptor.writeAll(fd, $0) }
        close(fd)
    }

    /// The store-file names claimed and not yet recorded (by a run that was killed).
    static func claims(in folder: String) -> Set<String> {
        Set(
            ((try? String(contentsOfFile: claimsPath(folder), encoding: .utf8)) ?? "").split(separator: "\n").map(
                String.init))
    }

    /// Forgets the claims once the state holds every item (the end of a run).
    static func clearClaims(in folder: String) { unlink(claimsPath(folder)) }

    /// Refuses, before anything is written, a run that would write over a file
    /// it did not write: a key that is a name thumbpipe keeps for itself, a store
    /// file name held by the manifest or a source of this run, or an existing
    /// file that neither the state nor an interrupted run's claims record as ours.
    /// - Throws: ``ThumbpipeError`` (65) naming the manifest line, or (73) for an
    ///   archive in the folder that thumbpipe did not write.
    /// - Parameter state: the previous runs' state, nil when this folder has none yet.
    public static func check(
        manifest: Manifest, settings: PipelineSettings, state: RunState?, outputFolder: String
    ) throws {
        let file = URL(fileURLWithPath: manifest.path).lastPathComponent
        let folder = realPath(outputFolder) ?? outputFolder
        let archive = outputFolder + "/" + settings.archive.fileName
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
        let claims = Self.claims(in: outputFolder)
        for position in withImage {
            let item = items[position]
            guard let source = item.imagePath else { continue }
            let target = folder + "/" + item.itemKey
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
                    "itemKey '\(item.itemKey)': \(outputFolder)/\(item.itemKey) exists and thumbpipe did not write it; "
                        + "move it away or choose another output folder or key"
                        + (state == nil ? " (if thumbpipe wrote it and its state was lost: --rebuild-state)" : ""))
            }
        }
    }

    /// Whether a name exists at all (a dangling symlink included).
    static func exists(_ path: String) -> Bool {
        FileInfo(path: path, followingLinks: false) != nil
    }

    /// The canonical path of an existing file, or nil.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
