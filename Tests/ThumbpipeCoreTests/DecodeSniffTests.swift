import CVipsShim
import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// A format the limits refuse is refused by thumbpipe's own signature check,
/// before libvips is asked which loader recognises the file.
@Suite("Decode: refused formats never reach a loader", .vipsStarted, .serialized)
struct DecodeSniffTests {
    @Test("SVG, SVGZ, PDF and JPEG XL named .jpg under --formats jpeg: refused, no loader asked; a JPEG still is")
    func refusedBeforeAnyLoader() throws {
        let folder = TestPaths.temporaryFolder("sniff")
        var limits = PipelineSettings.Limits()
        limits.formats = [.jpeg]
        let decode = Decode(limits: limits)
        // svgz: gzip of an SVG (the reproduction: svgload's own check on it can spin).
        let svgz = folder + "/b.svgz"
        #expect(
            try runProcess(
                "/bin/sh", ["-c", "printf '<svg xmlns=\"http://www.w3.org/2000/svg\"/>' | gzip -c > \(svgz)"]
            ).status == 0)
        let files: [(String, Data, String)] = [
            ("a.jpg", Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>"#.utf8), "SVG"),
            ("b.jpg", try Data(contentsOf: URL(fileURLWithPath: svgz)), "SVG"),
            ("c.jpg", Data("%PDF-1.4\n".utf8), "PDF"),
            ("d.jpg", Data([0xFF, 0x0A, 0x00, 0x00]), "JPEG XL"),
        ]
        for (name, bytes, format) in files {
            try bytes.write(to: URL(fileURLWithPath: folder + "/" + name))
            let before = CVipsShim_find_loader_calls()
            do {
                _ = try decode.header(of: folder + "/" + name)
                Issue.record("\(name) was accepted")
            } catch {
                #expect(error.message == "format \(format) is not allowed (limits.formats)", "\(name)")
            }
            #expect(CVipsShim_find_loader_calls() == before, "\(name): no loader was asked")
        }
        let before = CVipsShim_find_loader_calls()
        _ = try decode.header(of: TestPaths.fixture("photos/Nikon-D3100.jpg"))
        #expect(CVipsShim_find_loader_calls() == before + 1, "an allowed JPEG goes to its loader")
    }
}
