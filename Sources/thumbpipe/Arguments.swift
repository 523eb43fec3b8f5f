import ThumbpipeCore

/// A command line split into options and positionals, with sysexits-style errors.
struct Arguments {
    private var remaining: [String]

    init(_ arguments: [String]) { remaining = arguments }

    /// A command's arguments, or nil after printing `help` for `-h`/`--help`.
    /// `-q`/`--quiet` is taken here: the terminal has already read it.
    static func forCommand(_ arguments: [String], help: String) -> Arguments? {
        var args = Arguments(arguments)
        if args.flag("-h", "--help") {
            printOut(help)
            return nil
        }
        _ = args.flag("-q", "--quiet")
        return args
    }

    /// Takes a flag (`-q`, `--force`); true when present.
    mutating func flag(_ names: String...) -> Bool {
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
        var value: String? = nil
        var i = 0
        while i < remaining.count {
            let arg = remaining[i]
            if names.contains(arg) {
                guard i + 1 < remaining.count else {
                    throw ThumbpipeError(.usage, "\(arg) needs a value")
                }
                value = remaining[i + 1]
                remaining.removeSubrange(i...(i + 1))
                continue
            }
            if let name = names.first(where: { arg.hasPrefix($0 + "=") }) {
                value = String(arg.dropFirst(name.count + 1))
                remaining.remove(at: i)
                continue
            }
            i += 1
        }
        return value
    }

    /// Every value of a repeatable option.
    mutating func options(_ name: String) throws -> [String] {
        var values: [String] = []
        var i = 0
        while i < remaining.count {
            let arg = remaining[i]
            if arg == name {
                guard i + 1 < remaining.count else { throw ThumbpipeError(.usage, "\(arg) needs a value") }
                values.append(remaining[i + 1])
                remaining.removeSubrange(i...(i + 1))
            } else if arg.hasPrefix(name + "=") {
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
                throw ThumbpipeError(
                    .usage, "unknown option '\(arg)' for '\(command)' (see 'thumbpipe \(command) --help')")
            }
        }
        remaining = []
        return positionals
    }
}

extension Int {
    init(option value: String, name: String, range: ClosedRange<Int>) throws {
        guard let parsed = Int(value), range.contains(parsed) else {
            throw ThumbpipeError(
                .usage, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'"
            )
        }
        self = parsed
    }
}
