import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Every file a user names for thumbpipe to write (--log, --trace, -o FILE) goes
/// through one policy: never over what the run reads or owns, symlinks followed,
/// FIFOs and devices written through, write errors reported (74).
@Suite("Paths thumbpipe writes: one policy for --log, --trace and -o FILE", .serialized)
struct OutputPathTests {
    /// A manifest over one photo, run once into `out`.
    func collection() throws -> (folder: String, manifest: String, photo: String) {
        let folder = TestPaths.temporaryFolder("paths")
        let photo = folder + "/bike.jpg"
        try FileManager.default.copyItem(atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: photo)
        let manifest = writeFile(folder, "items.jsonl", #"{"itemName": "Bike", "image": "bike.jpg"}"# + "\n")
        let first = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(first.status == 0, "\(first.stderr)")
        return (folder, manifest, photo)
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test("--log and --trace refuse (64) the manifest, a source, the state, the archive, and leave them as they were")
    func refusals() throws {
        let (folder, manifest, photo) = try collection()
        let protected = [
            (manifest, "is the manifest"), (photo, "is a source of the run"),
            (folder + "/out/.thumbpipe/state.sqlite", "one of the output folder's own files"),
            (folder + "/out/items.archive", "one of the output folder's own files"),
        ]
        for option in ["--log", "--trace"] {
            for (path, reason) in protected {
                let before = bytes(path)
                let result = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--force", option, path])
                #expect(result.status == 64, "\(option) \(path): \(result.stderr)")
                #expect(result.stderr.contains(reason), "\(result.stderr)")
                #expect(bytes(path) == before, "\(path) untouched")
            }
        }
        // A store file, and the archive's name in a folder that has no archive yet.
        let store = try FileManager.default.contentsOfDirectory(atPath: folder + "/out").first {
            !$0.hasPrefix(".") && $0 != "items.archive"
        }
        let storeResult = try runThumbpipe([
            "run", manifest, "-o", folder + "/out", "--log", folder + "/out/" + (store ?? "?"),
        ])
        #expect(
            storeResult.status == 64 && storeResult.stderr.contains("output folder's own files"),
            "\(storeResult.stderr)")
        let fresh = try runThumbpipe([
            "run", manifest, "-o", folder + "/fresh", "--log", folder + "/fresh/items.archive",
        ])
        #expect(fresh.status == 64, "\(fresh.stderr)")
        // A hard link to the manifest is the manifest.
        #expect(link(manifest, folder + "/alias.jsonl") == 0)
        let alias = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--log", folder + "/alias.jsonl"])
        #expect(alias.status == 64 && alias.stderr.contains("is the manifest"), "\(alias.stderr)")
        // A hard link to a photo under another name (ln photos/a.jpg logs/nightly.log) is refused too.
        #expect(link(photo, folder + "/nightly.log") == 0)
        let photoBefore = bytes(photo)
        let linked = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--log", folder + "/nightly.log"])
        #expect(linked.status == 64 && linked.stderr.contains("has 2 hard links"), "\(linked.stderr)")
        #expect(bytes(photo) == photoBefore, "the photo is untouched")
        // The state still works: nothing was wedged.
        let again = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--log", folder + "/log.jsonl"])
        #expect(again.status == 0, "\(again.stderr)")
        let plan = try runThumbpipe(["run", manifest, "-o", folder + "/out", "--dry-run"])
        #expect(plan.stdout.contains("plan: 0 new, 0 changed, 1 unchanged, 0 removed"), "\(plan.stdout)")
        // A night with nothing to do still logs its item.
        #expect(try String(contentsOfFile: folder + "/log.jsonl", encoding: .utf8).contains(#""action":"unchanged""#))
    }

    @Test("A symlink is followed: the file it names is written, the link stays")
    func symlinks() throws {
        let (folder, manifest, _) = try collection()
        #expect(symlink("page.html", folder + "/link.html") == 0)
        let report = try runThumbpipe(["report", folder + "/out", "-o", folder + "/link.html"])
        #expect(report.status == 0, "\(report.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: folder + "/link.html") == "page.html")
        #expect(String(decoding: bytes(folder + "/page.html") ?? Data(), as: UTF8.self).hasPrefix("<!DOCTYPE html>"))
        // A link to the manifest is refused like the manifest.
        #expect(symlink(manifest, folder + "/to-manifest") == 0)
        let log = try runThumbpipe(["run", manifest, "-o", folder + "/out", "--log", folder + "/to-manifest"])
        #expect(log.status == 64, "\(log.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: folder + "/to-manifest") == manifest)
    }

    @Test("A FIFO and standard output are written through, never renamed over")
    func streams() throws {
        let (folder, manifest, _) = try collection()
        let fifo = folder + "/fifo"
        #expect(mkfifo(fifo, 0o644) == 0)
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/sh")
        reader.arguments = ["-c", "cat '\(fifo)' > '\(folder)/from-fifo'"]
        try reader.run()
        let report = try runThumbpipe(["report", folder + "/out", "-o", fifo])
        reader.waitUntilExit()
        #expect(report.status == 0, "\(report.stderr)")
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO, "still a FIFO")
        #expect(String(decoding: bytes(folder + "/from-fifo") ?? Data(), as: UTF8.self).hasPrefix("<!DOCTYPE html>"))
        // /dev/stdout: to the descriptor, so the caller's capture receives it.
        let stdout = try runThumbpipe(["report", folder + "/out", "-o", "/dev/stdout"])
        #expect(stdout.status == 0 && stdout.stdout.hasPrefix("<!DOCTYPE html>"), "\(stdout.stderr)")
        let log = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--force", "--log", "-"])
        #expect(log.status == 0 && log.stdout.contains(#""itemName":"Bike""#), "\(log.stderr)")
    }

    @Test("Write errors on standard output and --log exit 74; the run's archive is still whole")
    func writeErrors() throws {
        let (folder, manifest, _) = try collection()
        let archive = bytes(folder + "/out/items.archive")
        let log = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q", "--force", "--log", "/dev/full"])
        #expect(log.status == 74 && log.stderr.contains("--log /dev/full: cannot write"), "\(log.stderr)")
        #expect(bytes(folder + "/out/items.archive") == archive)
        for arguments in [
            ["scan", folder], ["inspect", folder + "/out/items.archive"],
            ["run", manifest, "-o", folder + "/out", "--dry-run"],
            ["pipeline", "show"], ["--version"],
        ] {
            let result = try runProcess(
                "/bin/sh", ["-c", #""$0" "$@" > /dev/full"#, TestPaths.executable] + arguments)
            #expect(result.status == 74, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("cannot write to standard output"), "\(result.stderr)")
        }
    }

    @Test("A manifest without newlines (a binary file, /dev/zero on stdin) is refused at once (65), not buffered whole")
    func unboundedLine() throws {
        let folder = TestPaths.temporaryFolder("zero")
        FileManager.default.createFile(
            atPath: folder + "/binary.jsonl", contents: Data(repeating: 0x41, count: 3 << 20))
        let file = try runThumbpipe(["run", folder + "/binary.jsonl", "-o", folder + "/out"])
        #expect(file.status == 65 && file.stderr.contains("binary.jsonl:1: line longer than 1 MiB"), "\(file.stderr)")
        let stdin = try runProcess(
            "/bin/sh", ["-c", #"exec "$0" run - -o "$1" < /dev/zero"#, TestPaths.executable, folder + "/out2"])
        #expect(stdin.status == 65 && stdin.stderr.contains("stdin:1: line longer than 1 MiB"), "\(stdin.stderr)")
    }

    @Test("Control characters in names and paths are shown escaped on the terminal, never sent raw")
    func controlCharacters() throws {
        let folder = TestPaths.temporaryFolder("control")
        let manifest = writeFile(
            folder, "items.jsonl",
            #"{"itemName": "Clear\u001b[2J", "image": "gone\u001b]0;owned\u0007.jpg", "serialNumber": "\r"}"# + "\n")
        let run = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(run.status == 1)
        #expect(!run.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(run.stderr)")
        #expect(run.stderr.contains(#"gone\u{1B}]0;owned\u{7}.jpg: file not found"#), "\(run.stderr)")
        let inspect = try runThumbpipe(["inspect", folder + "/out/items.archive"])
        #expect(inspect.stdout.contains(#"Clear\u{1B}[2J"#), "\(inspect.stdout)")
        #expect(!inspect.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x0D })
    }

    @Test("scan -o refuses a photo it found (64); -o names a file, not a folder")
    func scanOutput() throws {
        let (folder, _, photo) = try collection()
        let before = bytes(photo)
        let over = try runThumbpipe(["scan", folder, "-o", photo])
        #expect(over.status == 64 && over.stderr.contains("is a photo the scan found"), "\(over.stderr)")
        #expect(bytes(photo) == before)
        let folderTarget = try runThumbpipe(["scan", folder, "-o", folder])
        #expect(folderTarget.status == 64 && folderTarget.stderr.contains("is a folder"), "\(folderTarget.stderr)")
        let fine = try runThumbpipe(["scan", folder, "-o", folder + "/scanned.jsonl"])
        #expect(fine.status == 0, "\(fine.stderr)")
        // An existing manifest may hold edits: refused (73), overwritten only with --force.
        let edited = Data(#"{"itemName": "Red Bike", "image": "bike.jpg"}"#.utf8)
        try edited.write(to: URL(fileURLWithPath: folder + "/scanned.jsonl"))
        let again = try runThumbpipe(["scan", folder, "-o", folder + "/scanned.jsonl"])
        #expect(again.status == 73 && again.stderr.contains("--force overwrites it"), "\(again.stderr)")
        #expect(bytes(folder + "/scanned.jsonl") == edited)
        let forced = try runThumbpipe(["scan", folder, "-o", folder + "/scanned.jsonl", "--force"])
        #expect(forced.status == 0 && bytes(folder + "/scanned.jsonl") != edited, "\(forced.stderr)")
    }
}
