import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A PNG whose header declares `width × height` pixels, with almost no data behind it.
func declaredPNG(width: UInt32, height: UInt32) -> Data {
    func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
    func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be(UInt32(data.count)) + body + be(crc32(body))
    }
    var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    png += chunk("IHDR", be(width) + be(height) + [8, 2, 0, 0, 0])
    png += chunk("IDAT", [0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])
    png += chunk("IEND", [])
    return Data(png)
}

func listing(_ folder: String) -> Set<String> {
    Set((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
}

@Suite("Bad input, crashes and full disks", .serialized)
struct RobustnessTests {
    @Test("Every bad corpus file, missing files and directories fail alone; good photos complete")
    func badSourcesMixedWithGood() throws {
        let folder = TestPaths.temporaryFolder("bad")
        try FileManager.default.createDirectory(atPath: folder + "/a-directory.jpg", withIntermediateDirectories: true)
        writeFile(folder, "plain", "x")
        var lines: [String] = []
        var bad: Set<String> = []
        let good = ["photos/Nikon-D3100.jpg", "edge/webp-alpha_5_webp_a.webp", "photos/Canon-EOS-1000D.jpg"]
        for (i, relative) in TestPaths.fixtureFiles("bad").enumerated() {
            lines.append(
                #"{"itemName": "bad \#(i)", "serialNumber": "B\#(i)", "valueInDollars": \#(i), "image": "\#(TestPaths.fixture(relative))", "itemKey": "bad-\#(i)"}"#
            )
            bad.insert("bad-\(i)")
        }
        for (i, relative) in good.enumerated() {
            lines.append(
                #"{"itemName": "good \#(i)", "image": "\#(TestPaths.fixture(relative))", "itemKey": "good-\#(i)"}"#)
        }
        for (key, image) in [
            ("missing", "nope.jpg"), ("directory", "a-directory.jpg"), ("not-a-folder", "plain/x.jpg"),
        ] {
            lines.append(#"{"itemName": "\#(key)", "image": "\#(image)", "itemKey": "\#(key)"}"#)
            bad.insert(key)
        }
        let manifest = writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n")
        let result = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(result.status == 1)
        let failureLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("items.jsonl:") }
        #expect(failureLines.count == bad.count, "\(result.stderr)")
        #expect(failureLines.contains { $0.contains("nope.jpg: file not found") })
        #expect(
            failureLines.contains {
                $0.contains("truncated-jpeg_truncated.jpg: truncated JPEG")
                    || $0.contains("truncated-jpeg_truncated.jpg: cannot decode JPEG")
            })
        #expect(failureLines.contains { $0.contains("over limits.maxPixels") })

        let reader = try KeyedArchiveReader(path: folder + "/out/items.archive")
        #expect(reader.count == lines.count)
        for index in 0..<reader.count {
            let item = try reader.item(at: index)
            let failed = bad.contains(item.itemKey)
            #expect((item.thumbnailData == nil) == failed, "\(item.itemKey)")
            #expect(FileManager.default.fileExists(atPath: folder + "/out/" + item.itemKey) == !failed)
            if item.itemKey.hasPrefix("bad-") {
                let i = try #require(Int(item.itemKey.dropFirst(4)))
                #expect(item.itemName == "bad \(i)" && item.serialNumber == "B\(i)" && item.valueInDollars == Int32(i))
            }
        }
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        let failures = try report.objects("failures")
        #expect(Set(failures.compactMap { $0["itemKey"] as? String }) == bad)
        #expect(failures.allSatisfy { ($0["stage"] as? String) != nil && ($0["line"] as? Int ?? 0) > 0 })
    }

    @Test("A decompression bomb (declared 100,000 × 100,000) fails at once, in little memory")
    func decompressionBomb() throws {
        let folder = TestPaths.temporaryFolder("bomb")
        try declaredPNG(width: 100_000, height: 100_000).write(to: URL(fileURLWithPath: folder + "/bomb.png"))
        let manifest = writeFile(folder, "items.jsonl", #"{"itemName": "bomb", "image": "bomb.png"}"# + "\n")
        let result = try runThumbpipe(["run", manifest, "-o", folder + "/out", "-q"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("100000×100000, over limits.maxPixels"))
        // Measured inside the run, where process start-up and a loaded machine do not count:
        // the refusal takes only a header read.
        let report = try readJSONObject(folder + "/out/.thumbpipe/report.json")
        let header = try report.object("stages").object("header")
        let milliseconds = try #require(header["maxMs"] as? Double)
        #expect(milliseconds < 1000, "header read and refusal took \(milliseconds) ms")
        // The run's sampled peak adds the parent's and a worker's resident memory
        // (89–92 MB here, libvips and its modules mapped in both, more on a loaded
        // machine): far from the 30 GB the bomb declares.
        #expect(try #require(report["peakRSSBytes"] as? Int) < 150_000_000)
    }

    @Test("limits.maxFileBytes and limits.timeoutSeconds fail the item the same way")
    func otherLimits() throws {
        let folder = TestPaths.temporaryFolder("limits")
        let photo = TestPaths.fixture("photos/Nikon-D3100.jpg")
        let manifest = writeFile(folder, "items.jsonl", #"{"itemName": "big", "image": "\#(photo)"}"# + "\n")
        let size = try runThumbpipe(["run", manifest, "-o", folder + "/a", "-q", "--set", "limits.maxFileBytes=1000"])
        #expect(size.status == 1)
        #expect(size.stderr.contains("over limits.maxFileBytes (1000)"))
        let slow = try runThumbpipe([
            "run", manifest, "-o", folder + "/b", "-q", "--set", "limits.timeoutSeconds=0.001",
        ])
        #expect(slow.status == 1)
        #expect(slow.stderr.contains("timed out after 0.001 s (limits.timeoutSeconds)"), "\(slow.stderr)")
    }

    @Test(
        "Bad manifests exit 65 with file, line and reason, and touch nothing",
        arguments: [
            ("items.jsonl", "{\"itemName\": \"A\"}\n{\"itemName\": \"B\"", "items.jsonl:2: invalid JSON"),
            ("items.jsonl", "{\"itemName\": [1]}", "items.jsonl:1: itemName must be a string"),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"valueInDollars\": 99999999999}",
                "items.jsonl:1: valueInDollars 99999999999 is out of range"
            ),
            ("items.csv", "itemName,image\nA,a.jpg\nB,b.jpg,extra\n", "items.csv:3: row has 3 fields"),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"k\"}\n{\"itemName\": \"B\", \"itemKey\": \"k\"}",
                "items.jsonl:2: itemKey 'k' is used twice, on lines 1 and 2"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"../x\"}",
                "items.jsonl:1: itemKey '../x' is not a safe file name"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"/etc/passwd\"}",
                "items.jsonl:1: itemKey '/etc/passwd' is not a safe"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"a/b\"}",
                "items.jsonl:1: itemKey 'a/b' is not a safe"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"a\\u0000b\"}",
                "items.jsonl:1: itemKey 'a\\0b' is not a safe"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \".hidden\"}",
                "items.jsonl:1: itemKey '.hidden' is not a safe"
            ),
            (
                "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"\(String(repeating: "k", count: 256))\"}",
                "items.jsonl:1: itemKey 'kkkk"
            ),
        ])
    func badManifest(name: String, text: String, expected: String) throws {
        let folder = TestPaths.temporaryFolder("manifest")
        let manifest = writeFile(folder, name, text)
        let out = folder + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        writeFile(out, "keep.txt", "mine")
        let result = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(listing(out) == ["keep.txt"])
    }

    @Test("Invalid UTF-8 in a manifest exits 65 with its line")
    func invalidUTF8() throws {
        let folder = TestPaths.temporaryFolder("utf8")
        var bytes = Array("itemName,image\nA,a.jpg\nB".utf8)
        bytes += [0xFF, 0xFE]
        bytes += Array(",b.jpg\n".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: folder + "/items.csv"))
        let result = try runThumbpipe(["run", folder + "/items.csv", "-o", folder + "/out", "-q"])
        #expect(result.status == 65)
        #expect(result.stderr.contains("items.csv:3: invalid UTF-8"))
    }

    @Test("A symlink at a store name is neither followed nor replaced; other files are left alone")
    func outputFolderHygiene() throws {
        let folder = TestPaths.temporaryFolder("links")
        let victim = writeFile(folder, "victim.txt", "do not touch")
        let out = folder + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: out + "/photo", withDestinationPath: victim)
        writeFile(out, "notes.txt", "mine")
        let photo = TestPaths.fixture("edge/orientation-1_Landscape_1.jpg")
        let manifest = writeFile(
            folder, "items.jsonl", #"{"itemName": "P", "image": "\#(photo)", "itemKey": "photo"}"# + "\n")
        let result = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("exists and thumbpipe did not write it"), "\(result.stderr)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "do not touch")
        let attributes = try FileManager.default.attributesOfItem(atPath: out + "/photo")
        #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
        #expect(try String(contentsOfFile: out + "/notes.txt", encoding: .utf8) == "mine")
    }

    @Test("A full disk (ulimit -f) exits 74 with the path and reason, and leaves no partial file")
    func writeFailure() throws {
        let folder = TestPaths.temporaryFolder("full")
        let photo = TestPaths.fixture("photos/Nikon-D3100.jpg")
        let manifest = writeFile(
            folder, "items.jsonl", #"{"itemName": "P", "image": "\#(photo)", "itemKey": "photo"}"# + "\n")
        let out = folder + "/out"
        // 256 KiB per file: the store JPEG of a 14 Mpx photo is larger.
        let result = try runProcess(
            "/bin/sh",
            ["-c", "ulimit -f 256; exec \"$0\" run \"$1\" -o \"$2\" -q", TestPaths.executable, manifest, out])
        #expect(result.status == 74, "\(result.stderr)")
        #expect(result.stderr.contains("write failed") && result.stderr.contains(out), "\(result.stderr)")
        #expect(!listing(out).contains("photo"))
        #expect(!listing(out).contains("items.archive"))
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
    }
}

@Suite("Interruptions", .serialized)
struct InterruptionTests {
    static let photos = [
        "photos/Nikon-D3100.jpg", "photos/Canon-EOS-1000D.jpg", "edge/webp-alpha_5_webp_a.webp",
        "photos/Sigma-DP1-small.jpg", "edge/png-palette-trns_paletted-transparent.png", "photos/Oppo-R7-Plus-small.jpg",
        "photos/Leica-T-Typ-701-small.jpg", "edge/orientation-5_Landscape_5.jpg",
    ]

    func manifest(_ folder: String) -> String {
        let lines = Self.photos.enumerated().map { i, p in
            #"{"itemName": "Item \#(i)", "image": "\#(TestPaths.fixture(p))", "itemKey": "item-\#(i)"}"#
        }
        return writeFile(
            folder, "items.jsonl",
            (lines + [#"{"itemName": "No photo", "itemKey": "none"}"#]).joined(separator: "\n") + "\n")
    }

    /// Waits until `count` names that were not there before have appeared in `out`
    /// or `out/.thumbpipe` (store files, temporaries, the state, the archive; with
    /// `storeOnly`, only in `out` itself: a store file or its temporary), or
    /// the process has ended; returns how many appeared. Polls every millisecond,
    /// so the moment is set by the run's own progress, not by the machine's speed.
    @discardableResult
    func waitForNewNames(
        _ count: Int, in out: String, while process: Process, storeOnly: Bool = false, timeout: Double = 60
    ) -> Int {
        func names() -> Set<String> {
            let top = listing(out).filter { !storeOnly || $0 != ".thumbpipe" }
            return storeOnly ? top : top.union(listing(out + "/.thumbpipe").map { ".thumbpipe/" + $0 })
        }
        let before = names()
        var seen: Set<String> = []
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && seen.count < count && Date() < deadline {
            let now = names()
            seen.formUnion(now.subtracting(before))
            usleep(1_000)
        }
        return seen.count
    }

    /// Every file under a final name is whole: store files decode fully, the archive is valid.
    func checkNothingPartial(_ out: String) throws {
        for name in listing(out) where !name.hasPrefix(".") {
            if name == "items.archive" {
                _ = try KeyedArchiveReader(path: out + "/" + name).items()
            } else {
                _ = try DecodedTestImage.load(out + "/" + name, failOn: 1)
            }
        }
    }

    func contents(_ out: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in listing(out) where !name.hasPrefix(".") {
            result[name] = try Data(contentsOf: URL(fileURLWithPath: out + "/" + name))
        }
        return result
    }

    @Test(
        "SIGKILL at 16 moments set by the run's progress: nothing partial, no stale temporaries, the re-run equals an uninterrupted run"
    )
    func killedRuns() throws {
        let folder = TestPaths.temporaryFolder("kill")
        let manifest = manifest(folder)
        let reference = folder + "/reference"
        let clean = try runThumbpipe(["run", manifest, "-o", reference, "-q", "--jobs", "2"])
        #expect(clean.status == 0, "\(clean.stderr)")
        let out = folder + "/out"
        var landed = 0
        for round in 0..<16 {
            // Killed after the 1st, 2nd, 3rd or 4th new file of this attempt: a temporary
            // being written, a store file just renamed, the state or the archive.
            let process = try startThumbpipe(["run", manifest, "-o", out, "-q", "--jobs", "2"])
            waitForNewNames(1 + round % 4, in: out, while: process)
            if process.isRunning { landed += 1 }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try checkNothingPartial(out)
            // Every fourth attempt starts over from an empty folder, so that later kills still land mid-run.
            if round % 4 == 3 && round < 15 { try FileManager.default.removeItem(atPath: out) }
        }
        #expect(landed >= 8, "kills landed mid-run: \(landed) of 16")
        let rerun = try runThumbpipe(["run", manifest, "-o", out, "-q", "--jobs", "2"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
        #expect(!listing(out + "/.thumbpipe").contains { $0.hasPrefix(TemporaryFile.prefix) })
        #expect(try contents(out) == contents(reference))
    }

    @Test(
        "SIGINT and SIGTERM stop cleanly with 130 and 143",
        arguments: [(Int32(2), Int32(130)), (Int32(15), Int32(143))])
    func signals(signal: Int32, status: Int32) throws {
        let folder = TestPaths.temporaryFolder("signal")
        let manifest = manifest(folder)
        let out = folder + "/out"
        let process = try startThumbpipe(["run", manifest, "-o", out, "-q", "--jobs", "1"])
        // Once the first store file or temporary appears the handlers are in place,
        // and the last item is still far away.
        let appeared = waitForNewNames(1, in: out, while: process, storeOnly: true)
        try #require(process.isRunning && appeared >= 1, "the run ended before it could be interrupted")
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        #expect(process.terminationStatus == status)
        #expect(!listing(out).contains("items.archive"))
        #expect(!listing(out).contains { $0.hasPrefix(TemporaryFile.prefix) })
        try checkNothingPartial(out)
        let rerun = try runThumbpipe(["run", manifest, "-o", out, "-q"])
        #expect(rerun.status == 0)
        #expect(listing(out).contains("items.archive"))
    }
}
