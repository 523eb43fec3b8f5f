import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// Nothing a run reads back is reused without proof, and a damaged or lost
/// state has a way back that keeps the output folder.
extension Collection {
    /// Item 4's value 4 → 40 in the manifest: a metadata edit, so the next night
    /// rewrites the archive from the other items' records.
    func editValueOfItem4() throws {
        let edited = try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: #""valueInDollars": 4,"#, with: #""valueInDollars": 40,"#)
        try edited.write(toFile: manifest, atomically: true, encoding: .utf8)
    }
}

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

    @Test(
        "A thumbnail in the state that is not the one thumbpipe made (cut short, a bit flipped, another size, gone) is made again, never archived"
    )
    func damagedRecordedThumbnails() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        do {
            let state = try RunState(output: OutputFolder(out))
            func damage(_ key: String, _ change: (Data) throws -> Data?) throws {
                let record = try #require(try state.record(forKey: key))
                let png = try #require(try state.thumbnail(forKey: key))
                try state.save(record, thumbnail: try change(png))
            }
            try damage("k0") { $0.dropLast() }
            try damage("k1") { png in
                var bytes = png
                bytes[bytes.count / 2] ^= 0x10
                return bytes
            }
            try damage("k2") { _ in
                try PNGEncode().apply(RGBABuffer(width: 40, height: 40, pixels: [UInt8](repeating: 200, count: 6400)))
            }
            try damage("k3") { _ in nil }
            try state.commit()
        }
        // A night that rewrites the archive (item 4's value edited) reuses the other thumbnails from the state.
        try c.editValueOfItem4()
        let night = try c.run("out", ["--log", c.folder + "/night.jsonl"])
        #expect(night.status == 0, "\(night.stderr)")
        let counts = c.incremental(night.report)
        #expect(counts["changed"] == 4 && counts["metadata"] == 1 && counts["unchanged"] == 1, "\(counts)")
        #expect(counts["decoded"] == 4, "only the four damaged items are decoded: \(counts)")
        let changedBy = (night.report["incremental"] as? [String: Any])?["changedBy"] as? [String: Int]
        #expect(changedBy == ["output": 4])
        let log = try String(contentsOfFile: c.folder + "/night.jsonl", encoding: .utf8)
        #expect(log.components(separatedBy: "the state's thumbnail missing or damaged").count - 1 == 4, "\(log)")
        #expect(try c.run("fresh").status == 0)
        #expect(try c.archive("out") == c.archive("fresh"), "the archive holds the thumbnails a fresh run makes")
        let state = try RunState(output: OutputFolder(out), readOnly: true)
        for key in ["k0", "k1", "k2", "k3"] {
            let png = try #require(try state.thumbnail(forKey: key), "\(key): recorded again")
            #expect(PNGInfo.thumbnailProblem(png, width: 80, height: 80) == nil, "\(key): recorded again")
        }
    }

    @Test("A state holding a date no run records (1e308 s): refused with the way out, then --rebuild-state finishes")
    func stateDateOutOfRange() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        do {
            let state = try RunState(output: OutputFolder(out))
            var record = try #require(try state.record(forKey: "k0"))
            let png = try state.thumbnail(forKey: "k0")
            record.dateCreated = 1e308
            try state.save(record, thumbnail: png)
            try state.commit()
        }
        // An edited value makes the night read the other items' records.
        try c.editValueOfItem4()
        let refused = try runThumbpipe(["run", c.manifest, "-o", out, "-q"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("item 'k0': date_created 1e+308 is not a date"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--rebuild-state"), "\(refused.stderr)")
        let rebuilt = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--rebuild-state"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        #expect(try c.run("fresh").status == 0)
        #expect(try c.archive("out") == c.archive("fresh"))
    }

    @Test(
        "A photo whose file time is past 2262 (ext4 holds 2446): its item is dated at the end of what fits, the run goes on"
    )
    func fileTimePast2262() throws {
        let folder = TestPaths.temporaryFolder("far-time")
        let photo = folder + "/far.png"
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("edge/png-palette-trns_paletted-transparent.png"), toPath: photo)
        var times = [timespec(tv_sec: 15_032_385_535, tv_nsec: 0), timespec(tv_sec: 15_032_385_535, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, photo, &times, 0) == 0)
        var info = stat()
        #expect(stat(photo, &info) == 0)
        let result = try runThumbpipe(["run", folder, "-o", folder + "/out", "-q"])
        #expect(result.status == 0, "\(result.stderr)")
        let item = try KeyedArchiveReader(path: folder + "/out/items.archive").validItem(at: 0)
        // Where the file system cannot hold 2446 it keeps its own latest time, which the item takes.
        let expected =
            info.st_mtim.tv_sec > 9_223_372_036
            ? "2262-04-11T23:47:16" : ISO8601Format.string(Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec)))
        #expect(ISO8601Format.string(item.dateCreated).hasPrefix(expected.prefix(19)), "\(info.st_mtim.tv_sec)")
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

/// Settings that cannot work are refused before anything is written.
@Suite("Settings refused at start")
struct StartupRefusalTests {
    @Test("limits.workerMemoryBytes below what a worker maps before any image: one line, exit 64, nothing written")
    func workerMemoryTooSmall() throws {
        let c = try Collection()
        let out = c.folder + "/small"
        let small = try runThumbpipe(["run", c.manifest, "-o", out, "-q", "--set", "limits.workerMemoryBytes=67108864"])
        #expect(small.status == 64, "\(small.stderr)")
        let lines = small.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("set at least"), "\(small.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        // What it names is enough: every photo of the collection is done under it.
        let minimum = try #require(
            small.stderr.components(separatedBy: "set at least ").last?.split(separator: " ").first)
        let enough = try runThumbpipe([
            "run", c.manifest, "-o", out, "-q", "--set", "limits.workerMemoryBytes=\(minimum)",
        ])
        #expect(enough.status == 0, "\(enough.stderr)")
    }
}

/// The machine's failures are not the photo's.
@Suite("Environment errors are not a source's failure")
struct EnvironmentFailureTests {
    @Test(
        "libvips cannot write its temporary (a file-size limit): the item fails, is not recorded, and is done next run")
    func environmentErrorIsRetried() throws {
        let (folder, manifest) = try photoCollection(
            "environment", [("w.webp", "Nikon-Coolpix-P7000.webp", "W", "kw"), ("a.jpg", "Nikon-D3100.jpg", "A", "ka")])
        let out = folder + "/out"
        // libvips spills every decode to a temporary; past 4 MB a write fails with EFBIG.
        let limited = try runProcess(
            "/bin/sh",
            [
                "-c", "ulimit -f 4096; exec \"$0\" run \"$1\" -o \"$2\" -q --jobs 1", TestPaths.executable, manifest,
                out,
            ],
            environment: ["VIPS_DISC_THRESHOLD": "1k"])
        #expect(limited.status == 1, "\(limited.stderr)")
        #expect(
            limited.stderr.contains("w.webp: the system refused while decoding WebP (file too large)"),
            "\(limited.stderr)")
        let next = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(next.status == 0, "tried again, not replayed: \(next.stderr)")
        #expect(try KeyedArchiveReader(path: out + "/items.archive").validItem(at: 0).thumbnailData != nil)
    }
}

/// The smaller leftovers of the hardening round, each as it was reproduced.
@Suite("Smaller hardening leftovers", .serialized)
struct SmallerHardeningTests {
    @Test("--dry-run writes nothing in the output folder: no -wal or -shm beside the state")
    func dryRunWritesNothing() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        let before = try FileManager.default.contentsOfDirectory(atPath: out + "/.thumbpipe").sorted()
        let plan = try runThumbpipe(["run", c.manifest, "-o", out, "--dry-run"])
        #expect(plan.status == 0 && plan.stdout.contains("6 unchanged"), "\(plan.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out + "/.thumbpipe").sorted() == before)
    }

    @Test("Another process holding the state's write lock for 2 s: the run waits for it (was 73 at once)")
    func externalLockWaits() throws {
        let c = try Collection()
        let out = c.folder + "/out"
        #expect(try c.run("out").status == 0)
        var touched = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, c.folder + "/p1.jpg", &touched, 0) == 0)
        let hold = """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            c.execute("UPDATE meta SET value = value")
            open(sys.argv[2], "w").close()
            time.sleep(2)
            c.execute("COMMIT")
            """
        let script = """
            /usr/bin/python3 -c "$1" "$2" "$3" &
            while [ ! -e "$3" ]; do sleep 0.05; done
            "$4" run "$5" -o "$6" -q; status=$?
            wait
            exit $status
            """
        let run = try runProcess(
            "/bin/sh",
            [
                "-c", script, "sh", hold, out + "/.thumbpipe/state.sqlite", c.folder + "/locked", TestPaths.executable,
                c.manifest, out,
            ])
        #expect(run.status == 0, "\(run.stderr)")
    }

    @Test("A UTF-8 byte-order mark opens a .jsonl manifest, not its first record")
    func byteOrderMark() throws {
        let folder = TestPaths.temporaryFolder("bom")
        let manifest = folder + "/items.jsonl"
        try Data([0xEF, 0xBB, 0xBF] + Array(#"{"itemName": "Bike", "itemKey": "k"}"#.utf8) + [0x0A]).write(
            to: URL(fileURLWithPath: manifest))
        let run = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try KeyedArchiveReader(path: folder + "/out/items.archive").validItem(at: 0).itemName == "Bike")
    }

    @Test("A field named twice in one record is refused (65, line and field), known or not")
    func duplicateFields() throws {
        let folder = TestPaths.temporaryFolder("dupfield")
        for (name, line) in [
            ("known", #"{"itemName": "A", "itemName": "B"}"#), ("unknown", #"{"itemName": "A", "x": 1, "x": 2}"#),
            ("escaped", #"{"itemName": "A\u0041", "itemName": null}"#),
        ] {
            let manifest = writeFile(folder, name + ".jsonl", line + "\n")
            let run = try runThumbpipe(["run", manifest, "-o", folder + "/out-" + name, "-q"])
            #expect(run.status == 65 && run.stderr.contains("\(name).jsonl:1:"), "\(run.stderr)")
            #expect(run.stderr.contains("appears twice"), "\(run.stderr)")
        }
    }

    @Test("extract writes a key too long for a file name with .png under a shortened, unique name")
    func extractLongKeys() throws {
        let folder = TestPaths.temporaryFolder("longkey")
        let keys = [String(repeating: "k", count: 253), String(repeating: "k", count: 252), "short"]
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/a.jpg")
        let lines = keys.map { #"{"itemName": "A", "image": "a.jpg", "itemKey": "\#($0)"}"# }
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        #expect(try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"]).status == 0)
        let extract = try runThumbpipe(["extract", folder + "/out/items.archive", folder + "/png"])
        #expect(extract.status == 0, "\(extract.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder + "/png")
        #expect(names.count == 3 && names.contains("short.png"), "\(names)")
        #expect(names.allSatisfy { $0.utf8.count <= 255 })
        #expect(extract.stderr.components(separatedBy: "key too long for a file name").count == 3, "\(extract.stderr)")
    }
}

/// contact-sheet stays within its stated memory, whatever the thumbnails' size.
@Suite("Contact sheet memory")
struct ContactSheetMemoryTests {
    @Test(
        "Legal 4096-px thumbnails: sheets of at most 64 Mpx, peak memory under 600 MB (4 of them took 0.7 GB, 20 took 2.8)"
    )
    func largeThumbnails() throws {
        let folder = TestPaths.temporaryFolder("bigsheet")
        // A flat 4096×4096 RGBA PNG (a few KB), written by Python's zlib.
        let script = """
            import struct, sys, zlib
            w = h = 4096
            row = b"\\x00" + bytes([200, 120, 40, 255]) * w
            def chunk(kind, data):
                return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
            png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            png += chunk(b"IDAT", zlib.compress(row * h, 9)) + chunk(b"IEND", b"")
            open(sys.argv[1], "wb").write(png)
            """
        #expect(try runProcess("/usr/bin/python3", ["-c", script, folder + "/big.png"]).status == 0)
        let png = try Data(contentsOf: URL(fileURLWithPath: folder + "/big.png"))
        let writer = try KeyedArchiveWriter(path: folder + "/items.archive", className: "BNRItem", itemCount: 4)
        for i in 0..<4 {
            try writer.append(
                ArchivedItem(
                    itemName: "Big \(i)", serialNumber: "", valueInDollars: 0,
                    dateCreated: Date(timeIntervalSince1970: 0),
                    itemKey: "k\(i)", thumbnailData: png))
        }
        try writer.finish()
        // The child's own peak, measured by its parent (Python's getrusage of its children).
        let measure = """
            import resource, subprocess, sys
            status = subprocess.run(sys.argv[1:]).returncode
            print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        let run = try runProcess(
            "/usr/bin/python3",
            [
                "-c", measure, TestPaths.executable, "contact-sheet", folder + "/items.archive", "-o",
                folder + "/sheet.png", "-q",
            ])
        let fields = run.stdout.split(separator: " ").compactMap {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(fields.count == 2 && fields[0] == 0, "\(run.stdout) \(run.stderr)")
        let peakKB = try #require(fields.last)
        #expect(peakKB < 600 * 1024, "peak RSS \(peakKB / 1024) MB")
        let sheets = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("sheet") }
        #expect(sheets.count == 2, "3 of 4116×4150 px cells a sheet: \(sheets.sorted())")
    }
}
