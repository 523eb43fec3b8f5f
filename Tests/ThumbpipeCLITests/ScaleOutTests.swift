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

        let cases: [([String], Int32, String)] = [
            ([folder + "/a-0"], 65, "shard 1/2 missing"),
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

    @Test(arguments: ["2/2", "-1/3", "a/b", "3"])
    func badShardArgument(shard: String) throws {
        let (folder, manifest) = collection()
        let result = try runThumbpipe(["run", manifest, "--shard", shard, "-o", folder + "/out"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--shard takes K/N"))
    }

    @Test("deploy/kubernetes/job.yaml: an Indexed Job over a shared volume, index → --shard, then a merge")
    func kubernetesJob() throws {
        let path = TestPaths.repository.appendingPathComponent("deploy/kubernetes/job.yaml").path
        let script = """
            import json, sys, yaml
            print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))
            """
        let python = try runProcess("/usr/bin/python3", ["-c", script, path])
        try #require(python.status == 0, "PyYAML could not parse job.yaml: \(python.stderr)")
        let documents = try #require(
            try JSONSerialization.jsonObject(with: Data(python.stdout.utf8)) as? [[String: Any]])
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
        #expect(command.contains("--shard \"${JOB_COMPLETION_INDEX}/\(completions)\""), "\(command)")
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
        let mergeCommand = try #require(try mergePod.objects("containers").first?["command"] as? [String])
        #expect(mergeCommand.prefix(2) == ["thumbpipe", "merge"])
        #expect(mergeCommand.filter { $0.contains("/part-") }.count == completions, "one part per completion")
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
        #expect(text.contains(#"--shard "$SHARD/$SHARDS""#))
    }
}
