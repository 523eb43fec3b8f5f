import ThumbpipeCore

/// A command line split into options and positionals, with sysexits-style errors.
struct Arguments {
    private var remaining: [String]
    /// Every option name the command asked about, for "did you mean".
    private var known: Set<String> = ["--help", "--quiet"]

    init(_ arguments: [String]) { remaining = arguments }

    /// A command's arguments, or nil after printing `help` for `-h`/`--help`.
    /// `-q`/`--quiet` is taken here: the terminal has already read it.
    static func forCommand(_ arguments: [String], help: String) throws -> Arguments? {
        var args = Arguments(arguments)
        if args.flag("-h", "--help") {
            try printOut(help)
            return nil
        }
        _ = args.flag("-q", "--quiet")
        return args
    }

    /// Takes a flag (`-q`, `--force`); true when present.
    mutating func flag(_ names: String...) -> Bool { flag(names) }

    /// Takes a flag under any of `names`; true when present.
    mutating func flag(_ names: [String]) -> Bool {
        known.formUnion(names)
        var found = false
        remaining.removeAll { arg in
            if names.contains(arg) {
                found = true
                return true
            }
            return false
        }
        return found
    }

    /// Takes an option with a value (`--jobs 4` or `--jobs=4`); the last one wins.
    mutating func option(_ names: String...) throws -> String? {
        try values(names).last
    }

    /// Every value of a repeatable option.
    mutating func options(_ name: String) throws -> [String] {
        try values([name])
    }

    /// Takes every occurrence of an option under any of `names`, in order.
    mutating func values(_ names: [String]) throws -> [String] {
        known.formUnion(names)
        var values: [String] = []
        var i = 0
        while i < remaining.count {
            let arg = remaining[i]
            if names.contains(arg) {
                guard i + 1 < remaining.count else { throw ThumbpipeError(.usage, "\(arg) needs a value") }
                try Self.refuseFlagAsValue(arg, remaining[i + 1])
                values.append(remaining[i + 1])
                remaining.removeSubrange(i...(i + 1))
            } else if let name = names.first(where: { arg.hasPrefix($0 + "=") }) {
                values.append(String(arg.dropFirst(name.count + 1)))
                remaining.remove(at: i)
            } else {
                i += 1
            }
        }
        return values
    }

    /// Checks nothing unknown is left and returns the positionals.
    mutating func finish(command: String) throws -> [String] {
        var positionals: [String] = []
        var afterDashes = false
        for arg in remaining {
            if afterDashes || !arg.hasPrefix("-") || arg == "-" {
                positionals.append(arg)
            } else if arg == "--" {
                afterDashes = true
            } else {
                let name = String(arg.prefix { $0 != "=" })
                let hint = Suggestion.closest(to: name, in: known).map { "; did you mean '\($0)'?" } ?? ""
                throw ThumbpipeError(
                    .usage, "unknown option '\(arg)' for '\(command)'\(hint) (see 'thumbpipe \(command) --help')")
            }
        }
        remaining = []
        return positionals
    }
}

extension Arguments {
    /// `--jobs --quiet` means a forgotten value, not a job count of "--quiet".
    static func refuseFlagAsValue(_ option: String, _ value: String) throws {
        let looksLikeFlag =
            value.hasPrefix("--")
            || (value.count > 1 && value.hasPrefix("-") && value.dropFirst().first?.isLetter == true)
        if looksLikeFlag {
            throw ThumbpipeError(.usage, "\(option) needs a value, but '\(value)' follows it")
        }
    }
}

/// "Did you mean": the known name closest to a mistyped one.
enum Suggestion {
    /// The candidate within a small edit distance of `word`, if any.
    static func closest(to word: String, in candidates: some Sequence<String>) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= max(2, word.count / 3) }
        return scored.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }?.0
    }

    /// Levenshtein distance, with a transposition counted as one edit.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a)
        let y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { table[i][0] = i }
        for j in 0...y.count { table[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                table[i][j] = Swift.min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    table[i][j] = Swift.min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[x.count][y.count]
    }
}
