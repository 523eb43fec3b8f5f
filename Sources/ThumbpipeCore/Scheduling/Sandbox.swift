import CSandbox
import Foundation

/// `--sandbox`: whether workers confine themselves before reading a source.
public enum SandboxMode: String, Codable, Sendable, CaseIterable {
    /// Every protection, or the run is refused (70).
    case required
    /// Whatever the kernel offers (the default).
    case auto
    /// None: workers run with the user's full rights.
    case off
}

/// The confinement of a worker: what a decoder exploited by a crafted file can
/// still do. Entered after libvips and its modules are loaded and before the
/// first source byte is read, for the rest of the worker's life:
///
/// - Landlock: files may be read anywhere (sources live anywhere), but written,
///   created or removed only in the run's work folder (`OUT/.thumbpipe/work`,
///   where store files are written before the parent renames them into place, and
///   where libvips spills); nothing may be executed; from Landlock ABI 4 on, no
///   TCP port may be bound or connected to.
/// - seccomp: no socket but AF_UNIX, no `execve`, no new process (threads stay
///   allowed), no `ptrace`, mounts, namespaces, kernel modules, BPF or keyrings.
public enum Sandbox {
    /// What this kernel offers.
    public struct Support: Sendable, Equatable, CustomStringConvertible {
        /// The Landlock ABI version, nil without Landlock.
        public var landlockABI: Int?
        /// Whether seccomp filters can be installed.
        public var seccomp: Bool

        /// Whether both protections can be had.
        public var complete: Bool { landlockABI != nil && seccomp }

        /// E.g. `Landlock ABI 7 (files, TCP) and seccomp`.
        public var description: String {
            var parts: [String] = []
            if let abi = landlockABI { parts.append("Landlock ABI \(abi) (files\(abi >= 4 ? ", TCP" : ""))") }
            if seccomp { parts.append("seccomp") }
            return parts.isEmpty
                ? "none (the kernel has neither Landlock nor seccomp)" : parts.joined(separator: " and ")
        }
    }

    /// Asks the kernel, without confining anything.
    public static func probe() -> Support {
        let abi = CSandbox_landlock_abi()
        return Support(landlockABI: abi > 0 ? Int(abi) : nil, seccomp: CSandbox_seccomp_available() == 1)
    }

    /// What a run's workers run under, in words: for the summary, the report and `--version`.
    public static func describe(_ mode: SandboxMode, support: Support = probe()) -> String {
        mode == .off ? "off (--sandbox off)" : support.description
    }

    /// Refuses `required` where the kernel cannot give both protections.
    /// - Throws: ``ThumbpipeError`` (70) naming what is missing.
    public static func check(_ mode: SandboxMode, support: Support = probe()) throws {
        guard mode == .required, !support.complete else { return }
        throw ThumbpipeError(
            .software,
            "--sandbox required, but this kernel offers \(support.description); run with --sandbox auto to go on without it"
        )
    }

    /// Confines this worker process.
    /// - Returns: nil when done (or `off`), else why not: fatal in `required` mode.
    /// - Parameter also: a second writable folder (the tests' fault marker's), or nil.
    static func enter(_ mode: SandboxMode, writable folder: String, also: String? = nil) -> String? {
        guard mode != .off else { return nil }
        let support = probe()
        var problems: [String] = []
        if support.landlockABI != nil {
            let result = CSandbox_landlock(folder, also)
            if result != 0 { problems.append("Landlock: \(String(cString: strerror(-result)))") }
        } else if mode == .required {
            problems.append("Landlock: not offered by this kernel")
        }
        if support.seccomp {
            let result = CSandbox_seccomp()
            if result != 0 { problems.append("seccomp: \(String(cString: strerror(-result)))") }
        } else if mode == .required {
            problems.append("seccomp: not offered by this kernel")
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}
