import Foundation
import Testing
import ThumbpipeTestSupport

/// One I/O layer: every POSIX file and descriptor call, and every use of
/// Foundation's file API, is made in `Sources/ThumbpipeCore/Support/`
/// (``FileDescriptor``, ``FileSystem``), nowhere else in the product.
@Suite("One I/O layer: no raw POSIX or Foundation file call outside Support/")
struct IOLayerTests {
    /// The POSIX calls on files, folders and descriptors that only Support/ makes.
    static let posixCalls = [
        "open", "openat", "close", "read", "write", "pread", "pwrite", "readv", "writev", "lseek", "fsync",
        "fdatasync", "ftruncate", "truncate", "unlink", "unlinkat", "link", "linkat", "symlink", "rename",
        "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "stat", "lstat", "fstat", "fstatat", "access",
        "realpath", "readlink", "opendir", "fdopendir", "readdir", "closedir", "flock", "fcntl", "dup", "dup2",
        "dup3", "pipe", "pipe2", "socketpair", "poll", "mkfifo", "chmod", "fchmod", "chown", "utimensat",
        "futimens", "getcwd", "fopen", "fdopen", "fclose", "fread", "fwrite", "memfd_create", "sync_file_range",
    ]

    /// Foundation's file API (process plumbing such as `FileHandle.nullDevice` for a `Process` is not file I/O).
    static let foundationCalls = [
        "FileManager", "FileHandle(", "FileHandle.standard", "contentsOfFile:", "Data(contentsOf:",
        "write(toFile:", ".write(to: URL", "contentsOfDirectory(",
    ]

    /// The offending lines of `source` (comments and string literals left out), as `line: text`.
    static func violations(in source: String) -> [String] {
        var found: [String] = []
        for (number, original) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = code(of: String(original))
            let raw = posixCalls.contains { calls(line, $0) }
            let foundation = foundationCalls.contains { line.contains($0) }
            if raw || foundation { found.append("\(number + 1): \(original.trimmingCharacters(in: .whitespaces))") }
        }
        return found
    }

    /// A line without its string literals and its `//` comment.
    static func code(of line: String) -> String {
        var out = ""
        var inString = false
        var escaped = false
        var previous: Character = " "
        for character in line {
            if inString {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inString = false
                    out.append(character)
                }
            } else if character == "\"" {
                inString = true
                out.append(character)
            } else if character == "/" && previous == "/" {
                out.removeLast()
                break
            } else {
                out.append(character)
            }
            previous = character
        }
        return out
    }

    /// Whether `line` calls the C function `name`: `name(` not preceded by a
    /// letter, digit, `_` or `.` (a method of that name), nor by `func `
    /// (its declaration); `Glibc.name(` and `Foundation.name(` are calls.
    static func calls(_ line: String, _ name: String) -> Bool {
        var rest = line[...]
        while let range = rest.range(of: name + "(") {
            let before = line[..<range.lowerBound]
            let qualified = before.hasSuffix("Glibc.") || before.hasSuffix("Foundation.")
            let joined = before.last.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." } ?? false
            if qualified || (!joined && !before.hasSuffix("func ")) { return true }
            rest = line[range.upperBound...]
        }
        return false
    }

    @Test("The scanner finds what it must (so the sweep below can fail)")
    func scannerWorks() {
        #expect(Self.violations(in: "let fd = open(path, O_RDONLY)").count == 1)
        #expect(Self.violations(in: "    close(fd)").count == 1)
        #expect(Self.violations(in: "_ = Glibc.unlink(path)").count == 1)
        #expect(Self.violations(in: "if FileManager.default.fileExists(atPath: p) {}").count == 1)
        #expect(Self.violations(in: "let d = try Data(contentsOf: url)").count == 1)
        #expect(Self.violations(in: "try file.write(bytes)  // write(2) through the layer").isEmpty)
        #expect(Self.violations(in: "func read(at offset: Int) {}").isEmpty)
        #expect(Self.violations(in: #"throw error("cannot open(2) it")"#).isEmpty)
    }

    @Test("No file outside Support/ calls POSIX's file API or Foundation's")
    func sweep() throws {
        let sources = TestPaths.repository.appendingPathComponent("Sources").path
        var checked = 0
        var offenders: [String] = []
        for target in ["ThumbpipeCore", "thumbpipe"] {
            let root = sources + "/" + target
            let files = try FileManager.default.subpathsOfDirectory(atPath: root)
            for file in files.sorted() where file.hasSuffix(".swift") && !file.hasPrefix("Support/") {
                let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
                checked += 1
                offenders += Self.violations(in: text).map { "\(target)/\(file):\($0)" }
            }
        }
        #expect(checked > 60, "the sweep read the sources (\(checked) files)")
        #expect(offenders.isEmpty, "raw file calls outside Support/:\n\(offenders.joined(separator: "\n"))")
    }
}
