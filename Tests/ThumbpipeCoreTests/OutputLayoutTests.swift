import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("The output folder's layout")
struct OutputLayoutTests {
    @Test("Every path thumbpipe keeps is named once, inside the folder, thumbpipe's own under .thumbpipe")
    func layout() {
        let layout = OutputFolder("/srv/out").layout
        let own = [
            layout.state, layout.index, layout.report, layout.html, layout.reports, layout.lock, layout.claims,
            layout.work, layout.shard, layout.scratch(slot: 0),
        ]
        #expect(own.allSatisfy { $0.hasPrefix("/srv/out/.thumbpipe/") }, "\(own)")
        #expect(Set(own).count == own.count, "no two files share a name")
        #expect(layout.archive("items.archive") == "/srv/out/items.archive")
        #expect(layout.store(key: "KEY-1") == "/srv/out/KEY-1")
        #expect(layout.scratch(slot: 1) == "/srv/out/.thumbpipe/work/worker-2")
        // The store takes the folder's layout, not a path of its own.
        #expect(
            ImageStore(output: OutputFolder("/srv/out"), settings: .init()).path(forKey: "k") == layout.store(key: "k"))
    }

    @Test("prepare makes the folder, .thumbpipe and work, takes the lock and records its pid")
    func prepare() throws {
        let folder = OutputFolder(TestPaths.temporaryFolder("layout") + "/out")
        let lock = try folder.prepare()
        var isDirectory: ObjCBool = false
        #expect(
            FileManager.default.fileExists(atPath: folder.layout.work, isDirectory: &isDirectory)
                && isDirectory.boolValue)
        #expect(
            (try? String(contentsOfFile: folder.layout.lock, encoding: .utf8))?.trimmingCharacters(in: .newlines)
                == "\(getpid())")
        #expect(throws: ThumbpipeError.self) { _ = try folder.prepare() }
        folder.claim("a")
        folder.claim("b")
        #expect(folder.claims() == ["a", "b"])
        folder.clearClaims()
        #expect(folder.claims().isEmpty)
        withExtendedLifetime(lock) {}
    }
}
