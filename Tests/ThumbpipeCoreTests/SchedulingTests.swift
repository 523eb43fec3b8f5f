import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// A worker loads only the libvips modules its formats need.
@Suite struct ModuleTests {
    @Test func workersLoadOnlyTheModulesTheirFormatsNeed() throws {
        let environment = VipsModules.workerEnvironment(allowing: [.jpeg, .png, .heif])
        guard let list = environment["THUMBPIPE_VIPS_MODULES"] else {
            // libvips built without modules (or VIPSHOME set): nothing to choose.
            #expect(environment.isEmpty)
            return
        }
        let names = list.split(separator: ":").map { URL(fileURLWithPath: String($0)).lastPathComponent }
        #expect(names.contains("vips-heif.so"), "\(names)")
        #expect(!names.contains("vips-magick.so") && !names.contains("vips-poppler.so"), "\(names)")
        let home = try #require(environment["VIPSHOME"])
        #expect(FileManager.default.fileExists(atPath: home + "/vips-heif.so"), "VIPSHOME is the system module folder")
        let magick = VipsModules.workerEnvironment(allowing: [.jpeg, .magick])["THUMBPIPE_VIPS_MODULES"] ?? ""
        #expect(magick.contains("vips-magick.so") && !magick.contains("vips-heif.so"), "\(magick)")
    }
}

/// The dispenser hands out every position once, within the window, heaviest photo first.
@Suite struct DispenserTests {
    @Test func heaviestFirstWithinTheWindow() {
        // Positions 0…9: 3 and 4 have no photo; weights rise with the position.
        let light: Set<Int> = [3, 4]
        let dispenser = Dispenser(count: 10, window: 4, isLight: { light.contains($0) }, weight: { $0 * 10 })
        var order: [Range<Int>] = []
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        // Window 0..<4 with nothing written: 2 (heaviest photo), then 1, then 0, then the light run 3..<5.
        #expect(order == [2..<3, 1..<2, 0..<1, 3..<5], "\(order)")
        #expect(dispenser.take(waiting: false).isFull, "nothing beyond the window until the archive moves")
        dispenser.written(upTo: 5)
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        #expect(order.suffix(4) == [8..<9, 7..<8, 6..<7, 5..<6], "\(order)")
        dispenser.written(upTo: 9)
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        #expect(order.flatMap { Array($0) }.sorted() == Array(0..<10), "every position exactly once")
        #expect(dispenser.next() == nil)
    }
}

extension Dispenser.Handout {
    var isFull: Bool {
        if case .full = self { return true }
        return false
    }
}
