import Foundation

/// What the manual and the shell completions say of one option.
public struct OptionDocumentation: Sendable {
    /// What a shell offers for the option's value.
    public enum Values: Sendable, Equatable {
        /// A flag: no value.
        case none
        /// Free text, named for zsh's prompt (`count`, `K/N`).
        case free(String)
        /// A file name, or a folder name.
        case file, folder
        /// One of these words.
        case choices([String])
        /// A pipeline's name (asked of `thumbpipe pipeline list`) or a file.
        case pipelines
        /// A comma-separated list of format names.
        case formats
    }

    /// The completions' one-line description.
    public let summary: String
    /// What is offered for its value.
    public let values: Values
    /// The manual's paragraph (mdoc) under the option's `.It` line.
    public let manual: String

    public init(_ summary: String, _ values: Values, _ manual: String) {
        self.summary = summary
        self.values = values
        self.manual = manual
    }
}

/// The manual's option list of `run` and its bash, zsh and fish completions,
/// generated from the option table (``RunOptionDescription/all``) and the
/// setting flags (``PipelineSettings/descriptions``), in `--help`'s order.
/// The files keep them between `BEGIN generated run options: KIND` and
/// `END generated run options` lines: `make docs` rewrites them
/// (`thumbpipe __docs FILE…`), and a test fails when they differ.
public enum RunOptionDocs {
    /// One documented option.
    public struct Entry: Sendable {
        public var names: [String]
        public var value: String?
        public var repeatable: Bool
        public var docs: OptionDocumentation
    }

    /// Every option of `run`, in `--help`'s order: the table, the setting flags before `--set`, quiet and help.
    public static var entries: [Entry] {
        let table = RunOptionDescription.all.map {
            Entry(names: $0.names, value: $0.value, repeatable: $0.repeatable, docs: $0.docs)
        }
        let settings = PipelineSettings.descriptions.compactMap { d -> Entry? in
            guard let flag = d.flag, let docs = d.docs else { return nil }
            return Entry(names: [flag], value: d.flagValue, repeatable: false, docs: docs)
        }
        let split = table.firstIndex { $0.names == ["--set"] } ?? table.count
        let common = [
            Entry(
                names: ["-q", "--quiet"], value: nil, repeatable: false,
                docs: OptionDocumentation("less on standard error", .none, "No progress bar.")),
            Entry(
                names: ["-h", "--help"], value: nil, repeatable: false,
                docs: OptionDocumentation("print help", .none, "Print the command's help.")),
        ]
        return Array(table[..<split]) + settings + table[split...] + common
    }

    /// The kinds of generated text, as the markers name them.
    public enum Kind: String, CaseIterable, Sendable { case man, bash, zsh, fish }

    /// The generated lines of `kind`.
    public static func text(_ kind: Kind) -> [String] {
        switch kind {
        case .man: return manual()
        case .bash: return bash()
        case .zsh: return zsh()
        case .fish: return fish()
        }
    }

    static func manual() -> [String] {
        var lines = [".Bl -tag -width Ds"]
        for entry in entries {
            let names = entry.names.map { "Fl " + $0.dropFirst() }.joined(separator: " , ")
            let value = entry.value.map { " Ar " + $0.replacingOccurrences(of: "|", with: " | ") } ?? ""
            lines.append(".It " + names + value)
            lines += entry.docs.manual.split(separator: "\n").map(String.init)
        }
        return lines + [".El"]
    }

    static func bash() -> [String] {
        ["            opts=\"" + entries.flatMap(\.names).joined(separator: " ") + "\""]
    }

    static func zsh() -> [String] {
        var lines = ["            local -a run_options=("]
        // -q and -h are in $common.
        for entry in entries.dropLast(2) {
            let docs = entry.docs
            var head =
                entry.names.count > 1
                ? "'(\(entry.names.joined(separator: " ")))'{\(entry.names.joined(separator: ","))}'"
                : "'\(entry.repeatable ? "*" : "")\(entry.names[0])"
            // A quote in a summary would end zsh's single-quoted word: written as '\''.
            head += "[\(docs.summary.replacingOccurrences(of: "'", with: "'\\''"))]"
            let spec: String
            switch docs.values {
            case .none: spec = ""
            case .free(let name): spec = ":\(name):"
            case .file: spec = ":file:_files"
            case .folder: spec = ":folder:_files -/"
            case .choices(let words):
                spec = ":\(entry.value?.lowercased() ?? "value"):(\(words.joined(separator: " ")))"
            case .pipelines: spec = ":pipeline:_thumbpipe_pipelines"
            case .formats: spec = ":formats:_sequence compadd - $formats"
            }
            if docs.values == .formats {
                // Double-quoted, so $formats is expanded.
                lines.append("                \"" + head.dropFirst() + spec + "\"")
            } else {
                lines.append("                " + head + spec + "'")
            }
        }
        return lines + ["            )"]
    }

    static func fish() -> [String] {
        // -q and -h are completed for every command.
        entries.dropLast(2).map { entry in
            var words = ["complete -c thumbpipe -n $run"]
            for name in entry.names {
                words.append(name.hasPrefix("--") ? "-l " + name.dropFirst(2) : "-s " + name.dropFirst())
            }
            switch entry.docs.values {
            case .none: break
            case .free: words.append("-x")
            case .file, .folder: words.append("-r -F")
            case .choices(let choices): words.append("-x -a '\(choices.joined(separator: " "))'")
            case .pipelines: words.append("-r -a '(thumbpipe pipeline list -q 2>/dev/null | cut -f1)'")
            case .formats: words.append("-x -a \"(__thumbpipe_formats $formats)\"")
            }
            words.append("-d '" + entry.docs.summary.replacingOccurrences(of: "'", with: "\\'") + "'")
            return words.joined(separator: " ")
        }
    }

    /// `text` with every generated region rewritten: the lines between a line
    /// holding `BEGIN generated run options: KIND` and one holding
    /// `END generated run options` become ``text(_:)`` of that kind.
    public static func spliced(_ text: String) -> String {
        var out: [String] = []
        var skipping = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if skipping {
                guard line.contains("END generated run options") else { continue }
                skipping = false
                out.append(line)
                continue
            }
            out.append(line)
            if let range = line.range(of: "BEGIN generated run options: ") {
                let word = line[range.upperBound...].prefix { $0.isLetter }
                if let kind = Kind(rawValue: String(word)) {
                    out += Self.text(kind)
                    skipping = true
                }
            }
        }
        return out.joined(separator: "\n")
    }
}
