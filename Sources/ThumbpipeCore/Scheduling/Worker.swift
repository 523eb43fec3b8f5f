import Foundation

/// The worker process: `thumbpipe __worker`, started by ``Supervisor``. It
/// reads a ``WorkerProtocol/Hello`` and then jobs on standard input, runs each
/// through ``ItemJobRunner``, and writes each outcome to its original standard
/// output. It is the only process that opens sources with libvips.
public enum Worker {
    /// The hidden subcommand that starts a worker.
    public static let subcommand = "__worker"

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
        if limits.workerMemoryBytes > 0 {
            var limit = rlimit(rlim_cur: rlim_t(limits.workerMemoryBytes), rlim_max: rlim_t(limits.workerMemoryBytes))
            setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        }
        do {
            try Vips.restrictLoaders(to: limits.formats.compactMap(ImageFormat.init(rawValue:)))
        } catch {
            FileHandle.standardError.write(Data("thumbpipe worker: \(error)\n".utf8))
            return 70
        }
        let runner = ItemJobRunner(settings: hello.settings, outputFolder: hello.outputFolder)
        let faults = Fault.fromEnvironment()
        while case .message(let data) = WorkerProtocol.receive(from: 0, deadline: nil) {
            guard let job = try? WorkerProtocol.decode(ItemJob.self, data) else { return 70 }
            let outcome = runner.run(job) {
                for fault in faults where job.source.contains(fault.text) { fault.inject() }
            }
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
    /// a source whose path contains TEXT (several, comma-separated). With
    /// `THUMBPIPE_FAULT_MARKER=FILE`, the worker first creates FILE, so a test
    /// knows the moment.
    struct Fault {
        enum Kind: String { case crash, hang, pause }
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
                FileManager.default.createFile(atPath: marker, contents: Data(text.utf8))
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
            }
        }
    }
}
