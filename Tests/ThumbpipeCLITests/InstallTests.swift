import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// thumbpipe outside its checkout: the binary alone, pipelines found where the
/// manual says, and a manual and completions that agree with the help.
@Suite("Installed: the binary alone, pipeline lookup, manual and completions", .serialized)
struct InstallTests {
    /// The commands users type, each with its --help.
    static let commands = ["run", "scan", "inspect", "extract", "contact-sheet", "merge", "report", "pipeline"]

    /// A copy of the built binary alone in a fresh folder, with an environment that
    /// names nothing of the repository.
    func loneBinary() throws -> (binary: String, environment: [String: String]) {
        let folder = TestPaths.temporaryFolder("lone")
        let binary = folder + "/bin/thumbpipe"
        try FileManager.default.createDirectory(atPath: folder + "/bin", withIntermediateDirectories: true)
        // Written close-on-exec: a descriptor open for writing that leaks into a
        // child another test forks at that moment makes the exec fail (ETXTBSY).
        let bytes = try Data(contentsOf: URL(fileURLWithPath: TestPaths.executable))
        let file = try FileDescriptor.open(binary, O_WRONLY | O_CREAT | O_EXCL, mode: 0o755)
        try file.write(bytes)
        try file.close()
        let home = folder + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        return (binary, ["PATH": "/usr/bin:/bin", "HOME": home])
    }

    @Test("The binary copied alone runs run DIR -r, scan, inspect, report, merge and contact-sheet from /")
    func binaryAlone() throws {
        let (binary, env) = try loneBinary()
        let work = TestPaths.temporaryFolder("alone-work")
        let photos = work + "/collection/trip"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        for name in ["Canon-EOS-1000D.jpg", "Nikon-D3100.jpg", "Nikon-Coolpix-P7000.webp"] {
            try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/" + name), toPath: photos + "/" + name)
        }
        func run(_ arguments: [String]) throws -> ProcessResult {
            try runProcess(binary, arguments, environment: env, in: "/", inheriting: false)
        }
        let out = work + "/out"
        let first = try run(["run", work + "/collection", "-r", "-o", out, "-q"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try KeyedArchiveReader(path: out + "/items.archive").count == 3)
        let scan = try run(["scan", work + "/collection", "-r", "-o", work + "/items.jsonl"])
        #expect(scan.status == 0, "\(scan.stderr)")
        let fromManifest = try run(["run", work + "/items.jsonl", "-o", work + "/out2", "-q"])
        #expect(fromManifest.status == 0, "\(fromManifest.stderr)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: out + "/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: work + "/out2/items.archive")))
        let inspect = try run(["inspect", out + "/items.archive", "--json"])
        #expect(inspect.status == 0 && inspect.stdout.split(separator: "\n").count == 3, "\(inspect.stderr)")
        let report = try run(["report", out, "-o", work + "/page.html"])
        #expect(report.status == 0 && FileManager.default.fileExists(atPath: work + "/page.html"), "\(report.stderr)")
        let sheet = try run(["contact-sheet", out + "/items.archive", "-o", work + "/sheet.png", "-q"])
        #expect(sheet.status == 0, "\(sheet.stderr)")
        for k in 0..<2 {
            let part = try run([
                "run", work + "/items.jsonl", "--shard", "\(k)/2", "--run-id", "n1", "-o", work + "/p\(k)", "-q",
            ])
            #expect(part.status == 0, "\(part.stderr)")
        }
        let merge = try run(["merge", work + "/p0", work + "/p1", "-o", work + "/merged", "--run-id", "n1"])
        #expect(merge.status == 0, "\(merge.stderr)")
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: work + "/merged/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: work + "/out2/items.archive")))
    }

    @Test(
        "--pipeline NAME: ./pipelines, $THUMBPIPE_PIPELINES, XDG config, PREFIX/share in that order; the error lists the folders tried"
    )
    func lookupOrder() throws {
        let (binary, baseEnv) = try loneBinary()
        let root = URL(fileURLWithPath: binary).deletingLastPathComponent().deletingLastPathComponent().path
        let cwd = root + "/cwd"
        let (cwdFolder, envFolder, xdgFolder, prefixFolder) = (
            cwd + "/pipelines", root + "/env", root + "/xdg/thumbpipe/pipelines", root + "/share/thumbpipe/pipelines"
        )
        // In the order they are searched.
        let order = [("cwd", cwdFolder), ("env", envFolder), ("xdg", xdgFolder), ("prefix", prefixFolder)]
        for (_, folder) in order {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        var env = baseEnv
        env["THUMBPIPE_PIPELINES"] = envFolder
        env["XDG_CONFIG_HOME"] = root + "/xdg"
        func scale(of name: String) throws -> (Double?, String) {
            let result = try runProcess(
                binary, ["pipeline", "show", name], environment: env, in: cwd, inheriting: false)
            let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return ((object?["thumbnail"] as? [String: Any])?["scale"] as? Double, result.stderr)
        }
        // Each folder holds a 'p' of its own scale; removing the first found reveals the next.
        for (i, (_, folder)) in order.enumerated() {
            _ = writeFile(folder, "p.json", #"{"thumbnail": {"scale": \#(i + 1)}}"#)
        }
        for (i, (key, folder)) in order.enumerated() {
            let (found, stderr) = try scale(of: "p")
            #expect(found == Double(i + 1), "expected \(key)'s: \(stderr)")
            #expect(stderr.contains(folder + "/p.json"), "\(stderr)")
            try FileManager.default.removeItem(atPath: folder + "/p.json")
        }
        // None left: the error names every folder tried, in order, and says what is built in.
        let missing = try runProcess(binary, ["pipeline", "show", "p"], environment: env, in: cwd, inheriting: false)
        #expect(missing.status == 66)
        let expected =
            "no p.json in \(cwdFolder), \(envFolder), \(xdgFolder), /etc/thumbpipe/pipelines, \(prefixFolder)"
        #expect(missing.stderr.contains(expected), "\(missing.stderr)")
        #expect(missing.stderr.contains("built in: homepwner"))
        let run = try runProcess(
            binary, ["run", "x.jsonl", "--pipeline", "p"], environment: env, in: cwd, inheriting: false)
        #expect(run.status == 66 && run.stderr.contains(expected), "\(run.stderr)")
        // Without XDG_CONFIG_HOME: ~/.config.
        env["XDG_CONFIG_HOME"] = nil
        let home = try #require(env["HOME"]) + "/.config/thumbpipe/pipelines"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        _ = writeFile(home, "p.json", #"{"thumbnail": {"scale": 7}}"#)
        #expect(try scale(of: "p").0 == 7)
        // homepwner is built in; a homepwner.json in a folder overrides it.
        #expect(try scale(of: "homepwner").0 == 2)
        #expect(try scale(of: "homepwner").1.contains("built in"))
        _ = writeFile(envFolder, "homepwner.json", #"{"thumbnail": {"scale": 3}}"#)
        #expect(try scale(of: "homepwner").0 == 3)
        let list = try runProcess(binary, ["pipeline", "list"], environment: env, in: cwd, inheriting: false)
        #expect(list.stdout.contains("homepwner\t\(envFolder)/homepwner.json\n"), "\(list.stdout)")
        #expect(list.stdout.contains("p\t\(home)/p.json\n"), "\(list.stdout)")
    }

    @Test(
        "pipeline show prints a complete pipeline file: loaded back, it is the same settings and makes the same archive"
    )
    func pipelineShowRoundTrips() throws {
        let folder = TestPaths.temporaryFolder("show")
        let shown = try runThumbpipe(["pipeline", "show"], in: folder)
        #expect(shown.status == 0, "\(shown.stderr)")
        let path = writeFile(folder, "mine.json", shown.stdout)
        #expect(
            try PipelineSettings.load(path: path)
                == {
                    // A copy is named by its file, not the pipeline it was shown from.
                    var s = PipelineSettings(); s.name = "mine"; return s
                }())
        #expect(!shown.stdout.contains("\"name\""), "\(shown.stdout)")
        // As the guide shows it: sections and settings in the documented order, `"key": value`.
        let order = ["\"thumbnail\"", "\"width\"", "\"scale\": 2,", "\"store\"", "\"archive\"", "\"limits\""]
        let positions = order.map { shown.stdout.range(of: $0)?.lowerBound }
        #expect(
            positions.allSatisfy { $0 != nil } && positions.compactMap { $0 } == positions.compactMap { $0 }.sorted(),
            "\(shown.stdout)")
        let again = try runThumbpipe(["pipeline", "show", path], in: folder)
        #expect(again.stdout == shown.stdout)
        let manifest = writeFile(
            folder, "items.jsonl",
            #"{"itemName": "A", "image": "\#(TestPaths.fixture("photos/Nikon-D3100.jpg"))"}"# + "\n")
        let a = try runThumbpipe(["run", manifest, "-o", folder + "/a", "-q"])
        let b = try runThumbpipe(["run", manifest, "-o", folder + "/b", "-q", "--pipeline", path])
        #expect(a.status == 0 && b.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/a/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/b/items.archive")))
        let bad = try runThumbpipe(["pipeline", "shw"])
        #expect(bad.status == 64 && bad.stderr.contains("did you mean 'show'"))
    }

    @Test("--version names the version, the source revision and the libvips it runs with")
    func version() throws {
        let result = try runThumbpipe(["--version"])
        #expect(result.status == 0)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 7)
        #expect(lines.first == "thumbpipe \(RunReport.version)")
        #expect(lines.dropFirst().first?.hasPrefix("revision ") == true)
        #expect(lines[2] == "libvips \(LibVips.version)")
        #expect(lines[3].range(of: #"^libjpeg-turbo 2\.1\.\d+$"#, options: .regularExpression) != nil, "\(lines)")
        #expect(lines[4].range(of: #"^libdeflate \d+\.\d+$"#, options: .regularExpression) != nil, "\(lines)")
        #expect(lines[5].range(of: #"^libavcodec \d+\.\d+\.\d+$"#, options: .regularExpression) != nil, "\(lines)")
        #expect(lines[6].hasPrefix("sandbox "))
    }

    /// The options a command's --help lists under OPTIONS.
    static func helpOptions(_ command: String) throws -> Set<String> {
        let help = try runThumbpipe([command, "--help"])
        #expect(help.status == 0)
        var options = Set<String>()
        var inOptions = false
        for line in help.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line == "OPTIONS:" {
                inOptions = true
                continue
            }
            guard inOptions else { continue }
            if !line.hasPrefix("  ") { break }
            // An option line: two spaces, the names, two or more spaces, the text.
            guard line.hasPrefix("  -") else { continue }
            let names = line.dropFirst(2).components(separatedBy: "  ")[0]
            options.formUnion(
                names.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init).filter { $0.hasPrefix("-") })
        }
        return options
    }

    /// The options the manual's subsection for `command` lists (`.It Fl o , Fl -output Ar DIR`).
    static func manualOptions(_ command: String) throws -> Set<String> {
        let page = try String(
            contentsOf: TestPaths.repository.appendingPathComponent("docs/man/thumbpipe.1"), encoding: .utf8)
        var options = Set<String>()
        var inSection = false
        for line in page.split(separator: "\n").map(String.init) {
            if line.hasPrefix(".Ss ") || line.hasPrefix(".Sh ") {
                inSection = line == ".Ss \(command)"
                continue
            }
            guard inSection, line.hasPrefix(".It Fl ") else { continue }
            let words = line.split(separator: " ").map(String.init)
            for (i, word) in words.enumerated() where word == "Fl" && i + 1 < words.count {
                options.insert("-" + words[i + 1])
            }
        }
        return options
    }

    @Test(
        "run's options in the manual and the bash, zsh and fish completions are generated from the option table",
        arguments: [
            "docs/man/thumbpipe.1", "completions/thumbpipe.bash", "completions/_thumbpipe",
            "completions/thumbpipe.fish",
        ]
    )
    func generatedFromTheTable(file: String) throws {
        let text = try String(contentsOf: TestPaths.repository.appendingPathComponent(file), encoding: .utf8)
        #expect(text.contains("BEGIN generated run options: "), "\(file) keeps a generated region")
        #expect(RunOptionDocs.spliced(text) == text, "\(file) differs from the option table: run 'make docs'")
        // Every option of the table is in the generated text, by its long name.
        for option in RunOptionDescription.all {
            #expect(text.contains(String(option.names.last!.dropFirst(2))), "\(option.names) in \(file)")
        }
    }

    @Test("The manual lists exactly the options of every command's --help", arguments: commands)
    func manualMatchesHelp(command: String) throws {
        let help = try Self.helpOptions(command)
        #expect(help.contains("--help"), "the help of \(command) has an OPTIONS section")
        let manual = try Self.manualOptions(command)
        #expect(
            manual == help,
            "only in the manual: \(manual.subtracting(help).sorted()); only in --help: \(help.subtracting(manual).sorted())"
        )
    }

    @Test("Every option --help lists is one the command takes", arguments: commands)
    func helpListsRealOptions(command: String) throws {
        for option in try Self.helpOptions(command) where option != "-h" && option != "--help" {
            let result = try runThumbpipe([command, option, "1"])
            #expect(!result.stderr.contains("unknown option '\(option)"), "\(command) \(option): \(result.stderr)")
        }
    }

    @Test("The manual covers every exit status and environment variable the program uses")
    func manualSections() throws {
        let page = try String(
            contentsOf: TestPaths.repository.appendingPathComponent("docs/man/thumbpipe.1"), encoding: .utf8)
        for status in ["0", "1", "64", "65", "66", "70", "71", "73", "74", "130 , 143"] {
            #expect(page.contains("\n.It \(status)\n"), "exit status \(status)")
        }
        for variable in ["THUMBPIPE_PIPELINES", "XDG_CONFIG_HOME", "HOME", "NO_COLOR", "TERM", "COLUMNS"] {
            #expect(page.contains(".It Ev \(variable)\n"), "\(variable)")
        }
        for command in Self.commands { #expect(page.contains(".Ss \(command)\n"), "\(command)") }
        let man = try runProcess(
            "/usr/bin/man",
            ["--warnings", "-l", TestPaths.repository.appendingPathComponent("docs/man/thumbpipe.1").path],
            environment: ["MANPAGER": "cat", "MANWIDTH": "80"])
        #expect(man.status == 0 && man.stderr.isEmpty, "\(man.stderr)")
    }

    /// bash: the completion function's answer for a command line ending in `words`.
    static func bashComplete(_ words: [String]) throws -> [String] {
        let script = TestPaths.repository.appendingPathComponent("completions/thumbpipe.bash").path
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let result = try runProcess(
            "/bin/bash",
            [
                "-c",
                "source '\(script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _thumbpipe; printf '%s\\n' \"${COMPREPLY[@]}\"",
            ],
            environment: [
                "PATH": URL(fileURLWithPath: TestPaths.executable).deletingLastPathComponent().path + ":/usr/bin:/bin"
            ],
            in: TestPaths.temporaryFolder("bash"))
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test("bash completion: commands, every command's options exactly as its --help lists them, option values")
    func bashCompletion() throws {
        #expect(try Self.bashComplete(["thumbpipe", "r"]) == ["run", "report"])
        #expect(try Set(Self.bashComplete(["thumbpipe", ""])).isSuperset(of: Self.commands))
        for command in Self.commands {
            let offered = try Set(Self.bashComplete(["thumbpipe", command, "-"]))
            let help = try Self.helpOptions(command)
            #expect(
                offered == help,
                "\(command): only completed: \(offered.subtracting(help).sorted()); only in --help: \(help.subtracting(offered).sorted())"
            )
        }
        #expect(
            try Self.bashComplete(["thumbpipe", "run", "--fail-on", ""])
                == PipelineSettings.FailOn.allCases.map(\.rawValue))
        #expect(try Self.bashComplete(["thumbpipe", "run", "--formats", "jpeg,h"]) == ["jpeg,heif"])
        #expect(
            try Set(Self.bashComplete(["thumbpipe", "run", "--formats", ""]))
                == Set(ImageFormat.allCases.map(\.rawValue)))
        #expect(try Self.bashComplete(["thumbpipe", "pipeline", ""]) == ["show", "list"])
        #expect(try Self.bashComplete(["thumbpipe", "run", "--pipeline", "home"]) == ["homepwner"])
    }

    @Test("fish completion: commands, options and values, asked of fish itself")
    func fishCompletion() throws {
        let script = TestPaths.repository.appendingPathComponent("completions/thumbpipe.fish").path
        func complete(_ line: String) throws -> [String] {
            let result = try runProcess(
                "/usr/bin/fish", ["--no-config", "-c", "source '\(script)'; complete -C '\(line)'"],
                environment: [
                    "PATH": URL(fileURLWithPath: TestPaths.executable).deletingLastPathComponent().path
                        + ":/usr/bin:/bin"
                ])
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }
        }
        #expect(try complete("thumbpipe r") == ["report", "run"])
        #expect(try complete("thumbpipe run --fail-on ") == ["error", "none", "truncated", "warning"])
        #expect(try complete("thumbpipe run --formats jpeg,he") == ["jpeg,heif"])
        for command in Self.commands {
            let long = try Self.helpOptions(command).filter { $0.hasPrefix("--") }
            let offered = try Set(complete("thumbpipe \(command) --"))
            #expect(
                offered == long,
                "\(command): only completed: \(offered.subtracting(long).sorted()); only in --help: \(long.subtracting(offered).sorted())"
            )
        }
    }

    @Test("zsh completion: valid zsh, and it names every command and option of every --help")
    func zshCompletion() throws {
        let path = TestPaths.repository.appendingPathComponent("completions/_thumbpipe").path
        #expect(try runProcess("/usr/bin/zsh", ["-n", path]).status == 0)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var sections: [String: String] = [:]
        var current = ""
        for line in text.split(separator: "\n").map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasSuffix(")"), let name = Self.commands.first(where: { trimmed == "\($0))" }) {
                current = name
            }
            sections[current, default: ""] += line + "\n"
        }
        for command in Self.commands {
            #expect(text.contains("\(command)\\:\""), "\(command) is offered as a command")
            for option in try Self.helpOptions(command) where !["-q", "--quiet", "-h", "--help"].contains(option) {
                let section = sections[command] ?? ""
                #expect(
                    section.contains("\(option)[") || section.contains("{\(option),")
                        || section.contains(",\(option)}"),
                    "\(command) \(option)")
            }
        }
    }
}
