import CSandbox
import Foundation

extension Worker {
    /// A testing aid (debug builds only: a release build ignores the variables).
    /// `THUMBPIPE_FAULT=KIND:TEXT[,KIND:TEXT…]` acts on sources whose path
    /// contains TEXT:
    ///
    /// - `crash` raises SIGSEGV, `hang` sleeps forever, `pause` sleeps 2 s, `noisy`
    ///   prints 1 MB with terminal escapes to its stdout and stderr, when about to read the source;
    /// - `hostile` (or `escape`) acts as an exploited decoder would, from inside
    ///   the confined worker (``CSandbox_hostile``), against the targets named by
    ///   `THUMBPIPE_FAULT_VICTIM`, `_SECRET`, `_PID`, `_UDP`, `_UNIX`, `_ABSTRACT`;
    /// - `bad-thumbnail` hands back 1 MB of pixels, `bad-store` a store file that is
    ///   not a JPEG, `unsealed` a store file it did not seal and writes to after
    ///   sending, `false-hash` false hashes.
    ///
    /// With `THUMBPIPE_FAULT_MARKER=FILE`, the worker first creates FILE (its
    /// folder stays writable in the sandbox), so a test knows the moment.
    struct Fault {
        enum Kind: String {
            case crash, hang, pause, escape, hostile, unsealed, noisy
            case badThumbnail = "bad-thumbnail"
            case badStore = "bad-store"
            case falseHash = "false-hash"

            /// Whether the item's job is replaced by the hostile code.
            var isHostile: Bool { self == .escape || self == .hostile }
        }
        var kind: Kind
        var text: String

        static var environment: [String: String] {
            #if DEBUG
                ProcessInfo.processInfo.environment
            #else
                [:]
            #endif
        }

        static func fromEnvironment() -> [Fault] {
            guard let value = environment["THUMBPIPE_FAULT"] else { return [] }
            return value.split(separator: ",").compactMap { part in
                let pieces = part.split(separator: ":", maxSplits: 1).map(String.init)
                guard pieces.count == 2, let kind = Kind(rawValue: pieces[0]), !pieces[1].isEmpty else { return nil }
                return Fault(kind: kind, text: pieces[1])
            }
        }

        /// `THUMBPIPE_FAULT_NO_NAMESPACES=1`: act as a kernel (or container) that gives no namespaces.
        static var noNamespaces: Bool { environment["THUMBPIPE_FAULT_NO_NAMESPACES"] != nil }

        /// The folder of the tests' marker file, kept writable in the sandbox; else, under
        /// `make test-sanitize`, the folder sanitizer reports go to
        /// (`THUMBPIPE_SANITIZER_REPORTS`), so a worker's report is never lost.
        static var markerFolder: String? {
            environment["THUMBPIPE_FAULT_MARKER"].map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
                ?? environment["THUMBPIPE_SANITIZER_REPORTS"]
        }

        private func mark() {
            if let marker = Self.environment["THUMBPIPE_FAULT_MARKER"] {
                try? FileSystem.write(text.utf8, to: marker)
            }
        }

        /// Called when about to read the source.
        func inject() {
            mark()
            switch kind {
            case .crash:
                // A real invalid write, as a decoder's bug would make.
                UnsafeMutablePointer<Int>(bitPattern: 16)?.pointee = 1
                raise(SIGSEGV)
            case .hang:
                while true { sleep(1000) }
            case .pause:
                usleep(2_000_000)
            case .noisy:
                // What a compromised decoder could print: escapes that retitle or clear a terminal.
                let line = Array("\u{1B}]0;owned\u{07}\u{1B}[2Jthumbpipe-noisy\r\n".utf8)
                for stream in [FileDescriptor.standardOutput, .standardError] {
                    for _ in 0..<(1 << 20) / line.count / 2 {
                        try? stream.write(line)
                    }
                }
            default:
                break
            }
        }

        /// The hostile worker's item: the attack, then a reply that names what
        /// was refused (the parent records it as the item's failure; tests judge by
        /// what changed outside). What could be read is put in the reply's
        /// warnings, the one channel a decoder has to the report.
        func actHostile(
            job: ItemJob, source: FileDescriptor, storeFile: FileDescriptor?, scratch: String, runner: ItemJobRunner
        )
            -> ItemOutcome
        {
            mark()
            let env = Self.environment
            let other = scratch.hasSuffix("worker-1") ? "worker-2" : "worker-1"
            let otherScratch = URL(fileURLWithPath: scratch).deletingLastPathComponent().appendingPathComponent(other)
                .path
            var report = [CChar](repeating: 0, count: 4096)
            var leak = [CChar](repeating: 0, count: 512)
            let escaped = withStrings(
                [
                    env["THUMBPIPE_FAULT_VICTIM"], env["THUMBPIPE_FAULT_SECRET"], env["THUMBPIPE_FAULT_UNIX"],
                    env["THUMBPIPE_FAULT_ABSTRACT"], otherScratch,
                ]
            ) { strings in
                var targets = CSandboxHostile(
                    victim: strings[0], secret: strings[1], process: pid_t(env["THUMBPIPE_FAULT_PID"] ?? "") ?? 0,
                    udp_port: Int32(env["THUMBPIPE_FAULT_UDP"] ?? "") ?? 0, unix_path: strings[2],
                    unix_abstract: strings[3], other_scratch: strings[4])
                return CSandbox_hostile(&targets, &report, report.count, &leak, leak.count)
            }
            // A hostile decoder's outputs too: a whole item made as usual, with the leak attached.
            var outcome = runner.run(job, descriptor: source, storeFile: storeFile)
            let stolen = String(cBuffer: leak)
            if !stolen.isEmpty { outcome.warnings.append(stolen) }
            let text = String(cBuffer: report)
            outcome.failure = ItemFailure(
                .sandbox,
                escaped == 0 ? "the sandbox refused every escape: \(text)" : "escaped the sandbox: \(text)")
            outcome.storeWritten = false
            return outcome
        }

        /// Tampers with a reply the job made as usual.
        func tamper(_ outcome: inout ItemOutcome, storeFile: FileDescriptor?) {
            switch kind {
            case .badThumbnail:
                outcome.thumbnailPixels = Data(repeating: 0x41, count: 1 << 20)
            case .badStore:
                if let storeFile {
                    try? storeFile.truncate(to: 0)
                    try? storeFile.write(Array("HOSTILE, not a JPEG".utf8), at: 0)
                }
            case .falseHash:
                outcome.sourceHash = "0000000000000000"
                outcome.storeHash = "0000000000000000"
                outcome.sourceStamp = FileStamp(size: 1, modified: 1)
            default:
                break
            }
        }

        /// `unsealed`: writes into the store file after the parent has it.
        func writeAfterCommit(_ storeFile: FileDescriptor) {
            try? storeFile.write(Array("HOSTILE".utf8), at: 0)
        }
    }
}

private func withStrings<T>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    let copies = strings.map { $0.map { UnsafePointer(strdup($0)!) } }
    defer { copies.forEach { $0.map { free(UnsafeMutablePointer(mutating: $0)) } } }
    return body(copies)
}
