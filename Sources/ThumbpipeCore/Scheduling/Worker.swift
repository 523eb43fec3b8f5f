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
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
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

    /// Runs the worker loop until the parent closes the pipe; returns the exit status.
    public static func main() -> Int32 {
        // The parent decides when a worker stops (SIGKILL); a terminal's Ctrl-C
        // reaches the whole process group and must not look like a crash.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        signal(SIGXFSZ, SIG_IGN)
        // Replies go to the original stdout alone; anything a library prints goes to stderr.
        let replies = dup(1)
        _ = fcntl(replies, F_SETFD, FD_CLOEXEC)
        dup2(2, 1)
        watchParent()
        guard case .message(let data) = WorkerProtocol.receive(from: 0, deadline: nil),
            let hello = try? WorkerProtocol.decode(WorkerProtocol.Hello.self, data)
        else { return 70 }
        let limits = hello.settings.limits
        do {
            try Vips.restrictLoaders(to: limits.formats)
        } catch {
            FileHandle.standardError.write(Data("thumbpipe worker: \(error)\n".utf8))
            return 70
        }
        // The cap counts from here: libvips and its modules are mapped (a module
        // that cannot map is an environment error, never a source's failure).
        if limits.workerMemoryBytes > 0 {
            var limit = rlimit(rlim_cur: rlim_t(limits.workerMemoryBytes), rlim_max: rlim_t(limits.workerMemoryBytes))
            setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        }
        let runner = ItemJobRunner(settings: hello.settings, outputFolder: hello.outputFolder)
        let faults = Fault.fromEnvironment()
        // From here on, every byte read may be hostile.
        // The tests' fault marker (a testing aid) stays writable.
        let marker = ProcessInfo.processInfo.environment["THUMBPIPE_FAULT_MARKER"].map {
            URL(fileURLWithPath: $0).deletingLastPathComponent().path
        }
        if let problem = Sandbox.enter(hello.sandbox, writable: hello.workFolder, also: marker),
            hello.sandbox == .required
        {
            FileHandle.standardError.write(Data("thumbpipe worker: cannot enter the sandbox: \(problem)\n".utf8))
            return 70
        }
        var ready: UInt64? = Spans.now
        var idleSince = Spans.now
        while case .message(let data) = WorkerProtocol.receive(from: 0, deadline: nil) {
            let waited = Spans.now &- idleSince
            guard let job = try? WorkerProtocol.decode(ItemJob.self, data) else { return 70 }
            let escape = faults.first { $0.kind == .escape && job.source.contains($0.text) }
            var outcome =
                escape.map { ItemOutcome(failure: $0.tryToEscape(from: job)) }
                ?? runner.run(job) {
                    for fault in faults where job.source.contains(fault.text) { fault.inject() }
                }
            outcome.waitedNanoseconds = waited
            outcome.readyAt = ready
            ready = nil
            defer { idleSince = Spans.now }
            guard let reply = try? WorkerProtocol.encode(outcome), (try? WorkerProtocol.send(reply, to: replies)) != nil
            else { return 74 }
        }
        return 0
    }

    /// Ends this process when its parent goes away (even SIGKILLed), so no
    /// worker outlives a run, even one stuck in a decoder.
    private static func watchParent() {
        let parent = getppid()
        let thread = Thread {
            while getppid() == parent { usleep(200_000) }
            _exit(70)
        }
        thread.name = "thumbpipe-parent-watch"
        thread.start()
    }

    /// A testing aid: `THUMBPIPE_FAULT=crash:TEXT` makes a worker raise SIGSEGV,
    /// `hang:TEXT` sleep forever, and `pause:TEXT` sleep 2 s, when about to open
    /// a source whose path contains TEXT (several, comma-separated); `escape:TEXT`
    /// makes it act as an exploited decoder would, for that item: write a file
    /// beside the source, connect to 127.0.0.1 over TCP, and exec `/bin/true`. With
    /// `THUMBPIPE_FAULT_MARKER=FILE`, the worker first creates FILE, so a test
    /// knows the moment.
    struct Fault {
        enum Kind: String { case crash, hang, pause, escape }
        var kind: Kind
        var text: String

        static func fromEnvironment() -> [Fault] {
            guard let value = ProcessInfo.processInfo.environment["THUMBPIPE_FAULT"] else { return [] }
            return value.split(separator: ",").compactMap { part in
                let pieces = part.split(separator: ":", maxSplits: 1).map(String.init)
                guard pieces.count == 2, let kind = Kind(rawValue: pieces[0]), !pieces[1].isEmpty else { return nil }
                return Fault(kind: kind, text: pieces[1])
            }
        }

        func inject() {
            if let marker = ProcessInfo.processInfo.environment["THUMBPIPE_FAULT_MARKER"] {
                _ = FileManager.default.createFile(atPath: marker, contents: Data(text.utf8))
            }
            switch kind {
            case .crash:
                // A real invalid write, as a decoder's bug would make.
                UnsafeMutablePointer<Int>(bitPattern: 16)?.pointee = 1
                raise(SIGSEGV)
            case .hang:
                while true { sleep(1000) }
            case .pause:
                usleep(2_000_000)
            case .escape:
                break
            }
        }

        /// What an exploited decoder would try; each attempt the sandbox refuses
        /// is named. The item fails either way (and with no sandbox, the exec
        /// replaces the worker, which the parent sees end).
        func tryToEscape(from job: ItemJob) -> ItemFailure {
            var refused: [String] = []
            var escaped: [String] = []
            let target =
                URL(fileURLWithPath: job.source).deletingLastPathComponent().path + "/thumbpipe-escape-\(getpid())"
            let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 {
                close(fd)
                escaped.append("wrote \(target)")
            } else {
                refused.append("write \(target): \(ThumbpipeError.errnoText())")
            }
            let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if socketFD < 0 {
                refused.append("TCP socket: \(ThumbpipeError.errnoText())")
            } else {
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = in_port_t(9).bigEndian
                address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                // Nothing listens on port 9: refused by the kernel's TCP is not the sandbox.
                if connected != 0 && (errno == EACCES || errno == EPERM) {
                    refused.append("connect 127.0.0.1:9: \(ThumbpipeError.errnoText())")
                } else {
                    escaped.append("opened a TCP socket")
                }
                close(socketFD)
            }
            let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            execv("/bin/true", arguments)
            refused.append("exec /bin/true: \(ThumbpipeError.errnoText())")
            if escaped.isEmpty {
                return ItemFailure(.sandbox, "the sandbox refused every escape: \(refused.joined(separator: "; "))")
            }
            return ItemFailure(
                .sandbox,
                "escaped the sandbox: \(escaped.joined(separator: "; ")) (refused: \(refused.joined(separator: "; ")))")
        }
    }
}
