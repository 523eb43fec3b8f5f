import Foundation

/// One worker process: its control socket, and the pipe its stdout and stderr
/// go to, which a thread of its own relays to the parent's stderr (escaped, bounded).
final class WorkerProcess: Sendable {
    let pid: pid_t
    /// When it was spawned (monotonic nanoseconds).
    let spawnedAt = Spans.now
    private let control: FileDescriptor
    /// Signalled when the relay has read the output pipe to its end and written
    /// the last of it (the count of bytes not shown included).
    private let relayed = DispatchSemaphore(value: 0)

    /// The most a worker's stdout and stderr may say in all; the rest is counted, not shown.
    static let diagnosticsLimit = 64 << 10

    /// Starts `executable __worker ARGUMENTS` as a session of its own, stdin on
    /// `/dev/null`, its socket on descriptor 3, and sends it `hello`.
    /// - Throws: ``ThumbpipeError`` (71) when the process cannot be started.
    init(executable: String, arguments: [String], hello: Data, environment extra: [String: String] = [:]) throws {
        let pair: (parent: FileDescriptor, child: FileDescriptor)
        do { pair = try FileDescriptor.socketPair() } catch {
            throw ThumbpipeError(.osError, "cannot create a worker socket: \(error)")
        }
        let output: (read: FileDescriptor, write: FileDescriptor)
        do { output = try FileDescriptor.pipe() } catch {
            throw ThumbpipeError(.osError, "cannot create a worker pipe: \(error)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output.write.rawValue, 1)
        posix_spawn_file_actions_adddup2(&actions, output.write.rawValue, 2)
        posix_spawn_file_actions_adddup2(&actions, pair.child.rawValue, WorkerProtocol.controlDescriptor)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGTERM, SIGPIPE] { sigaddset(&defaults, number) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        // POSIX_SPAWN_SETSID (glibc 2.26): no controlling terminal, a process group of its own.
        let setsid: Int32 = 0x80
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | setsid))
        let argv: [UnsafeMutablePointer<CChar>?] =
            ([executable, Worker.subcommand] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // A crashing worker is the parent's to report, in one line: no Swift
        // backtrace dump on the user's terminal.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        environment.merge(extra) { $1 }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        // The child's ends are the child's: closed here, so its exit is seen as EOF.
        try? pair.child.close()
        try? output.write.close()
        guard status == 0 else {
            throw ThumbpipeError(
                .osError, "cannot start a worker (\(executable)): \(ThumbpipeError.errnoText(status))")
        }
        pid = child
        control = pair.parent
        Self.relay(output.read, pid: child, done: relayed)
        try WorkerProtocol.send(hello, to: control)
    }

    /// Relays what a worker prints (libraries' messages; a hostile worker's
    /// anything) to stderr on a thread of its own: one line at a time, prefixed,
    /// control characters escaped, at most ``diagnosticsLimit`` bytes in all.
    private static func relay(_ output: FileDescriptor, pid: pid_t, done: DispatchSemaphore) {
        let thread = Thread {
            var shown = 0
            var dropped = 0
            var line: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            func flush() {
                guard !line.isEmpty else { return }
                defer { line.removeAll(keepingCapacity: true) }
                guard shown < diagnosticsLimit else {
                    dropped += line.count
                    return
                }
                // Counted as shown (escaped, prefixed): what reaches the terminal is what is bounded.
                let shownLine = "thumbpipe: worker \(pid): \(FileInfo.escaped(line))\n"
                shown += shownLine.utf8.count
                try? FileDescriptor.standardError.write(shownLine)
            }
            while true {
                let n = (try? output.read(into: &buffer)) ?? 0
                if n <= 0 { break }
                for byte in buffer[0..<n] {
                    if byte == 0x0A { flush() } else { line.append(byte) }
                    if line.count >= 1024 { flush() }
                }
            }
            flush()
            if dropped > 0 {
                try? FileDescriptor.standardError.write(
                    "thumbpipe: worker \(pid): \(dropped) more bytes of its output not shown\n")
            }
            done.signal()
        }
        thread.name = "thumbpipe-worker-output"
        thread.start()
    }

    /// Closes the socket (once; the value closes it too when it goes): a worker
    /// waiting for a job reads EOF and exits.
    func closePipes() { try? control.close() }

    /// Sends a job with its source's descriptor; false when the worker is gone.
    func send(_ job: Data, source: FileDescriptor) -> Bool {
        (try? WorkerProtocol.send(job, descriptor: source, to: control)) != nil
    }

    /// Waits for the reply until `deadline`.
    func receive(deadline: UInt64?) -> WorkerProtocol.Received {
        WorkerProtocol.receive(from: control, deadline: deadline)
    }

    /// Kills the worker at once.
    func kill() { _ = Foundation.kill(pid, SIGKILL) }

    /// Waits for the process to end and says how: nil for a clean exit,
    /// otherwise a few words (`SIGSEGV`, `exit status 70`). Then gives the relay
    /// up to a second to write the rest of what the worker printed, so a run does
    /// not end (and its process exit) with the tail of it, or the count of what
    /// was not shown, still unwritten; a descendant that keeps the pipe open
    /// costs that second, not a hang.
    func reap() -> String? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        _ = relayed.wait(timeout: .now() + 1)
        let signal = status & 0x7F
        if signal != 0 { return Self.signalName(signal) }
        let code = (status >> 8) & 0xFF
        return code == 0 ? nil : "exit status \(code)"
    }

    static func signalName(_ number: Int32) -> String {
        let names: [Int32: String] = [
            SIGSEGV: "SIGSEGV", SIGBUS: "SIGBUS", SIGABRT: "SIGABRT", SIGILL: "SIGILL", SIGFPE: "SIGFPE",
            SIGKILL: "SIGKILL", SIGTRAP: "SIGTRAP", SIGTERM: "SIGTERM", SIGINT: "SIGINT", SIGXCPU: "SIGXCPU",
            SIGXFSZ: "SIGXFSZ", SIGSYS: "SIGSYS",
        ]
        return names[number] ?? "signal \(number)"
    }
}
