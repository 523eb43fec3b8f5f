import Foundation
import Synchronization

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
    private let output: OutputFolder
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

    /// Prepares workers of `executable` for `settings`, their scratch folders in `output`.
    /// - Parameter expectsHEIC: some item to be done is named like a HEIC (its workers load the HEVC decoder).
    init(
        executable: String, settings: PipelineSettings, output: OutputFolder, sandbox: SandboxMode = .auto,
        expectsHEIC: Bool = false
    ) throws {
        self.executable = executable
        self.sandbox = sandbox
        self.output = output
        timeoutSeconds = settings.limits.timeoutSeconds
        check = WorkerReply(settings: settings)
        hello = try WorkerProtocol.encode(WorkerProtocol.Hello(settings: settings, expectsHEIC: expectsHEIC))
        environment = VipsModules.workerEnvironment(allowing: settings.limits.formats)
    }

    /// What the workers of this run reported of their confinement (nil before any reply).
    var confinement: Sandbox.Confinement? {
        confinements.withLock { all in all.first { !$0.complete } ?? all.first }
    }

    /// A job given to a slot's worker, waiting for its outcome. A slot keeps
    /// the next job queued in its worker's pipe while the worker runs the one
    /// before, so the worker never waits for the parent between items.
    // Not Sendable: its mutable fields are touched only by the slot thread that submitted it.
    final class Ticket {
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
    // Not Sendable: kept in a Mutex to be found, then used by its slot's thread alone.
    private final class Queue {
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
        // The worker first: its start-up (the dynamic loader, the sandbox, its
        // modules) runs while the source is opened and hashed here, not after.
        _ = try worker(for: slot)
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
        let scratch = output.layout.scratch(slot: slot)
        do { try FileSystem.createFolder(scratch, mode: 0o700) } catch {
            if error != .exists { throw ThumbpipeError(.cannotCreate, "\(scratch): cannot create: \(error)") }
        }
        OutputFolder.empty(scratch)
        // A worker started by root runs as nobody: its one writable folder is handed to it.
        if geteuid() == 0 { try? FileSystem.changeOwner(scratch, to: Sandbox.workerUID) }
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
        OutputFolder.empty(output.layout.scratch(slot: slot))
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
