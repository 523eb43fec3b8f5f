import Foundation
import Synchronization

/// One worker process: its control socket, and the pipe its stdout and stderr
/// go to, which a thread of its own relays to the parent's stderr (escaped, bounded).
final class WorkerProcess: Sendable {
    let pid: pid_t
    /// When it was spawned (monotonic nanoseconds).
    let spawnedAt = Spans.now
    private let control: Int32

    /// The most a worker's stdout and stderr may say in all; the rest is counted, not shown.
    static let diagnosticsLimit = 64 << 10

    /// Starts `executable __worker ARGUMENTS` as a session of its own, stdin on
    /// `/dev/null`, its socket on descriptor 3, and sends it `hello`.
    /// - Throws: ``ThumbpipeError`` (71) when the process cannot be started.
    init(executable: String, arguments: [String], hello: Data, environment extra: [String: String] = [:]) throws {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw ThumbpipeError(.osError, "cannot create a worker socket: \(ThumbpipeError.errnoText())")
        }
        var output: [Int32] = [0, 0]
        guard pipe(&output) == 0, fcntl(output[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(output[1], F_SETFD, FD_CLOEXEC) == 0
        else {
            close(pair[0])
            close(pair[1])
            throw ThumbpipeError(.osError, "cannot create a worker pipe: \(ThumbpipeError.errnoText())")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, output[1], 2)
        posix_spawn_file_actions_adddup2(&actions, pair[1], WorkerProtocol.controlDescriptor)
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
        close(pair[1])
        close(output[1])
        guard status == 0 else {
            close(pair[0])
            close(output[0])
            throw ThumbpipeError(
                .osError, "cannot start a worker (\(executable)): \(ThumbpipeError.errnoText(status))")
        }
        pid = child
        control = pair[0]
        Self.relay(output[0], pid: child)
        try WorkerProtocol.send(hello, to: control)
    }

    /// Relays what a worker prints (libraries' messages; a hostile worker's
    /// anything) to stderr on a thread of its own: one line at a time, prefixed,
    /// control characters escaped, at most ``diagnosticsLimit`` bytes in all.
    private static func relay(_ fd: Int32, pid: pid_t) {
        let thread = Thread {
            defer { close(fd) }
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
                FileHandle.standardError.write(Data(shownLine.utf8))
            }
            while true {
                let n = buffer.withUnsafeMutableBytes { FileDescriptor.read(fd, into: $0) }
                if n <= 0 { break }
                for byte in buffer[0..<n] {
                    if byte == 0x0A { flush() } else { line.append(byte) }
                    if line.count >= 1024 { flush() }
                }
            }
            flush()
            if dropped > 0 {
                FileHandle.standardError.write(
                    Data("thumbpipe: worker \(pid): \(dropped) more bytes of its output not shown\n".utf8))
            }
        }
        thread.name = "thumbpipe-worker-output"
        thread.start()
    }

    private let closed = Atomic<Bool>(false)

    deinit { closePipes() }

    /// Closes the socket (once): a worker waiting for a job reads EOF and exits.
    func closePipes() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        close(control)
    }

    /// Sends a job with its source's descriptor; false when the worker is gone.
    func send(_ job: Data, source: Int32) -> Bool {
        (try? WorkerProtocol.send(job, descriptor: source, to: control)) != nil
    }

    /// Waits for the reply until `deadline`.
    func receive(deadline: UInt64?) -> WorkerProtocol.Received {
        WorkerProtocol.receive(from: control, deadline: deadline)
    }

    /// Kills the worker at once.
    func kill() { _ = Foundation.kill(pid, SIGKILL) }

    /// Waits for the process to end and says how: nil for a clean exit,
    /// otherwise a few words (`SIGSEGV`, `exit status 70`).
    func reap() -> String? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
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

/// Runs item jobs on `jobs` worker processes: starts them, holds each job to
/// `limits.timeoutSeconds` of wall time, kills a worker that overruns or
/// replaces one that died, and kills them all at once when the run is cancelled.
final class Supervisor: Sendable {
    private let executable: String
    private let hello: Data
    /// What workers get added to the parent's environment.
    private let environment: [String: String]
    private let timeoutSeconds: Double
    private let sandbox: SandboxMode
    private let outputFolder: String
    /// What the parent checks of every reply.
    private let check: WorkerReply
    /// The confinement the workers reported, the weakest first seen.
    private let confinements = Mutex<[Sandbox.Confinement]>([])
    /// Live workers by slot, so that a cancel can kill them from any thread.
    private let live = Mutex<[Int: WorkerProcess]>([:])
    /// Workers told to end and not yet reaped.
    private let exiting = Mutex<[WorkerProcess]>([])
    /// Sources that crashed a worker in this run, with how it ended.
    private let crashed = Mutex<[String: String]>([:])
    private let cancelled = Atomic<Bool>(false)
    /// The highest peak RSS any worker of each slot reported.
    private let peaks = Mutex<[Int: Int]>([:])
    /// Workers that reported ready, and their start-up nanoseconds in all.
    private let startups = Mutex<(count: Int, nanoseconds: UInt64)>((0, 0))

    /// Workers started and their start-up (spawn to ready) in seconds, in all.
    var workerStartups: (count: Int, seconds: Double) {
        startups.withLock { ($0.count, Double($0.nanoseconds) / 1e9) }
    }

    /// Prepares workers of `executable` for `settings`, writing into `outputFolder`.
    init(executable: String, settings: PipelineSettings, outputFolder: String, sandbox: SandboxMode = .auto) throws {
        self.executable = executable
        self.sandbox = sandbox
        self.outputFolder = outputFolder
        timeoutSeconds = settings.limits.timeoutSeconds
        check = WorkerReply(settings: settings)
        hello = try WorkerProtocol.encode(WorkerProtocol.Hello(settings: settings))
        environment = VipsModules.workerEnvironment(allowing: settings.limits.formats)
    }

    /// What the workers of this run reported of their confinement (nil before any reply).
    var confinement: Sandbox.Confinement? {
        confinements.withLock { all in all.first { !$0.complete } ?? all.first }
    }

    /// A job given to a slot's worker, waiting for its outcome. A slot keeps
    /// the next job queued in its worker's pipe while the worker runs the one
    /// before, so the worker never waits for the parent between items.
    // @unchecked: its mutable fields are touched only by the slot thread that submitted it.
    final class Ticket: @unchecked Sendable {
        let job: ItemJob
        fileprivate let message: Data
        /// The source the parent opened, passed to the worker (again, to a replacement).
        fileprivate var source: OpenedSource?
        /// The worker it was last sent to, and when.
        fileprivate var worker: WorkerProcess?
        fileprivate var sentAt: UInt64 = 0
        /// The outcome, when known without a worker.
        fileprivate var ready: ItemOutcome?

        fileprivate init(job: ItemJob, message: Data, ready: ItemOutcome? = nil) {
            self.job = job
            self.message = message
            self.ready = ready
        }
    }

    /// What a slot has sent and not yet heard back about, oldest first; only
    /// the slot's own thread touches it.
    // @unchecked: kept in a Mutex to be found, then used by its slot's thread alone.
    private final class Queue: @unchecked Sendable {
        var pending: [Ticket] = []
        /// When the slot's worker last answered: it starts its next job then.
        var lastReply: UInt64 = 0
    }

    private let queues = Mutex<[Int: Queue]>([:])

    private func queue(_ slot: Int) -> Queue {
        queues.withLock { all in
            if let existing = all[slot] { return existing }
            let created = Queue()
            all[slot] = created
            return created
        }
    }

    /// Gives `job` to the worker of `slot` (starting one when there is none),
    /// behind whatever the slot has pending; ``outcome(of:slot:)`` waits for it.
    /// - Throws: ``ThumbpipeError`` when no worker can be started, ``RunCancelled``.
    func submit(_ job: ItemJob, slot: Int) throws -> Ticket {
        if let earlier = crashed.withLock({ $0[job.source] }) {
            return Ticket(
                job: job, message: Data(),
                ready: ItemOutcome(
                    failure: ItemFailure(
                        .crash, "decoder crashed on this source earlier in the run (\(earlier)); not retried",
                        transient: true)))
        }
        if cancelled.load(ordering: .relaxed) { throw RunCancelled(signal: 0) }
        let source: OpenedSource
        do {
            source = try OpenedSource(job.source, limits: check.settings.limits, hash: job.hashSource)
        } catch {
            return Ticket(job: job, message: Data(), ready: ItemOutcome(failure: error))
        }
        let ticket = Ticket(job: job, message: try WorkerProtocol.encode(job))
        ticket.source = source
        let queue = queue(slot)
        queue.pending.append(ticket)
        // A failed send is found out (and the worker replaced) when the outcome is awaited.
        _ = flush(queue, to: try worker(for: slot))
        return ticket
    }

    /// Sends `worker`, in order, every pending job it has not had yet; false when it is gone.
    private func flush(_ queue: Queue, to worker: WorkerProcess) -> Bool {
        for ticket in queue.pending where ticket.worker !== worker {
            guard let source = ticket.source, worker.send(ticket.message, source: source.descriptor) else {
                return false
            }
            ticket.worker = worker
            ticket.sentAt = Spans.now
        }
        return true
    }

    /// Waits for the outcome of `ticket`, the oldest the slot has pending; a
    /// timeout or a crash is an outcome too. Jobs queued behind it on a worker
    /// that died or was stopped go to its replacement.
    /// - Throws: ``ThumbpipeError`` when no worker can be started, ``RunCancelled``
    ///   when the run was cancelled (the item is then not done).
    func outcome(of ticket: Ticket, slot: Int) throws -> ItemOutcome {
        if let ready = ticket.ready { return ready }
        let queue = queue(slot)
        precondition(queue.pending.first === ticket, "outcomes are awaited in the order jobs were submitted")
        defer { queue.pending.removeFirst() }
        let job = ticket.job
        for attempt in 0..<2 {
            if cancelled.load(ordering: .relaxed) { throw RunCancelled(signal: 0) }
            let worker = try worker(for: slot)
            guard flush(queue, to: worker) else {
                // It died between jobs (or at start): replace it once.
                retire(slot, worker)
                if attempt == 0 { continue }
                return ItemOutcome(failure: ItemFailure(.worker, "the worker could not be started", transient: true))
            }
            // The worker starts this job once it has answered the one before.
            let started = max(ticket.sentAt, queue.lastReply)
            let deadline = timeoutSeconds > 0 ? started + UInt64(timeoutSeconds * 1e9) : nil
            switch worker.receive(deadline: deadline) {
            case .message(let data, let store):
                queue.lastReply = Spans.now
                defer { emptyScratch(slot) }
                guard var outcome = try? WorkerProtocol.decode(ItemOutcome.self, data), let source = ticket.source
                else {
                    if let store { close(store) }
                    retire(slot, worker)
                    return ItemOutcome(
                        failure: ItemFailure(.worker, "the worker sent an unreadable reply", transient: true))
                }
                if let confinement = outcome.confinement { confinements.withLock { $0.append(confinement) } }
                check.vouch(for: &outcome, job: job, source: source, store: store)
                ticket.source = nil
                peaks.withLock { $0[slot] = max($0[slot] ?? 0, outcome.peakRSSBytes) }
                if let ready = outcome.readyAt, ready > worker.spawnedAt {
                    startups.withLock {
                        $0.count += 1
                        $0.nanoseconds += ready - worker.spawnedAt
                    }
                }
                return outcome
            case .timedOut:
                worker.kill()
                retire(slot, worker)
                emptyScratch(slot)
                return ItemOutcome(
                    failure: ItemFailure(
                        .timeout,
                        "timed out after \(Self.seconds(timeoutSeconds)) s (limits.timeoutSeconds); the worker was stopped",
                        transient: true))
            case .closed:
                let how = retire(slot, worker) ?? "exit status 0"
                emptyScratch(slot)
                if cancelled.load(ordering: .relaxed) { throw RunCancelled(signal: 0) }
                crashed.withLock { $0[job.source] = how }
                return ItemOutcome(failure: ItemFailure(.crash, "decoder crashed (\(how))", transient: true))
            }
        }
        return ItemOutcome(failure: ItemFailure(.worker, "the worker could not be started", transient: true))
    }

    /// Kills every worker at once (from a signal handler's thread).
    func cancel() {
        cancelled.store(true, ordering: .relaxed)
        live.withLock { workers in
            for worker in workers.values { worker.kill() }
        }
    }

    /// Ends the workers once the run is over: closing their pipes ends them.
    /// Does not wait for them to go (a worker takes milliseconds to unmap its
    /// memory, which the parent spends on the report and archive instead):
    /// ``reapExiting()`` does.
    func shutDown() {
        let workers = live.withLock { all in
            defer { all.removeAll() }
            return Array(all.values)
        }
        for worker in workers {
            if cancelled.load(ordering: .relaxed) { worker.kill() }
            worker.closePipes()
        }
        exiting.withLock { $0 += workers }
    }

    /// Waits for the workers ``shutDown()`` ended.
    func reapExiting() {
        let workers = exiting.withLock { all in
            defer { all.removeAll() }
            return all
        }
        for worker in workers { _ = worker.reap() }
    }

    /// The sum over slots of the highest peak RSS a worker of that slot reported:
    /// the most the workers can have held at one time.
    var workersPeakRSSBytes: Int { peaks.withLock { $0.values.reduce(0, +) } }

    /// The process ids of the workers alive now.
    var workerPids: [pid_t] { live.withLock { $0.values.map(\.pid) } }

    /// The highest peak RSS any single worker reported.
    var largestWorkerPeakRSSBytes: Int { peaks.withLock { $0.values.max() ?? 0 } }

    private func worker(for slot: Int) throws -> WorkerProcess {
        if let existing = live.withLock({ $0[slot] }) { return existing }
        let scratch = OutputFolder.scratchFolder(outputFolder, slot: slot)
        if mkdir(scratch, 0o700) != 0 && errno != EEXIST {
            throw ThumbpipeError(.cannotCreate, "\(scratch): cannot create: \(ThumbpipeError.errnoText())")
        }
        OutputFolder.empty(scratch)
        var environment = environment
        // libvips spills large images into the worker's scratch folder, the one it may write to.
        environment["TMPDIR"] = scratch
        let started = try WorkerProcess(
            executable: executable, arguments: ["--sandbox", sandbox.rawValue, "--scratch", scratch], hello: hello,
            environment: environment)
        live.withLock { $0[slot] = started }
        if cancelled.load(ordering: .relaxed) { started.kill() }
        return started
    }

    /// Empties the scratch folder of `slot`'s worker: nothing a job left there reaches the next.
    private func emptyScratch(_ slot: Int) {
        OutputFolder.empty(OutputFolder.scratchFolder(outputFolder, slot: slot))
    }

    /// Forgets a worker that is dead or being killed, and reaps it.
    @discardableResult
    private func retire(_ slot: Int, _ worker: WorkerProcess) -> String? {
        live.withLock { if $0[slot] === worker { $0[slot] = nil } }
        return worker.reap()
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%g", value)
    }
}
