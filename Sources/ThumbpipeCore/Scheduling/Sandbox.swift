import CSandbox
import Foundation

/// `--sandbox`: whether workers are confined before reading a source.
public enum SandboxMode: String, Codable, Sendable, CaseIterable {
    /// Every layer, or the run is refused (70).
    case required
    /// Whatever the kernel offers (the default).
    case auto
    /// None: workers run with the user's full rights.
    case off
}

/// The confinement of a worker: what a decoder exploited by a crafted file can
/// still do. In depth, each layer on its own enough for most of it:
///
/// 1. **No terminal, no inherited authority** (``CSandbox_jail``, before any
///    thread): a session of its own (no controlling terminal), stdin on
///    `/dev/null`, stdout and stderr a pipe the supervisor relays, every
///    capability dropped with `no_new_privs`, `PR_SET_PDEATHSIG`, every
///    descriptor but those and its socket closed.
/// 2. **Namespaces** where the kernel allows: user (unless root), mount,
///    network (empty: no UDP, no abstract UNIX socket, no route anywhere), IPC,
///    UTS and PID (it sees no other process); a root of its own on a tmpfs:
///    `/usr` read-only, the loader's cache, the time zone, four devices, its
///    `/proc` and its scratch folder, nothing of the user's files.
/// 3. **Sources by descriptor**: the parent opens each source and passes it; the
///    worker needs no read access to the user's files.
/// 4. **Landlock** (after libvips and its modules are loaded): reads only under
///    the system folders (or its own root), writes only in its scratch folder,
///    no exec; from ABI 4 no TCP, from ABI 5 no device ioctls, from ABI 6 no
///    signal or abstract UNIX socket outside.
/// 5. **seccomp** (the table in CSandbox.c): no TIOCSTI, io_uring, new socket,
///    metadata change, signal to another process, exec, fork, ptrace, mount…
///
/// And the parent trusts nothing a worker hands back (``WorkerReply``).
public enum Sandbox {
    /// What this kernel offers.
    public struct Support: Sendable, Equatable, CustomStringConvertible {
        /// The Landlock ABI version, nil without Landlock.
        public var landlockABI: Int?
        /// Whether seccomp filters can be installed.
        public var seccomp: Bool
        /// Whether a worker can have namespaces of its own; when not, why.
        public var namespaces: Bool
        public var namespacesMissing: String?

        /// Whether every layer can be had.
        public var complete: Bool { landlockABI != nil && seccomp && namespaces }

        /// E.g. `namespaces (user, mount, network, IPC, PID), Landlock ABI 7 (files, TCP, scopes), seccomp, no capabilities`.
        public var description: String {
            var parts: [String] = []
            if namespaces {
                parts.append("namespaces (\(geteuid() == 0 ? "" : "user, ")mount, network, IPC, PID)")
            } else {
                parts.append("no namespaces (\(namespacesMissing ?? "not offered"))")
            }
            if let abi = landlockABI { parts.append("Landlock ABI \(abi) (\(Self.landlockRights(abi)))") }
            if seccomp { parts.append("seccomp") }
            parts.append("no capabilities")
            parts.append("workers as uid \(Sandbox.workerUID)\(geteuid() == 0 ? " (nobody, not root)" : "")")
            return parts.joined(separator: ", ")
        }

        static func landlockRights(_ abi: Int) -> String {
            var rights = ["files"]
            if abi >= 4 { rights.append("TCP") }
            if abi >= 5 { rights.append("device ioctls") }
            if abi >= 6 { rights.append("signal and abstract-socket scopes") }
            return rights.joined(separator: ", ")
        }
    }

    /// The uid a worker runs as: this process's, or nobody's (65534) when this one is root.
    public static var workerUID: UInt32 { geteuid() == 0 ? UInt32(CSANDBOX_WORKER_ID) : geteuid() }

    /// Asks the kernel, without confining this process (namespaces are tried in a short-lived child).
    public static func probe() -> Support {
        let abi = CSandbox_landlock_abi()
        var why = [CChar](repeating: 0, count: 256)
        if Worker.Fault.noNamespaces {
            return Support(
                landlockABI: abi > 0 ? Int(abi) : nil, seccomp: CSandbox_seccomp_available() == 1, namespaces: false,
                namespacesMissing: "refused by THUMBPIPE_FAULT_NO_NAMESPACES")
        }
        let namespaces = CSandbox_namespaces_available(&why, why.count) == 1
        return Support(
            landlockABI: abi > 0 ? Int(abi) : nil, seccomp: CSandbox_seccomp_available() == 1,
            namespaces: namespaces,
            namespacesMissing: namespaces ? nil : String(cBuffer: why))
    }

    /// What one worker got, as it reports with its first outcome.
    struct Confinement: Codable, Sendable, Equatable {
        var session = false
        var namespaces = false
        var ownRoot = false
        var noCapabilities = false
        /// Not uid 0 (a worker started by root runs as nobody).
        var notRoot = false
        var landlockABI: Int?
        var seccomp = false
        /// Why a layer is missing, in the kernel's words.
        var problems: [String] = []

        var complete: Bool {
            session && namespaces && ownRoot && noCapabilities && notRoot && landlockABI != nil && seccomp
        }

        /// E.g. `namespaces and own root, Landlock ABI 7 (…), seccomp, no capabilities, own session`.
        var description: String {
            var parts: [String] = []
            parts.append(namespaces ? (ownRoot ? "namespaces and a root of its own" : "namespaces") : "no namespaces")
            if let abi = landlockABI { parts.append("Landlock ABI \(abi) (\(Support.landlockRights(abi)))") }
            if seccomp { parts.append("seccomp") }
            if noCapabilities { parts.append("no capabilities") }
            if notRoot { parts.append("not root") }
            if session { parts.append("own session") }
            return parts.joined(separator: ", ")
        }
    }

    /// What a run's workers run under, in words: for the summary, the report and `--version`.
    public static func describe(_ mode: SandboxMode, support: Support = probe()) -> String {
        mode == .off ? "off (--sandbox off)" : support.description
    }

    /// Refuses `required` where the kernel cannot give every layer.
    /// - Throws: ``ThumbpipeError`` (70) naming what is missing.
    public static func check(_ mode: SandboxMode, support: Support = probe()) throws {
        guard mode == .required, !support.complete else { return }
        throw ThumbpipeError(
            .software,
            "--sandbox required, but this kernel offers \(support.description); run with --sandbox auto to go on without the missing layers"
        )
    }

    /// The first step of a worker, before any thread: its session, namespaces
    /// and root, capabilities and descriptors (``CSandbox_jail``). With
    /// namespaces the process forks: only the confined child returns.
    static func jail(_ mode: SandboxMode, scratch: String, extra: String?) -> Confinement {
        var confinement = Confinement()
        guard mode != .off else {
            _ = CSandbox_parent_death_signal()
            let left = CSandbox_leave_root()
            if left != 0 { confinement.problems.append("uid 0: \(ThumbpipeError.errnoText(-left))") }
            return confinement
        }
        var why = [CChar](repeating: 0, count: 512)
        let layers = scratch.withCString { scratchPath in
            withOptionalCString(extra) { extraPath in
                var jail = CSandboxJail(
                    scratch: scratchPath, extra: extraPath, namespaces: Worker.Fault.noNamespaces ? 0 : 1,
                    control_fd: WorkerProtocol.controlDescriptor)
                return CSandbox_jail(&jail, &why, why.count)
            }
        }
        let problems = String(cBuffer: why)
        if !problems.isEmpty { confinement.problems.append(problems) }
        if Worker.Fault.noNamespaces {
            confinement.problems.append("namespaces: refused by THUMBPIPE_FAULT_NO_NAMESPACES")
        }
        guard layers >= 0 else {
            confinement.problems.append("jail: \(ThumbpipeError.errnoText(-layers))")
            return confinement
        }
        confinement.session = layers & Int32(CSANDBOX_SESSION) != 0
        confinement.namespaces = layers & Int32(CSANDBOX_NAMESPACES) != 0
        confinement.ownRoot = layers & Int32(CSANDBOX_MOUNTS) != 0
        confinement.noCapabilities = layers & Int32(CSANDBOX_CAPABILITIES) != 0
        confinement.notRoot = layers & Int32(CSANDBOX_NOT_ROOT) != 0
        return confinement
    }

    /// The folders a worker outside a root of its own may read: what libvips,
    /// its modules and the C library load from. Not the user's files.
    static let systemFolders = [
        "/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime", "/dev/urandom", "/dev/zero", "/proc/self",
    ]

    /// The last step, after libvips and its modules are loaded and before the
    /// first source byte: Landlock and the seccomp filter.
    static func enter(_ mode: SandboxMode, scratch: String, extra: String?, into confinement: inout Confinement) {
        guard mode != .off else { return }
        if CSandbox_landlock_abi() > 0 {
            let readable = confinement.ownRoot ? ["/"] : systemFolders
            var pointers = readable.map { strdup($0) }
            defer { pointers.forEach { free($0) } }
            let result = pointers.withUnsafeMutableBufferPointer { buffer in
                buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { list in
                    scratch.withCString { scratchPath in
                        withOptionalCString(extra) {
                            CSandbox_landlock(list.baseAddress, Int32(list.count), scratchPath, $0)
                        }
                    }
                }
            }
            if result > 0 {
                confinement.landlockABI = Int(result)
            } else {
                confinement.problems.append("Landlock: \(ThumbpipeError.errnoText(-result))")
            }
        } else {
            confinement.problems.append("Landlock: not offered by this kernel")
        }
        if CSandbox_seccomp_available() == 1 {
            let result = CSandbox_seccomp(WorkerProtocol.controlDescriptor)
            if result == 0 {
                confinement.seccomp = true
            } else {
                confinement.problems.append("seccomp: \(ThumbpipeError.errnoText(-result))")
            }
        } else {
            confinement.problems.append("seccomp: not offered by this kernel")
        }
    }
}

private func withOptionalCString<T>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
    guard let string else { return body(nil) }
    return string.withCString(body)
}
