import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A decoder exploited by a crafted file reaches nothing outside its worker,
/// and the parent takes nothing from it unchecked. The hostile code runs inside
/// a confined worker (THUMBPIPE_FAULT=hostile:…, debug builds); every test judges
/// the jail by what changed outside, never by what the worker says.
@Suite("Sandbox: a hostile worker reaches nothing, the parent trusts nothing", .serialized)
struct SandboxTests {
    static let support = Sandbox.probe()
    static let helpers = TestPaths.fixtures.deletingLastPathComponent().appendingPathComponent("Helpers").path

    /// The world outside a worker: a victim file, a secret, an unrelated
    /// process and listeners (UDP, UNIX socket by path and abstract name).
    final class Outside {
        let folder: String
        let victim: String
        let secret: String
        let secretText = "thumbpipe-secret-\(UUID().uuidString)"
        let victimTime = Date(timeIntervalSince1970: 1_500_000_000)
        let bystander = Process()
        let listeners = Process()
        let toListeners = Pipe()
        let fromListeners = Pipe()
        var udpPort = ""
        var unixPath = ""
        var abstractName = ""

        init(_ folder: String) throws {
            self.folder = folder
            try FileManager.default.createDirectory(atPath: folder + "/victim", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: folder + "/secret", withIntermediateDirectories: true)
            victim = writeFile(folder + "/victim", "victim.txt", "do not touch")
            secret = writeFile(folder + "/secret", "secret.txt", secretText + "\n")
            chmod(victim, 0o640)
            try FileManager.default.setAttributes([.modificationDate: victimTime], ofItemAtPath: victim)
            // Everything outside is the workers' own uid's, so that only the sandbox,
            // not a difference of users, keeps a worker from it.
            if getuid() == 0 {
                #expect(try runProcess("/bin/chown", ["-R", "\(workerUID):\(workerUID)", folder]).status == 0)
                bystander.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                bystander.arguments = [
                    "--reuid=\(workerUID)", "--regid=\(workerUID)", "--clear-groups", "/bin/sleep", "120",
                ]
            } else {
                bystander.executableURL = URL(fileURLWithPath: "/bin/sleep")
                bystander.arguments = ["120"]
            }
            try bystander.run()
            listeners.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            listeners.arguments = [SandboxTests.helpers + "/targets.py", folder]
            listeners.standardInput = toListeners
            listeners.standardOutput = fromListeners
            try listeners.run()
            let line = try #require(Self.readLine(fromListeners.fileHandleForReading))
            let parts = line.split(separator: " ").map(String.init)
            try #require(parts.count == 3, "targets.py said \(line)")
            (udpPort, unixPath, abstractName) = (parts[0], parts[1], parts[2])
        }

        var environment: [String: String] {
            [
                "THUMBPIPE_FAULT_VICTIM": victim, "THUMBPIPE_FAULT_SECRET": secret,
                "THUMBPIPE_FAULT_PID": String(bystander.processIdentifier), "THUMBPIPE_FAULT_UDP": udpPort,
                "THUMBPIPE_FAULT_UNIX": unixPath, "THUMBPIPE_FAULT_ABSTRACT": abstractName,
            ]
        }

        /// What reached the listeners (and stops them).
        func reached() throws -> [String: Any] {
            try toListeners.fileHandleForWriting.close()
            let data = fromListeners.fileHandleForReading.readDataToEndOfFile()
            listeners.waitUntilExit()
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }

        /// The unrelated process's state letter (`S` sleeping; `T` stopped), nil when it is gone.
        var bystanderState: String? {
            guard let stat = try? String(contentsOfFile: "/proc/\(bystander.processIdentifier)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            return stat[stat.index(close, offsetBy: 2)...].split(separator: " ").first.map(String.init)
        }

        func stop() {
            bystander.terminate()
            if listeners.isRunning { listeners.terminate() }
        }

        static func readLine(_ handle: FileHandle) -> String? {
            var bytes: [UInt8] = []
            while let byte = try? handle.read(upToCount: 1), let first = byte.first, first != 0x0A {
                bytes.append(first)
            }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Every file under `folder`, with its bytes.
    static func files(under folder: String) -> [(path: String, bytes: Data)] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        return walker.compactMap { $0 as? String }.compactMap { relative in
            let path = folder + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
            return FileManager.default.contents(atPath: path).map { (path, $0) }
        }
    }

    static func collection(_ label: String) throws -> (folder: String, manifest: String) {
        try photoCollection(
            label,
            [
                ("a.jpg", "Nikon-D3100.jpg", "A", "a"), ("evil.jpg", "Canon-EOS-1000D.jpg", "Evil", "evil"),
                ("thumb.jpg", "Sigma-DP1-small.jpg", "Thumb", "thumb"),
                ("store-bad.jpg", "Leica-T-Typ-701-small.jpg", "Store", "store"),
                ("unsealed.jpg", "Oppo-R7-Plus-small.jpg", "Unsealed", "unsealed"),
                ("hash.jpg", "Blackberry-Z10-small.jpg", "Hash", "hash"),
                ("b.heic", "Apple-iPhone-13-Pro-Max.HEIC", "B", "b"),
            ])
    }

    static let faults =
        "hostile:evil.jpg,bad-thumbnail:thumb.jpg,bad-store:store-bad.jpg,unsealed:unsealed.jpg,false-hash:hash.jpg"

    @Test(
        "A hostile worker changes nothing outside: no metadata, signal, datagram, UNIX socket, secret, planted file; its item fails alone",
        .enabled(if: support.complete, "needs namespaces, Landlock and seccomp: \(support)")
    )
    func hostileWorkerReachesNothing() throws {
        let (folder, manifest) = try Self.collection("hostile")
        let outside = try Outside(folder)
        defer { outside.stop() }
        let out = folder + "/out"
        let result = try runThumbpipe(
            ["run", manifest, "-o", out, "-j", "2"],
            environment: outside.environment.merging(["THUMBPIPE_FAULT": Self.faults]) { $1 })
        let reached = try outside.reached()

        // The run finished, with its archive, and only the tampered items failed.
        #expect(result.status == 1, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: out + "/items.archive"))
        let report = try readJSONObject(out + "/.thumbpipe/report.json")
        let failures = try report.objects("failures")
        let failed = Dictionary(
            failures.map {
                ($0["itemKey"] as? String ?? "?", ($0["stage"] as? String ?? "", $0["message"] as? String ?? ""))
            }
        ) { a, _ in a }
        #expect(Set(failed.keys) == ["evil", "thumb", "store", "unsealed"], "\(failures)")
        #expect(
            failed["evil"]?.0 == "sandbox" && failed["evil"]?.1.contains("refused every escape") == true, "\(failed)")
        #expect(failed["thumb"]?.1.contains("failed the parent's check: a thumbnail of 1048576 bytes") == true)
        #expect(failed["store"]?.1.contains("failed the parent's check: the store file is not a JPEG") == true)
        #expect(failed["unsealed"]?.1.contains("not sealed against change") == true)
        #expect(try report.counts("counts")["succeeded"] == 3, "a, hash and b are done")

        // Nothing outside changed.
        let info = try FileManager.default.attributesOfItem(atPath: outside.victim)
        #expect((info[.posixPermissions] as? NSNumber)?.intValue == 0o640, "the victim's mode")
        #expect((info[.ownerAccountID] as? NSNumber)?.intValue == Int(workerUID), "the victim's owner")
        #expect((info[.modificationDate] as? Date) == outside.victimTime, "the victim's mtime")
        let xattrs = try runProcess(
            "/usr/bin/python3", ["-c", "import os,sys; print(os.listxattr(sys.argv[1]))", outside.victim])
        #expect(!xattrs.stdout.contains("thumbpipe"), "no xattr: \(xattrs.stdout)")
        #expect(!FileManager.default.fileExists(atPath: outside.victim + ".thumbpipe-escape"))
        #expect(try String(contentsOfFile: outside.victim, encoding: .utf8) == "do not touch")
        #expect(outside.bystanderState == "S", "the unrelated process is neither stopped nor killed")
        #expect((reached["udp"] as? [String])?.isEmpty == true, "no datagram: \(reached)")
        #expect(reached["unix"] as? Int == 0 && reached["abstract"] as? Int == 0, "no UNIX socket: \(reached)")

        // No secret anywhere in the output, and every store file is one the parent checked.
        for file in Self.files(under: out) {
            #expect(file.bytes.range(of: Data(outside.secretText.utf8)) == nil, "the secret is in \(file.path)")
        }
        #expect(!result.stderr.contains(outside.secretText))
        for key in ["a", "hash", "b"] {
            let store = try Data(contentsOf: URL(fileURLWithPath: out + "/" + key))
            #expect(store.starts(with: [0xFF, 0xD8]) && store.range(of: Data("HOSTILE".utf8)) == nil, "\(key)")
        }
        for key in ["evil", "thumb", "store", "unsealed"] {
            #expect(!FileManager.default.fileExists(atPath: out + "/" + key), "no store file for \(key)")
        }
        // Scratch folders are per worker and empty; nothing was planted in another's.
        let work = out + "/.thumbpipe/work"
        for folder in try FileManager.default.contentsOfDirectory(atPath: work) {
            #expect(try FileManager.default.contentsOfDirectory(atPath: work + "/" + folder).isEmpty, "\(folder)")
        }

        // A false hash and stamp are not taken: the next night, hashing every source, finds them all unchanged.
        let again = try runThumbpipe(["run", manifest, "-o", out, "-q", "--verify-content"])
        #expect(again.status == 1, "\(again.stderr)")
        let second = try readJSONObject(out + "/.thumbpipe/report.json").counts("incremental")
        #expect(second["unchanged"] == 7 && second["decoded"] == 0 && second["changed"] == 0, "\(second)")
    }

    @Test(
        "Nothing is typed into the user's terminal (TIOCSTI), whatever the worker tries",
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/python3"))
    )
    func nothingTyped() throws {
        let (folder, manifest) = try photoCollection(
            "tiocsti", [("a.jpg", "Nikon-D3100.jpg", "A", nil), ("evil.jpg", "Canon-EOS-1000D.jpg", "Evil", nil)])
        let outside = try Outside(folder)
        defer { outside.stop() }
        _ = try? outside.reached()
        let run = try runProcess(
            "/usr/bin/python3",
            [
                Self.helpers + "/pty-run.py", "thumbpipe-hostile-typed", TestPaths.executable, "run", manifest, "-o",
                folder + "/out", "-q",
            ],
            environment: outside.environment.merging(["THUMBPIPE_FAULT": "hostile:evil.jpg"]) { $1 })
        let result = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any],
            "\(run.stdout) \(run.stderr)")
        #expect(result["status"] as? Int == 1, "\(result)")
        #expect(result["pending"] as? Int == 0, "typed into the terminal: \(result["typed"] ?? "")")
        #expect(result["echoed"] as? Bool == false)
    }

    @Test(
        "A worker's status: not root, no capabilities, no_new_privs, seccomp, namespaces of its own; it dies with the run",
        .enabled(if: support.complete, "needs namespaces, Landlock and seccomp: \(support)")
    )
    func workerStatus() throws {
        let (folder, manifest) = try photoCollection("status", [("hang.jpg", "Nikon-D3100.jpg", "H", nil)])
        try FileManager.default.createDirectory(atPath: folder + "/marker", withIntermediateDirectories: true)
        writableByWorkers(folder + "/marker")
        let marker = folder + "/marker/m"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestPaths.executable)
        process.arguments = ["run", manifest, "-o", folder + "/out", "-q", "--timeout", "60", "-j", "1"]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["THUMBPIPE_FAULT": "hang:hang.jpg", "THUMBPIPE_FAULT_MARKER": marker]) { $1 }
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: marker) && Date() < deadline { usleep(20_000) }
        try #require(FileManager.default.fileExists(atPath: marker), "the worker never reached the source")
        let workers = Self.descendants(of: process.processIdentifier).filter { pid in
            Self.status(pid)["NSpid"]?.split(separator: "\t").count == 2
        }
        try #require(workers.count == 1, "one worker in a PID namespace of its own")
        let worker = workers[0]
        let status = Self.status(worker)
        #expect(status["CapEff"] == "0000000000000000")
        #expect(status["CapPrm"] == "0000000000000000")
        #expect(status["CapBnd"] == "0000000000000000")
        #expect(status["CapAmb"] == "0000000000000000")
        #expect(status["NoNewPrivs"] == "1")
        #expect(status["Seccomp"] == "2")
        // Never uid 0 (real, effective, saved, file system), nor any group of the run's.
        let uid = "\(workerUID)"
        #expect(status["Uid"]?.split(separator: "\t").map(String.init) == [uid, uid, uid, uid], "\(status)")
        #expect(status["Gid"]?.split(separator: "\t").map(String.init) == [uid, uid, uid, uid], "\(status)")
        #expect(status["Groups"]?.isEmpty != false, "\(status)")
        // The process that waits outside its PID namespace is not root either.
        if let waiter = Self.status(worker)["PPid"].flatMap({ pid_t($0) }), waiter != process.processIdentifier {
            #expect(Self.status(waiter)["Uid"]?.split(separator: "\t").first.map(String.init) == uid)
        }
        var kinds = ["mnt", "net", "ipc", "pid", "uts"]
        if geteuid() != 0 { kinds.append("user") }
        for kind in kinds {
            let mine = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/\(kind)")
            let its = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/ns/\(kind)")
            #expect(mine != its, "\(kind) namespace of its own")
        }
        // Its descriptors: /dev/null, the output pipe, its socket, the source; none of the parent's.
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(worker)/fd").compactMap(Int.init)
        #expect(fds.count <= 6, "\(fds)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/fd/0") == "/dev/null")
        // Its root holds no user file: the test's folder is not in it.
        let mounts = try String(contentsOfFile: "/proc/\(worker)/mountinfo", encoding: .utf8)
        #expect(!mounts.contains(folder + " ") || mounts.contains(folder + "/out/.thumbpipe/work/worker-1"))
        // The run killed (SIGKILL, no chance to clean up): its worker goes too.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let gone = Date().addingTimeInterval(5)
        while kill(worker, 0) == 0 && Date() < gone { usleep(20_000) }
        #expect(kill(worker, 0) != 0, "the worker outlived its run")
    }

    static func descendants(of pid: pid_t) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        let children = tasks.flatMap { task in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? "")
                .split(separator: " ").compactMap { pid_t($0) }
        }
        return children + children.flatMap { descendants(of: $0) }
    }

    static func status(_ pid: pid_t) -> [String: String] {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return fields
    }

    @Test("Without the sandbox, the same hostile worker changes the victim: the tests above can fail")
    func hostileWithoutSandbox() throws {
        let (folder, manifest) = try photoCollection(
            "unconfined", [("a.jpg", "Nikon-D3100.jpg", "A", nil), ("evil.jpg", "Canon-EOS-1000D.jpg", "Evil", nil)])
        let outside = try Outside(folder)
        defer { outside.stop() }
        let result = try runThumbpipe(
            ["run", manifest, "-o", folder + "/out", "-q", "--sandbox", "off"],
            environment: outside.environment.merging(["THUMBPIPE_FAULT": "hostile:evil.jpg"]) { $1 })
        let reached = try outside.reached()
        #expect(result.status == 1, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: outside.victim + ".thumbpipe-escape"))
        #expect(!FileManager.default.fileExists(atPath: outside.victim), "unconfined, it deleted the victim")
        #expect((reached["udp"] as? [String])?.contains(outside.secretText) == true, "and sent the secret: \(reached)")
        #expect(outside.bystanderState == nil, "and killed the unrelated process")
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        #expect(report["sandbox"] as? String == "off (--sandbox off)")
    }

    @Test("--version and report.json name every layer; --sandbox required refuses a kernel without them (70)")
    func layersNamed() throws {
        let version = try runThumbpipe(["--version"])
        #expect(version.stdout.contains("sandbox \(Self.support)"), "\(version.stdout)")
        if Self.support.complete {
            #expect(version.stdout.contains("namespaces (") && version.stdout.contains("Landlock ABI"))
            #expect(version.stdout.contains("seccomp") && version.stdout.contains("no capabilities"))
        }
        let (folder, manifest) = try photoCollection("layers", [("a.jpg", "Nikon-D3100.jpg", "A", nil)])
        let refused = try runThumbpipe(
            ["run", manifest, "-o", folder + "/out", "-q", "--sandbox", "required"],
            environment: ["THUMBPIPE_FAULT_NO_NAMESPACES": "1"])
        #expect(refused.status == 70, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("no namespaces (refused by THUMBPIPE_FAULT_NO_NAMESPACES)"), "\(refused.stderr)")
        // auto: the other layers hold, and the report says what is missing.
        let auto = try runThumbpipe(
            ["run", manifest, "-o", folder + "/auto", "-q"], environment: ["THUMBPIPE_FAULT_NO_NAMESPACES": "1"])
        #expect(auto.status == 0, "\(auto.stderr)")
        let report = try readJSONObject(folder + "/auto/.thumbpipe/report.json")
        let sandbox = try #require(report["sandbox"] as? String)
        #expect(sandbox.hasPrefix("no namespaces") && sandbox.contains("missing: namespaces: refused"), "\(sandbox)")
        if Self.support.landlockABI != nil { #expect(sandbox.contains("Landlock ABI")) }
        if Self.support.complete {
            let required = try runThumbpipe([
                "run", manifest, "-o", folder + "/required", "-q", "--sandbox", "required",
            ])
            #expect(required.status == 0, "\(required.stderr)")
            let full = try readJSONObject(folder + "/required/.thumbpipe/report.json")
            #expect((full["sandbox"] as? String)?.hasPrefix("namespaces and a root of its own") == true, "\(full)")
        }
        let bad = try runThumbpipe(["run", "x.jsonl", "--sandbox", "strict"])
        #expect(bad.status == 64 && bad.stderr.contains("--sandbox takes required, auto or off"))
    }

    @Test(
        "Every fixture format decodes through the whole jail: the seccomp deny-list and Landlock break no loader",
        .enabled(if: support.complete, "needs namespaces, Landlock and seccomp: \(support)")
    )
    func everyFormatThroughTheJail() throws {
        let folder = TestPaths.temporaryFolder("formats")
        let photos = TestPaths.fixtureFiles("photos") + TestPaths.fixtureFiles("edge")
        var lines: [String] = []
        for (index, name) in photos.enumerated() {
            lines.append(#"{"itemName": "P\#(index)", "image": "\#(TestPaths.fixture(name))"}"#)
        }
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let jailed = try runThumbpipe(["run", manifest, "-o", folder + "/jailed", "-q", "--sandbox", "required"])
        let open = try runThumbpipe(["run", manifest, "-o", folder + "/open", "-q", "--sandbox", "off"])
        #expect(jailed.status == open.status, "\(jailed.stderr)")
        // The same failures and warnings either way (the summary's times and paths aside).
        func meaningful(_ text: String) -> [Substring] {
            text.split(separator: "\n").filter { !$0.contains(" items in ") }
        }
        #expect(meaningful(jailed.stderr) == meaningful(open.stderr), "\(jailed.stderr)")
        #expect(meaningful(jailed.stderr).count >= 4, "the fixtures' known failures and warnings are there")
        let a = try Data(contentsOf: URL(fileURLWithPath: folder + "/jailed/items.archive"))
        let b = try Data(contentsOf: URL(fileURLWithPath: folder + "/open/items.archive"))
        #expect(a == b, "the same archive, byte for byte")
    }

    @Test("A stalled parent is not a hung worker: a reply waiting when the parent wakes past --timeout is taken")
    func stalledParent() throws {
        let (folder, manifest) = try photoCollection(
            "stalled",
            [
                ("slow.jpg", "Nikon-D3100.jpg", "S", nil), ("b.jpg", "Canon-EOS-1000D.jpg", "B", nil),
                ("c.jpg", "Sigma-DP1-small.jpg", "C", nil),
            ])
        try FileManager.default.createDirectory(atPath: folder + "/marker", withIntermediateDirectories: true)
        writableByWorkers(folder + "/marker")
        let marker = folder + "/marker/m"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestPaths.executable)
        process.arguments = ["run", manifest, "-o", folder + "/out", "-q", "--timeout", "3", "-j", "1"]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["THUMBPIPE_FAULT": "pause:slow.jpg", "THUMBPIPE_FAULT_MARKER": marker]) { $1 }
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: marker) && Date() < deadline { usleep(10_000) }
        // The worker pauses 2 s on its source and replies; the parent sleeps 5 s, past its 3 s timeout.
        kill(process.processIdentifier, SIGSTOP)
        sleep(5)
        kill(process.processIdentifier, SIGCONT)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stderr)")
        #expect(!stderr.contains("timed out"), "\(stderr)")
        #expect(FileManager.default.fileExists(atPath: folder + "/out/items.archive"))
    }

    @Test(
        "A run's parent maps no libvips module, even once libvips has started there (a thumbnail past 1 Mpx is encoded by it); its workers map the ones their formats need"
    )
    func parentLoadsNoModule() throws {
        let (folder, manifest) = try photoCollection(
            "modules", [("a.jpg", "Canon-EOS-1000D.jpg", "A", nil), ("slow.jpg", "Sigma-DP1-small.jpg", "S", nil)])
        try FileManager.default.createDirectory(atPath: folder + "/marker", withIntermediateDirectories: true)
        writableByWorkers(folder + "/marker")
        let marker = folder + "/marker/m"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestPaths.executable)
        // 600 × 600 points at scale 2: 1.44 Mpx thumbnails, past PNGEncode.wholeBufferPixels, so the
        // parent encodes them through libvips (a 40-point one it encodes without starting libvips).
        process.arguments = [
            "run", manifest, "-o", folder + "/out", "-q", "-j", "1", "--set", "thumbnail.width=600", "--set",
            "thumbnail.height=600",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["THUMBPIPE_FAULT": "pause:slow.jpg", "THUMBPIPE_FAULT_MARKER": marker]) { $1 }
        process.standardError = FileHandle.nullDevice
        try process.run()
        let parent = process.processIdentifier
        // Read to the end (a /proc file says it is empty, so Foundation's reads stop at its first page).
        func read(_ path: String) -> String {
            guard let file = try? FileDescriptor.open(path, O_RDONLY) else { return "" }
            defer { try? file.close() }
            return String(decoding: (try? file.readToEnd()) ?? [], as: UTF8.self)
        }
        func lines(_ path: String) -> [String] { read(path).split(separator: "\n").map(String.init) }
        func threads(_ pid: Int32) -> [String] {
            FileSystem.names(in: "/proc/\(pid)/task")?.compactMap(\.text) ?? []
        }
        // The worker pauses 2 s on the second source (the smaller: a run takes the larger first).
        // By then the parent has had the first item's reply and encoded its PNG: libvips has
        // started there (its pool's threads show it).
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: marker) && Date() < deadline { usleep(10_000) }
        var started = false
        let settle = Date().addingTimeInterval(1.5)
        while !started && Date() < settle {
            started = threads(parent).contains { read("/proc/\(parent)/task/\($0)/comm").hasPrefix("libvips worker") }
            if !started { usleep(20_000) }
        }
        let parentMaps = read("/proc/\(parent)/maps")
        // The workers: the parent's descendants (a worker runs below its sandbox's first process).
        var workerModules: Set<String> = []
        for pid in Self.descendants(of: parent) {
            for line in lines("/proc/\(pid)/maps") {
                if let path = line.split(separator: " ").last, path.contains("/vips-modules-") {
                    workerModules.insert(String(path))
                }
            }
        }
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(started, "libvips started in the parent while the worker paused")
        #expect(parentMaps.contains("libvips.so"), "the parent maps libvips itself")
        #expect(
            !parentMaps.contains("/vips-modules-"),
            "the parent maps no module: \(parentMaps.split(separator: "\n").filter { $0.contains("vips-modules") })")
        // The same folder, seen from the workers: the modules the default formats need (HEIF) are mapped there.
        #expect(workerModules.contains { $0.hasSuffix("/vips-heif.so") }, "\(workerModules)")
        #expect(!workerModules.contains { $0.hasSuffix("/vips-magick.so") }, "\(workerModules)")
    }

    @Test("What a worker prints reaches the user's stderr relayed: prefixed, escapes shown as text, at most 64 KiB")
    func workerOutputRelayed() throws {
        let (folder, manifest) = try photoCollection("noisy", [("noisy.jpg", "Sigma-DP1-small.jpg", "N", nil)])
        let result = try runThumbpipe(
            ["run", manifest, "-o", folder + "/out", "-q"], environment: ["THUMBPIPE_FAULT": "noisy:noisy.jpg"])
        #expect(result.status == 0, "the item itself is fine: \(result.stderr.suffix(300))")
        #expect(!result.stderr.contains("\u{1B}"), "no raw escape reaches the terminal")
        #expect(result.stderr.contains("thumbpipe: worker ") && result.stderr.contains("\\x1b]0;owned"))
        #expect(result.stderr.utf8.count < 80 << 10, "bounded: \(result.stderr.utf8.count) bytes")
        #expect(result.stderr.contains("more bytes of its output not shown"))
    }
}
