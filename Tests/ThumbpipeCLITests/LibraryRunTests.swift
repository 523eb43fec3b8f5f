import Foundation
import Synchronization
import Testing
import ThumbpipeCore
import ThumbpipeTestSupport

/// A library user runs, dry-runs and shards without the command line: the
/// same outputs, byte for byte, as `thumbpipe run`.
@Suite("The library's Run")
struct LibraryRunTests {
    static func request(_ manifest: String, _ output: String) throws -> RunRequest {
        let settings = try PipelineCatalog(folders: []).resolve(PipelineCatalog.defaultName).settings
        var request = RunRequest(input: manifest, output: OutputFolder(output), settings: settings, jobs: 2)
        request.workerExecutable = TestPaths.executable
        return request
    }

    @Test("Run.prepare → plan → execute: the dry run writes nothing, the run the CLI's bytes, the log every item")
    func runAndDryRun() throws {
        let (folder, manifest) = try photoCollection(
            "library",
            [
                ("a.jpg", "Nikon-D3100.jpg", "Bike", "ka"), ("b.webp", "Nikon-Coolpix-P7000.webp", "Lamp", "kb"),
                ("c.jpg", "Canon-EOS-1000D.jpg", "Clock", "kc"),
            ])
        let run = try Run.prepare(try Self.request(manifest, folder + "/lib"))
        #expect(run.manifest.items.count == 3)
        let (plan, change) = try run.plan()
        #expect(plan.counts[.new] == 3 && change == nil)
        #expect(!FileManager.default.fileExists(atPath: folder + "/lib"), "a dry run writes nothing")
        let entries = Mutex<[ItemLogEntry]>([])
        let result = try run.execute(hooks: RunHooks(onItem: { entry in entries.withLock { $0.append(entry) } }))
        #expect(result.counts.succeeded == 3 && result.failures.isEmpty)
        #expect(entries.withLock { $0.map(\.itemKey) } == ["ka", "kb", "kc"])
        let cli = try runThumbpipe(["run", manifest, "-o", folder + "/cli", "-q"])
        #expect(cli.status == 0, "\(cli.stderr)")
        for name in ["items.archive", "ka", "kb", "kc"] {
            #expect(
                FileManager.default.contents(atPath: folder + "/lib/" + name)
                    == FileManager.default.contents(atPath: folder + "/cli/" + name), "\(name) as the CLI makes it")
        }
        // The next night, through the library: nothing to do.
        let again = try Run.prepare(try Self.request(manifest, folder + "/lib"))
        #expect(try again.plan().plan.counts[.unchanged] == 3)
        #expect(try again.execute().incremental.decoded == 0)
    }

    @Test("Two shards through the library merge into the whole run's archive")
    func shards() throws {
        let (folder, manifest) = try photoCollection(
            "library-shards",
            [
                ("a.jpg", "Nikon-D3100.jpg", "Bike", "ka"), ("b.webp", "Nikon-Coolpix-P7000.webp", "Lamp", "kb"),
                ("c.jpg", "Canon-EOS-1000D.jpg", "Clock", "kc"), ("d.jpg", "Canon-EOS-5D.jpg", "Desk", "kd"),
            ])
        var sizes: [Int] = []
        for k in 0..<2 {
            var request = try Self.request(manifest, folder + "/part-\(k)")
            request.flags.shard = try Shard(parsing: "\(k)/2")
            request.flags.runId = "night-1"
            let run = try Run.prepare(request)
            sizes.append(run.manifest.items.count)
            #expect(try run.execute().failures.isEmpty)
            #expect(FileManager.default.fileExists(atPath: OutputFolder(folder + "/part-\(k)").layout.shard))
        }
        #expect(sizes.reduce(0, +) == 4)
        _ = try Merge.run(
            parts: [folder + "/part-0", folder + "/part-1"], output: folder + "/merged", runId: "night-1")
        let whole = try runThumbpipe(["run", manifest, "-o", folder + "/whole", "-q"])
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(
            FileManager.default.contents(atPath: folder + "/merged/items.archive")
                == FileManager.default.contents(atPath: folder + "/whole/items.archive"))
    }

    @Test("A run id without a shard is refused before anything is read")
    func runIdWithoutShard() throws {
        var request = try Self.request("/nonexistent.jsonl", "/nonexistent-out")
        request.flags.runId = "x"
        #expect(throws: ThumbpipeError.self) { _ = try Run.prepare(request) }
    }
}
