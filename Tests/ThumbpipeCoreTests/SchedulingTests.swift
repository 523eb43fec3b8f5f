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

/// The dispenser hands out every position once, within the window, in order
/// until the last window, and there heaviest photo first.
@Suite struct DispenserTests {
    @Test func inOrderThenHeaviestFirst() {
        // Positions 0…9, window 4: 7 has no photo; weights rise with the position.
        let dispenser = Dispenser(count: 10, window: 4, isLight: { $0 == 7 }, weight: { $0 * 10 })
        var order: [Range<Int>] = []
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        #expect(order == [0..<1, 1..<2, 2..<3, 3..<4], "in order: \(order)")
        #expect(dispenser.take(waiting: false).isFull, "nothing beyond the window until the archive moves")
        dispenser.written(upTo: 2)
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        #expect(order.suffix(2) == [4..<5, 5..<6], "\(order)")
        // The last window (6…9): the heaviest photo first, the light item when the cursor gets there.
        dispenser.written(upTo: 6)
        while case .positions(let range) = dispenser.take(waiting: false) { order.append(range) }
        #expect(order.suffix(4) == [9..<10, 8..<9, 6..<7, 7..<8], "\(order)")
        #expect(order.flatMap { Array($0) }.sorted() == Array(0..<10), "every position exactly once")
        #expect(dispenser.next() == nil)
    }
}

extension Dispenser {
    /// The next positions, waiting while the window is full; nil when every
    /// position was handed out or the run stopped.
    func next() -> Range<Int>? {
        if case .positions(let range) = take(waiting: true) { return range }
        return nil
    }
}

extension Dispenser.Handout {
    var isFull: Bool {
        if case .full = self { return true }
        return false
    }
}
