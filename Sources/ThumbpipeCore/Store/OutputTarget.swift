import Foundation

/// A file a user names for thumbpipe to write (`--log`, `--trace`, `-o FILE`),
/// resolved once by one policy:
///
/// - `-` is standard output.
/// - A symlink is followed, deliberately: the file it names is written (created
///   when it does not exist yet), the link stays (`/dev/stdout` is a link to the
///   process's descriptor).
/// - A FIFO, a terminal, `/dev/null` or any other non-regular file is written
///   through, never renamed over.
/// - A regular file (or a new one) is written whole under a temporary name and
///   renamed over it, or, for a log written as it goes, opened and truncated.
/// - What the run reads or owns is refused (64): the manifest, a source photo,
///   anything inside an output folder, and any regular file with more than one
///   hard link (another of its names may be any of those).
public struct OutputTarget: Sendable, Equatable {
    /// How the target is written.
    public enum Kind: Sendable, Equatable {
        /// Standard output (`-`).
        case standardOutput
        /// A FIFO, a device or another non-regular file: written straight through.
        case stream
        /// A regular file, or one that does not exist yet.
        case file
    }

    /// How it is written.
    public let kind: Kind
    /// The path written: for a file, its real path (symlinks followed).
    public let path: String

    /// Resolves `given`, the value of `option`, checking it against `protected`.
    /// - Throws: ``ThumbpipeError``: 64 when it names something the run reads or
    ///   owns, or a folder; 73 when its folder does not exist.
    public static func resolve(_ given: String, for option: String, protecting protected: ProtectedPaths = .init())
        throws -> OutputTarget
    {
        // Standard output is written through its descriptor, so a shell's `>>` appends.
        if ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"].contains(given) {
            return OutputTarget(kind: .standardOutput, path: "/dev/stdout")
        }
        // The process's own descriptors are streams, whatever they are open on: never
        // a path to rename over (a shell's `>>` file would be replaced, not appended to).
        if ["/dev/stdout", "/dev/stderr"].contains(given) || given.hasPrefix("/dev/fd/")
            || given.hasPrefix("/proc/self/fd/")
        {
            return OutputTarget(kind: .stream, path: given)
        }
        let path = danglingTarget(given)
        let info = FileInfo(path: path)
        let exists = info != nil
        if let info {
            switch info.kind {
            case .directory: throw ThumbpipeError(.usage, "\(option) \(given) is a folder; name a file")
            case .regular: break
            // /dev/stdout, a FIFO, a terminal: opened as named (a /proc link to a pipe has no real path).
            default: return OutputTarget(kind: .stream, path: path)
            }
        }
        let real = try realPath(path, exists: exists, given: given, option: option, protected: protected)
        if let what = protected.owner(of: real, info: info) {
            throw ThumbpipeError(.usage, "\(option) \(given) is \(what); thumbpipe never writes over it")
        }
        if let info, info.links > 1 {
            // Another name of the same file may be a photo under another name, or any file the
            // user keeps: refused whatever the names are.
            throw ThumbpipeError(
                .usage,
                "\(option) \(given) has \(info.links) hard links (another of its names may be a photo); thumbpipe never writes through a hard link: remove it or name a new file"
            )
        }
        return OutputTarget(kind: .file, path: real)
    }

    /// Where `given` leads when it is a symlink whose file does not exist yet
    /// (followed up to 8 links), else `given`.
    private static func danglingTarget(_ given: String) -> String {
        var path = given
        for _ in 0..<8 {
            guard FileInfo(path: path, followingLinks: false)?.kind == .symlink, FileInfo(path: path) == nil else {
                break
            }
            guard let destination = FileSystem.linkDestination(path) else { break }
            path =
                destination.hasPrefix("/")
                ? destination
                : URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(destination).path
        }
        return path
    }

    /// The real path a file at `path` is (or will be) written at: its folder resolved.
    /// - Throws: 64 when a folder the run has yet to make is protected, 73 when its folder does not exist.
    private static func realPath(
        _ path: String, exists: Bool, given: String, option: String, protected: ProtectedPaths
    ) throws -> String {
        if exists, let resolved = OutputGuard.realPath(path) { return resolved }
        let url = URL(fileURLWithPath: path)
        guard let folder = OutputGuard.realPath(url.deletingLastPathComponent().path) else {
            // A folder the run has yet to make (its output folder) is checked as written.
            if let what = protected.owner(of: url.standardizedFileURL.path, info: nil) {
                throw ThumbpipeError(.usage, "\(option) \(given) is \(what); thumbpipe never writes over it")
            }
            throw ThumbpipeError(
                .cannotCreate, "\(option) \(given): its folder does not exist (\(ThumbpipeError.errnoText()))")
        }
        return (folder == "/" ? "" : folder) + "/" + url.lastPathComponent
    }

    /// A target thumbpipe chose itself (a default path inside its output folder).
    public static func own(_ path: String) -> OutputTarget { OutputTarget(kind: .file, path: path) }

    /// Writes `data` whole: a file atomically (a temporary renamed over it),
    /// anything else straight through.
    /// - Throws: ``ThumbpipeError`` (73/74) when it cannot be written.
    public func write(_ data: Data) throws {
        if kind == .file {
            try TemporaryFile.write(data, to: path)
            return
        }
        let file = try self.open()
        try data.withUnsafeBytes { try Self.writeAll(file, $0, to: path) }
    }

    /// Opens the target to write as one goes (a log): a file created or truncated,
    /// anything else as it is. Standard output is borrowed, never closed.
    /// - Throws: ``ThumbpipeError`` (73) when it cannot be opened.
    public func open() throws -> FileDescriptor {
        if kind == .standardOutput { return .standardOutput }
        let flags = kind == .file ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY
        do { return try FileDescriptor.open(path, flags) } catch {
            throw ThumbpipeError(.cannotCreate, "\(path): cannot open for writing: \(error)")
        }
    }

    /// Writes all of `bytes` to `fd`, through EINTR and short writes.
    /// - Throws: ``ThumbpipeError`` (74) naming `path` when a write fails (a full disk, a closed reader).
    public static func writeAll(_ file: FileDescriptor, _ bytes: UnsafeRawBufferPointer, to path: String) throws {
        do { try file.write(bytes) } catch {
            throw ThumbpipeError(.ioError, "\(path): cannot write: \(error)")
        }
    }
}

/// What a command's output files must never overwrite: files it reads (the
/// manifest, the sources) and folders it owns (an output folder).
public struct ProtectedPaths: Sendable {
    private var files: [(path: String, what: String)] = []
    private var folders: [(path: String, what: String)] = []
    private var lists: [(paths: @Sendable () -> [String], what: String)] = []
    private var outputs: [(folder: OutputFolder, archive: String)] = []

    public init() {}

    /// Protects one file (the manifest, an archive) as `what` ("the manifest").
    public mutating func protect(file path: String, as what: String) { files.append((path, what)) }

    /// Protects everything inside a folder (an output folder) as `what`.
    public mutating func protect(folder path: String, as what: String) {
        if let real = OutputGuard.realPath(path) { folders.append((real, what)) } else { folders.append((path, what)) }
    }

    /// Protects an output folder's own files: everything under `.thumbpipe/`, its
    /// archive (even before it exists), and every file already in it (store files).
    /// A new file beside them is allowed.
    public mutating func protect(output: OutputFolder, archiveFileName: String) {
        let real = OutputGuard.realPath(output.path) ?? URL(fileURLWithPath: output.path).standardizedFileURL.path
        outputs.append((OutputFolder(real), archiveFileName))
    }

    /// Protects many files (a run's sources), compared lazily: only those with the
    /// target's file name are looked at, so a million sources cost a string compare each.
    public mutating func protect(files paths: @escaping @Sendable () -> [String], as what: String) {
        lists.append((paths, what))
    }

    /// What `real` (a real path; `info` its stat when it exists) belongs to, or nil.
    func owner(of real: String, info: FileInfo?) -> String? {
        for folder in folders where real == folder.path || real.hasPrefix(folder.path + "/") {
            return "inside \(folder.what) \(folder.path)"
        }
        for output in outputs where real.hasPrefix(output.folder.path + "/") {
            let layout = output.folder.layout
            if real.hasPrefix(layout.meta + "/") || real == layout.archive(output.archive)
                || info != nil
            {
                return "one of the output folder's own files (\(output.folder.path))"
            }
        }
        guard let info else { return nil }
        func same(_ path: String) -> Bool {
            guard let other = FileInfo(path: path) else { return false }
            return other.device == info.device && other.inode == info.inode
        }
        for file in files where same(file.path) { return file.what }
        let name = "/" + URL(fileURLWithPath: real).lastPathComponent
        for list in lists {
            for path in list.paths() where (path.hasSuffix(name) || !path.contains("/")) && same(path) {
                return list.what + " (\(path))"
            }
        }
        return nil
    }
}
