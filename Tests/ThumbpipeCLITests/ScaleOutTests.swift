import Foundation
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

@Suite("Scale-out: shards and merge", .serialized)
struct ScaleOutTests {
    /// A manifest of real photos and items without images, and its folder.
    func collection() -> (folder: String, manifest: String) {
        let folder = TestPaths.temporaryFolder("shards")
        let sources = [
            "photos/Nikon-D3100.jpg", "edge/webp-alpha_5_webp_a.webp", "photos/Canon-EOS-1000D.jpg",
            "edge/png-palette-trns_paletted-transparent.png", "edge/orientation-3_Landscape_3.jpg",
            "edge/tiny-1x1-rgb_1x1.png", "bad/truncated-png_truncated.png", "edge/gif-animated_animated-loop-3.gif",
        ]
        var lines = sources.enumerated().map { i, s in
            #"{"itemName": "Item \#(i)", "valueInDollars": \#(i), "image": "\#(TestPaths.fixture(s))"}"#
        }
        lines += (0..<4).map { #"{"itemName": "Card \#($0)"}"# }
        return (folder, writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n"))
    }

    func startShard(_ manifest: String, _ shard: String, _ out: String, extra: [String] = []) throws -> Process {
        try startThumbpipe(["run", manifest, "--shard", shard, "-o", out, "-q", "--jobs", "1"] + extra)
    }

    func storeFiles(_ folder: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder)
        where !name.hasPrefix(".") && name != "items.archive" {
            result[name] = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
        }
        return result
    }

    @Test("4 shards in parallel, merged, equal one run: archive byte for byte, same store files")
    func fourShardsEqualOneRun() throws {
        let (folder, manifest) = collection()
        let single = try runThumbpipe(["run", manifest, "-o", folder + "/single", "-q"])
        #expect(single.status == 1, "one source is truncated on purpose")
        let shards = try (0..<4).map { try startShard(manifest, "\($0)/4", folder + "/part-\($0)") }
        // Exactly the shard holding the truncated source exits 1, with that one failure.
        var failedShards: [Int] = []
        for (k, shard) in shards.enumerated() {
            shard.waitUntilExit()
            let failures = try readJSONObject(folder + "/part-\(k)/.thumbpipe/report.json").objects("failures")
            #expect(shard.terminationStatus == (failures.isEmpty ? 0 : 1), "shard \(k)")
            #expect(failures.allSatisfy { ($0["source"] as? String)?.hasSuffix("truncated-png_truncated.png") == true })
            if !failures.isEmpty { failedShards.append(k) }
        }
        #expect(failedShards.count == 1, "one shard holds the truncated source: \(failedShards)")
        let counts = try (0..<4).map { try KeyedArchiveReader(path: folder + "/part-\($0)/items.archive").count }
        #expect(counts.reduce(0, +) == 12)
        #expect(counts.filter { $0 > 0 }.count >= 2, "items spread over shards: \(counts)")
        let merge = try runThumbpipe(["merge"] + (0..<4).map { folder + "/part-\($0)" } + ["-o", folder + "/merged"])
        #expect(merge.status == 1, "one part had a failure: \(merge.stderr)")
        #expect(merge.stderr.contains("12 items"))
        let a = try Data(contentsOf: URL(fileURLWithPath: folder + "/single/items.archive"))
        let b = try Data(contentsOf: URL(fileURLWithPath: folder + "/merged/items.archive"))
        #expect(a == b)
        #expect(try storeFiles(folder + "/single") == storeFiles(folder + "/merged"))
        let report = try readJSONObject(folder + "/merged/.thumbpipe/report.json")
        #expect(try report.counts("counts")["items"] == 12)
        #expect(try report.objects("failures").count == 1)
        // A shard re-run on its own, unchanged, decodes nothing.
        let again = try runThumbpipe(["run", manifest, "--shard", "1/4", "-o", folder + "/part-1", "-q"])
        #expect(again.status == (failedShards == [1] ? 1 : 0), "\(again.stderr)")
        let partReport = try readJSONObject(folder + "/part-1/.thumbpipe/report.json")
        #expect(try partReport.counts("incremental")["decoded"] == 0)
    }

    @Test(
        "merge binds each part's shard.json to its archive and store files: swapped descriptions, a symlinked or replaced store file are refused; a FIFO archive never blocks"
    )
    func partsBoundToTheirFiles() throws {
        let (folder, manifest) = collection()
        func parts(_ name: String) throws -> [String] {
            let paths = (0..<2).map { folder + "/\(name)/part-\($0)" }
            for (k, path) in paths.enumerated() {
                let result = try runThumbpipe(["run", manifest, "--shard", "\(k)/2", "-o", path, "-q", "--jobs", "1"])
                #expect(result.status <= 1, "\(result.stderr)")
            }
            return paths
        }
        // shard.json swapped between the parts: each now names the other's positions.
        let swapped = try parts("swapped")
        let a = swapped[0] + "/.thumbpipe/shard.json"
        let b = swapped[1] + "/.thumbpipe/shard.json"
        let (da, db) = (try Data(contentsOf: URL(fileURLWithPath: a)), try Data(contentsOf: URL(fileURLWithPath: b)))
        try db.write(to: URL(fileURLWithPath: a))
        try da.write(to: URL(fileURLWithPath: b))
        let merged = try runThumbpipe(["merge"] + swapped + ["-o", folder + "/swapped-out"])
        #expect(merged.status == 65, "\(merged.stderr)")
        #expect(merged.stderr.contains("is not the archive its shard.json describes"), "\(merged.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/swapped-out/items.archive"))
        // A store file that is a symlink, and one replaced by another photo.
        let good = try parts("stores")
        let store = try #require(try storeFiles(good[0]).keys.sorted().first)
        let victim = writeFile(folder, "secret.txt", "not a photo")
        try FileManager.default.removeItem(atPath: good[0] + "/" + store)
        try FileManager.default.createSymbolicLink(atPath: good[0] + "/" + store, withDestinationPath: victim)
        let linked = try runThumbpipe(["merge"] + good + ["-o", folder + "/linked-out"])
        #expect(linked.status == 65 && linked.stderr.contains("not a regular file"), "\(linked.stderr)")
        try FileManager.default.removeItem(atPath: good[0] + "/" + store)
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Sigma-DP1-small.jpg"), toPath: good[0] + "/" + store)
        let replaced = try runThumbpipe(["merge"] + good + ["-o", folder + "/replaced-out"])
        #expect(
            replaced.status == 65 && replaced.stderr.contains("not the one its part's run wrote"), "\(replaced.stderr)")
        // A FIFO where an archive should be: refused at once, never waited on.
        let fifo = folder + "/fifo.archive"
        #expect(mkfifo(fifo, 0o644) == 0)
        let started = Date()
        let inspect = try runThumbpipe(["inspect", fifo])
        #expect(inspect.status != 0 && inspect.stderr.contains("not a regular file"), "\(inspect.stderr)")
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test("merge refuses bad sets of parts and writes nothing")
    func refusals() throws {
        let (folder, manifest) = collection()
        for k in 0..<2 {
            let p = try startShard(manifest, "\(k)/2", folder + "/a-\(k)")
            p.waitUntilExit()
        }
        // Same manifest, other settings.
        let other = try startShard(manifest, "1/2", folder + "/radius-1", extra: ["--corner-radius", "8"])
        other.waitUntilExit()
        // Another manifest.
        let otherManifest = writeFile(folder, "other.jsonl", #"{"itemName": "Solo"}"# + "\n")
        let foreign = try startShard(otherManifest, "1/2", folder + "/foreign-1")
        foreign.waitUntilExit()
        // Another shard count.
        let three = try startShard(manifest, "1/3", folder + "/three-1")
        three.waitUntilExit()

        // A part whose report.json was edited: a count no run writes.
        try FileManager.default.copyItem(atPath: folder + "/a-1", toPath: folder + "/a-1-report")
        let reportPath = folder + "/a-1-report/.thumbpipe/report.json"
        let edited = try String(contentsOfFile: reportPath, encoding: .utf8)
            .replacingOccurrences(of: #""items" : "#, with: #""items" : -"#)
        try edited.write(toFile: reportPath, atomically: true, encoding: .utf8)

        let cases: [([String], Int32, String)] = [
            ([folder + "/a-0"], 65, "shard 1/2 missing"),
            ([folder + "/a-0", folder + "/a-1-report"], 65, "counts.items is -"),
            ([folder + "/a-0", folder + "/a-1", folder + "/a-1"], 64, "given twice"),
            ([folder + "/a-0", folder + "/radius-1"], 65, "different pipeline settings"),
            ([folder + "/a-0", folder + "/foreign-1"], 65, "different manifest"),
            ([folder + "/a-0", folder + "/three-1"], 65, "not one of 2"),
            ([folder + "/a-0", folder], 66, "not a shard's output"),
        ]
        for (parts, status, text) in cases {
            let out = folder + "/merged-\(UUID().uuidString)"
            let result = try runThumbpipe(["merge"] + parts + ["-o", out])
            #expect(result.status == status, "\(parts): \(result.stderr)")
            #expect(result.stderr.contains(text), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "nothing written")
        }
        // A shard given twice under two folders (a copy of a part).
        try FileManager.default.copyItem(atPath: folder + "/a-1", toPath: folder + "/a-1-copy")
        let twice = try runThumbpipe([
            "merge", folder + "/a-0", folder + "/a-1", folder + "/a-1-copy", "-o", folder + "/m",
        ])
        #expect(twice.status == 64 && twice.stderr.contains("shard 1/2 is given twice"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/m"))
    }

    @Test(
        "merge --run-id takes only this run's parts: a part from an earlier night or one still running is refused (65), --wait waits for it"
    )
    func runIdentity() throws {
        let (folder, manifest) = collection()
        let parts = (0..<2).map { folder + "/part-\($0)" }
        for k in 0..<2 {
            let p = try startShard(manifest, "\(k)/2", parts[k], extra: ["--run-id", "night-1"])
            p.waitUntilExit()
        }
        let first = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out", "--run-id", "night-1"])
        #expect(first.status == 1, "one source is truncated on purpose: \(first.stderr)")
        // Night 2: shard 0 has run, shard 1 not yet. Its part is last night's.
        let zero = try startShard(manifest, "0/2", parts[0], extra: ["--run-id", "night-2"])
        zero.waitUntilExit()
        let archiveBefore = try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))
        let early = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out", "--run-id", "night-2"])
        #expect(early.status == 65, "\(early.stderr)")
        #expect(
            early.stderr.contains("\(parts[1]) is shard 1/2 of run 'night-1', not of run 'night-2'"), "\(early.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive")) == archiveBefore)
        // A part whose run still holds its lock is refused, naming it.
        let fd = open(parts[0] + "/.thumbpipe", O_RDONLY | O_DIRECTORY)
        #expect(flock(fd, LOCK_EX) == 0)
        let running = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out"])
        #expect(running.status == 65, "\(running.stderr)")
        #expect(running.stderr.contains("\(parts[0]) is still being written"), "\(running.stderr)")
        let gaveUp = try runThumbpipe(["merge"] + parts + ["-o", folder + "/out", "--wait", "1"])
        #expect(gaveUp.status == 65 && gaveUp.stderr.contains("gave up after waiting 1 s"), "\(gaveUp.stderr)")
        close(fd)
        // --wait: the merge waits while shard 1 runs, then merges this night's parts.
        let waiting = try startThumbpipe(
            ["merge"] + parts + ["-o", folder + "/out", "--run-id", "night-2", "--wait", "120"])
        let one = try startShard(manifest, "1/2", parts[1], extra: ["--run-id", "night-2"])
        one.waitUntilExit()
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 1, "merged, with the truncated source's failure")
        let single = try runThumbpipe(["run", manifest, "-o", folder + "/single", "-q"])
        #expect(single.status == 1)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/single/items.archive")))
        // --run-id names a part: it goes with --shard.
        let alone = try runThumbpipe(["run", manifest, "--run-id", "x", "-o", folder + "/alone"])
        #expect(alone.status == 64 && alone.stderr.contains("--run-id goes with --shard"))
        let bad = try runThumbpipe(["merge"] + parts + ["-o", folder + "/o2", "--run-id", "a b"])
        #expect(bad.status == 64)
    }

    @Test(
        "merge refuses a crafted shard.json (65) and writes nothing",
        arguments: [
            (#""archiveFileName":"items.archive""#, #""archiveFileName":"../escaped.archive""#, "archiveFileName"),
            (#""shards":2"#, #""shards":-2"#, "shards -2"),
            (#""shards":2"#, #""shards":1000000000000"#, "shards 1000000000000"),
            (#""shards":2"#, #""shards":0"#, "shards 0"),
            (#""version":1"#, #""version":99"#, "version 99"),
            (#""manifestItems":12"#, #""manifestItems":-1"#, "manifestItems -1"),
        ])
    func craftedShardDescription(original: String, crafted: String, reason: String) throws {
        let (folder, manifest) = collection()
        for k in 0..<2 {
            let p = try startShard(manifest, "\(k)/2", folder + "/part-\(k)")
            p.waitUntilExit()
        }
        let path = folder + "/part-1/.thumbpipe/shard.json"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try #require(text.contains(original), "\(text)")
        try text.replacingOccurrences(of: original, with: crafted).write(
            toFile: path, atomically: true, encoding: .utf8)
        let result = try runThumbpipe(["merge", folder + "/part-0", folder + "/part-1", "-o", folder + "/out/sub"])
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("not a valid shard description: \(reason)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/out"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/escaped.archive"))
    }

    @Test(arguments: ["2/2", "-1/3", "a/b", "3"])
    func badShardArgument(shard: String) throws {
        let (folder, manifest) = collection()
        let result = try runThumbpipe(["run", manifest, "--shard", shard, "-o", folder + "/out"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--shard takes K/N"))
    }

    /// The documents of a YAML file of the repository, parsed by Debian's PyYAML.
    static func yamlDocuments(_ relative: String) throws -> [[String: Any]] {
        let path = TestPaths.repository.appendingPathComponent(relative).path
        let script = """
            import json, sys, yaml
            print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))
            """
        let python = try runProcess("/usr/bin/python3", ["-c", script, path])
        try #require(python.status == 0, "PyYAML could not parse \(relative): \(python.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(python.stdout.utf8)) as? [[String: Any]])
    }

    @Test("deploy/kubernetes/job.yaml: an Indexed Job over a shared volume, index → --shard, then a merge")
    func kubernetesJob() throws {
        let documents = try Self.yamlDocuments("deploy/kubernetes/job.yaml")
        let jobs = documents.filter { $0["kind"] as? String == "Job" }
        #expect(jobs.count == 2)
        let shards = try #require(
            jobs.first { (($0["metadata"] as? [String: Any])?["name"] as? String) == "thumbpipe-shards" })
        let spec = try shards.object("spec")
        #expect(spec["completionMode"] as? String == "Indexed")
        let completions = try #require(spec["completions"] as? Int)
        let pod = try spec.object("template").object("spec")
        let container = try #require(try pod.objects("containers").first)
        let command = ((container["command"] as? [String] ?? []) + (container["args"] as? [String] ?? [])).joined(
            separator: " ")
        #expect(command.contains("--shard $(JOB_COMPLETION_INDEX)/\(completions)"), "\(command)")
        #expect(command.contains("--run-id $(RUN_ID)"), "\(command)")
        let env = try container.objects("env")
        let index = env.first { $0["name"] as? String == "JOB_COMPLETION_INDEX" }
        let fieldPath =
            ((index?["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any])?["fieldPath"] as? String
        #expect(fieldPath?.contains("job-completion-index") == true)
        let volumes = try pod.objects("volumes")
        let claim = (volumes.first?["persistentVolumeClaim"] as? [String: Any])?["claimName"] as? String
        #expect(claim != nil)
        #expect(
            try container.objects("volumeMounts").contains {
                $0["name"] as? String == volumes.first?["name"] as? String
            })
        let merge = try #require(
            jobs.first { (($0["metadata"] as? [String: Any])?["name"] as? String) == "thumbpipe-merge" })
        let mergePod = try merge.object("spec").object("template").object("spec")
        let mergeContainer = try #require(try mergePod.objects("containers").first)
        let mergeCommand = try #require(mergeContainer["args"] as? [String])
        #expect(mergeCommand.first == "merge")
        #expect(mergeCommand.filter { $0.contains("/part-") }.count == completions, "one part per completion")
        // The merge takes this run's parts only, and waits for them: never last night's.
        #expect(mergeCommand.joined(separator: " ").contains("--run-id $(RUN_ID) --wait"), "\(mergeCommand)")
        func runIdLabel(_ job: [String: Any]) throws -> String? {
            (try job.object("spec").object("template").object("metadata")["labels"] as? [String: Any])?["run-id"]
                as? String
        }
        #expect(try runIdLabel(shards) != nil && runIdLabel(shards) == runIdLabel(merge), "one run-id for both Jobs")
        for job in [container, mergeContainer] {
            let runId = try job.objects("env").first { $0["name"] as? String == "RUN_ID" }
            let path =
                ((runId?["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any])?["fieldPath"] as? String
            #expect(path == "metadata.labels['run-id']")
        }
        // The image is the one 'make image' tags.
        let makefile = try String(
            contentsOf: TestPaths.repository.appendingPathComponent("Makefile"), encoding: .utf8)
        let image = try #require(container["image"] as? String)
        #expect(makefile.contains("IMAGE_NAME = \(image.split(separator: ":")[0])"), "\(image)")
        #expect(mergeContainer["image"] as? String == image)
        let mergeClaim =
            (try mergePod.objects("volumes").first?["persistentVolumeClaim"] as? [String: Any])?["claimName"]
            as? String
        #expect(mergeClaim == claim, "the merge sees the same volume")
    }

    @Test("deploy/slurm/thumbpipe.sbatch passes bash -n and maps SLURM_ARRAY_TASK_ID to --shard")
    func slurmScript() throws {
        let path = TestPaths.repository.appendingPathComponent("deploy/slurm/thumbpipe.sbatch").path
        #expect(try runProcess("/bin/bash", ["-n", path]).status == 0)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("#SBATCH --array=0-"))
        #expect(text.contains("SHARD=${SLURM_ARRAY_TASK_ID"))
        #expect(text.contains(#"--shard "$SHARD/$SHARDS" --run-id "$RUN_ID""#))
        #expect(text.contains("RUN_ID=${SLURM_ARRAY_JOB_ID"))
        #expect(!text.contains("thumbpipe merge \""), "no task merges: the dependent job does")
    }

    @Test("deploy/kubernetes/cronjob.yaml: each night's Job name is the run-id; pod 0 merges that run's parts")
    func kubernetesCronJob() throws {
        let documents = try Self.yamlDocuments("deploy/kubernetes/cronjob.yaml")
        let cron = try #require(documents.first { $0["kind"] as? String == "CronJob" })
        #expect(try cron.object("spec")["concurrencyPolicy"] as? String == "Forbid")
        let job = try cron.object("spec").object("jobTemplate").object("spec")
        let completions = try #require(job["completions"] as? Int)
        #expect(job["parallelism"] as? Int == completions, "pod 0 waits for the others: all must run at once")
        let container = try #require(try job.object("template").object("spec").objects("containers").first)
        let script2 = (container["args"] as? [String] ?? []).joined(separator: " ")
        #expect(script2.contains(#"--shard "$JOB_COMPLETION_INDEX/\#(completions)" --run-id "$RUN_ID""#))
        #expect(script2.contains(#"--run-id "$RUN_ID" --wait"#))
        #expect(script2.components(separatedBy: "/part-").count - 1 == completions + 1, "its own part, then all")
        let runId = try container.objects("env").first { $0["name"] as? String == "RUN_ID" }
        let fieldPath =
            ((runId?["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any])?["fieldPath"] as? String
        #expect(fieldPath == "metadata.labels['batch.kubernetes.io/job-name']")
    }
}
