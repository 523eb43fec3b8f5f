import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Nothing a run reads back is reused without proof, and a damaged or lost
/// state has a way back that keeps the output folder.
@Suite("Trust: the archive and the state read back", .serialized)
struct TrustTests {
    func archive(_ folder: String) -> Data? { FileManager.default.contents(atPath: folder + "/items.archive") }

    @Test("A damaged state says how to get out; --rebuild-state adopts the outputs and makes every item again")
    func damagedState() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        #expect(try c.run("fresh").status == 0)
        let statePath = out + "/.thumbpipe/state.sqlite"
        try Data("this is not a database, it was a full disk\n".utf8).write(to: URL(fileURLWithPath: statePath))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: statePath + suffix) }
        let refused = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(refused.status == 65 && refused.stderr.contains("run again with --rebuild-state"), "\(refused.stderr)")
        let rebuilt = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--rebuild-state"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        #expect(
            rebuilt.stderr.contains("state rebuilt: 6 items from the archive, 5 store files adopted"),
            "\(rebuilt.stderr)")
        let incremental = try readJSONObject(out + "/.thumbpipe/report.json").object("incremental")
        #expect(incremental["changed"] as? Int == 5 && incremental["decoded"] as? Int == 5, "\(incremental)")
        #expect(FileManager.default.fileExists(atPath: statePath + ".damaged"), "the damaged state is kept aside")
        #expect(archive(out) == archive(c.folder + "/fresh"))
        let next = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(next.status == 0)
        #expect(try readJSONObject(out + "/.thumbpipe/report.json").object("incremental")["unchanged"] as? Int == 6)
    }

    @Test("A lost state: refused with the way out (again on a second try), then --rebuild-state; store files alone too")
    func lostState() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        try FileManager.default.removeItem(atPath: out + "/.thumbpipe")
        for _ in 0..<2 {
            let refused = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
            #expect(
                refused.status == 73 && refused.stderr.contains("--rebuild-state"),
                "a refused run leaves no state that changes the next answer: \(refused.stderr)")
        }
        // The archive is lost as well: only the store files are left.
        try FileManager.default.removeItem(atPath: out + "/items.archive")
        let storeOnly = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--force"])
        #expect(storeOnly.status == 65 && storeOnly.stderr.contains("--rebuild-state"), "\(storeOnly.stderr)")
        let rebuilt = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--rebuild-state"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        #expect(
            rebuilt.stderr.contains("0 items from the archive (there is none), 5 store files adopted"),
            "\(rebuilt.stderr)")
        #expect(try KeyedArchiveReader(path: out + "/items.archive").count == 6)
    }

    @Test("An archive edited in place, its size and time kept, is written anew by the next run, changed or not")
    func editedArchive() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        #expect(try c.run("fresh").status == 0)
        let path = out + "/items.archive"
        let fresh = try #require(archive(c.folder + "/fresh"))
        for night in 0..<2 {
            var info = stat()
            #expect(stat(path, &info) == 0)
            var bytes = try #require(archive(out))
            let name = try #require(bytes.firstRange(of: Data("Item 3".utf8)))
            bytes[name.lowerBound] = UInt8(ascii: "J")
            try bytes.write(to: URL(fileURLWithPath: path))
            var times = [info.st_atim, info.st_mtim]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            // Night 0 has nothing to do; night 1 a touched photo (dated by its EXIF) as well.
            if night == 1 {
                var touched = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
                #expect(utimensat(AT_FDCWD, c.folder + "/p1.jpg", &touched, 0) == 0)
            }
            #expect(try c.run("out").status == 0)
            #expect(archive(out) == fresh, "night \(night): the edit is gone")
        }
    }
}
