import CSandbox
import Foundation

/// The worker process: `thumbpipe __worker`, started by ``Supervisor``. It
/// reads a ``WorkerProtocol/Hello`` and then jobs on standard input, runs each
/// through ``ItemJobRunner``, and writes each outcome to its original standard
/// output. It is the only process that opens sources with libvips.
public enum Worker {
    /// The hidden subcommand that starts a worker.
    public static let subcommand = "__worker"

    /// The hidden subcommand that prints a worker's address space once libvips
    /// and its modules are loaded (``startupFootprint(executable:)``).
    public static let footprintSubcommand = "__worker-footprint"

    /// Prints this process's address space (bytes) after starting libvips as a worker does.
    public static func printFootprint() -> Int32 {
        do {
            try Vips.restrictLoaders(to: ImageFormats(ImageFormat.photoFormats))
        } catch {
            return 70
        }
        guard let statm = FileSystem.text(of: "/proc/self/statm"),
            let pages = statm.split(separator: " ").first.flatMap({ Int($0) })
        else { return 70 }
        print(pages * Int(sysconf(Int32(_SC_PAGESIZE))))
        return 0
    }

    /// The least `limits.workerMemoryBytes` a worker can work under: what one
    /// maps before any image (libraries, modules, heaps: measured by starting one),
    /// plus 128 MiB for a small image, rounded up to 64 MiB.
    /// - Returns: nil when it cannot be measured (no limit is then refused).
    public static func minimumMemoryBytes(executable: String) -> Int? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [footprintSubcommand]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        // A number and a newline: it fits in the pipe, so reading after the exit is safe.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let bytes = Int(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { return nil }
        let step = 64 << 20
        return (bytes + (128 << 20) + step - 1) / step * step
    }

    /// Runs the worker loop until the parent closes its socket; returns the exit status.
    /// - Parameter arguments: what follows the subcommand: `--sandbox MODE --scratch FOLDER`.
    public static func main(arguments: [String]) -> Int32 {
        guard let (mode, scratch) = parse(arguments) else { return 64 }
        // The parent decides when a worker stops (SIGKILL); a terminal's Ctrl-C
        // must not look like a crash.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        signal(SIGXFSZ, SIG_IGN)
        let control = FileDescriptor(adopting: WorkerProtocol.controlDescriptor)
        let marker = Fault.markerFolder
        // Before any thread and any byte of a source: session, namespaces, root, capabilities.
        var confinement = Sandbox.jail(mode, scratch: scratch, extra: marker)
        guard case .message(let data, _) = WorkerProtocol.receive(from: control, deadline: nil),
            let hello = try? WorkerProtocol.decode(WorkerProtocol.Hello.self, data)
        else { return 70 }
        let limits = hello.settings.limits
        do {
            try Vips.restrictLoaders(to: limits.formats)
        } catch {
            try? FileDescriptor.standardError.write("thumbpipe worker: \(error)\n")
            return 70
        }
        // libavcodec is loaded now, outside the sandbox and the cap, when a HEIC may come.
        if hello.expectsHEIC { HeicPlaneStore.prepare(formats: limits.formats) }
        // The cap counts from here: libvips and its modules are mapped (a module
        // that cannot map is an environment error, never a source's failure).
        if limits.workerMemoryBytes > 0 {
            var limit = rlimit(rlim_cur: rlim_t(limits.workerMemoryBytes), rlim_max: rlim_t(limits.workerMemoryBytes))
            setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        }
        let runner = ItemJobRunner(settings: hello.settings)
        // From here on, every byte read may be hostile.
        Sandbox.enter(mode, scratch: scratch, extra: marker, into: &confinement)
        if mode == .required && !confinement.complete {
            try? FileDescriptor.standardError.write(
                "thumbpipe worker: cannot enter the sandbox: \(confinement.problems.joined(separator: "; "))\n")
            return 70
        }
        return serve(control: control, runner: runner, scratch: scratch, confinement: confinement)
    }

    /// The sandbox mode and scratch folder the parent passed; nil for anything else.
    private static func parse(_ arguments: [String]) -> (SandboxMode, String)? {
        var mode = SandboxMode.auto
        var scratch = "/nonexistent"
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { return nil }
            switch flag {
            case "--sandbox": mode = SandboxMode(rawValue: value) ?? .required
            case "--scratch": scratch = value
            default: return nil
            }
        }
        return (mode, scratch)
    }

    /// Takes jobs from the parent until it closes the socket, each answered with its
    /// outcome (and its store file, sealed); returns the exit status.
    private static func serve(
        control: FileDescriptor, runner: ItemJobRunner, scratch: String, confinement: Sandbox.Confinement
    ) -> Int32 {
        let faults = Fault.fromEnvironment()
        var ready: UInt64? = Spans.now
        var idleSince = Spans.now
        var firstReply = true
        while case .message(let data, let descriptor) = WorkerProtocol.receive(from: control, deadline: nil) {
            let waited = Spans.now &- idleSince
            guard let job = try? WorkerProtocol.decode(ItemJob.self, data), let source = descriptor else { return 70 }
            let storeFile = job.makeStore ? FileDescriptor.memoryFile() : nil
            let fault = faults.first { job.source.contains($0.text) }
            var outcome: ItemOutcome
            if let fault, fault.kind.isHostile {
                outcome = fault.actHostile(
                    job: job, source: source, storeFile: storeFile, scratch: scratch, runner: runner)
            } else {
                outcome = runner.run(job, descriptor: source, storeFile: storeFile) { fault?.inject() }
                fault?.tamper(&outcome, storeFile: storeFile)
            }
            try? source.close()
            outcome.waitedNanoseconds = waited
            outcome.readyAt = ready
            if firstReply { outcome.confinement = confinement }
            firstReply = false
            ready = nil
            defer { idleSince = Spans.now }
            guard reply(outcome, storeFile: storeFile, fault: fault, to: control) else { return 74 }
        }
        return 0
    }

    /// Sends `outcome` with its store file sealed (or the fault's unsealed one);
    /// false when the parent cannot be answered.
    private static func reply(
        _ outcome: ItemOutcome, storeFile: FileDescriptor?, fault: Fault?, to control: FileDescriptor
    ) -> Bool {
        var outcome = outcome
        var attached: FileDescriptor? = nil
        if outcome.storeWritten, let storeFile, fault?.kind != .unsealed {
            do {
                try storeFile.seal()
                attached = storeFile
            } catch {
                outcome.storeWritten = false
                outcome.writeError = "cannot seal the store file: \(error)"
            }
        } else if outcome.storeWritten, let storeFile {
            attached = storeFile
        }
        guard let reply = try? WorkerProtocol.encode(outcome),
            (try? WorkerProtocol.send(reply, descriptor: attached, to: control)) != nil
        else { return false }
        if let storeFile {
            if fault?.kind == .unsealed { fault?.writeAfterCommit(storeFile) }
            try? storeFile.close()
        }
        return true
    }
}
