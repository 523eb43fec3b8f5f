import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// Every route an item can take, decided by ``ItemPlan`` from its header, the
/// store's settings and the build: one row a case, in memory, no decode.
@Suite("The item plan: every route from the header, the settings and the build")
struct ItemPlanTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var width = 4000, height = 3000, format = "JPEG", turned = 1
        var colour: JPEGColour? = .sRGB
        var makeStore = true
        var orientation: PipelineSettings.StoreOrientation = .rotate
        var keepMetadata = false
        var planes = true
        var decode: DecodePlan
        var onPlanes: Bool
        var store: ItemPlan.Store
        var blocks = false
        /// The tap from the blocks' means, and the tap's factor on the planes.
        var means = false
        var planeFactor = 0
        /// A turned source held as coded through its decode.
        var held = false
        var alpha = false
        var heicPlanes = true
        /// The HEIC route.
        var heic = false
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "sRGB JPEG: planes for both, taken as coded, tapped from the means by 16", decode: .tap(factor: 18),
            onPlanes: true, store: .planes, blocks: true, means: true, planeFactor: 16),
        Row(
            name: "sRGB JPEG turned (orientation 6), 3000 high (not whole MCUs): planes, held as coded", turned: 6,
            decode: .tap(factor: 18), onPlanes: true, store: .planes, means: true, planeFactor: 16, held: true),
        Row(
            name: "sRGB JPEG turned (orientation 6), 4032 × 3024: taken as coded", width: 4032, height: 3024,
            turned: 6, decode: .tap(factor: 18), onPlanes: true, store: .planes, blocks: true, means: true,
            planeFactor: 16),
        Row(
            name: "sRGB JPEG transposed (orientation 5), 3000 high: taken as coded", turned: 5,
            decode: .tap(factor: 18), onPlanes: true, store: .planes, blocks: true, means: true, planeFactor: 16),
        Row(
            name: "sRGB JPEG turned 180°, 4000 × 3000: planes, held as coded", turned: 3, decode: .tap(factor: 18),
            onPlanes: true, store: .planes, means: true, planeFactor: 16, held: true),
        Row(
            name: "sRGB JPEG tapped by 5: taken as coded, the tap reading pixels", width: 1200, height: 900,
            decode: .tap(factor: 5), onPlanes: true, store: .planes, blocks: true, planeFactor: 5),
        Row(
            name: "sRGB JPEG tapped by 15: the tap reading pixels", width: 2480, height: 2480,
            decode: .tap(factor: 15), onPlanes: true, store: .planes, blocks: true, planeFactor: 15),
        Row(
            name: "sRGB JPEG tapped by 16: from the means by 16", width: 2560, height: 2560,
            decode: .tap(factor: 16), onPlanes: true, store: .planes, blocks: true, means: true, planeFactor: 16),
        Row(
            name: "sRGB JPEG tapped by 31: from the means by 16", width: 5000, height: 5000,
            decode: .tap(factor: 31), onPlanes: true, store: .planes, blocks: true, means: true, planeFactor: 16),
        Row(
            name: "sRGB JPEG tapped by 32: from the means by 32", width: 5200, height: 5200,
            decode: .tap(factor: 32), onPlanes: true, store: .planes, blocks: true, means: true, planeFactor: 32),
        Row(
            name: "Display P3 JPEG: planes, converted", colour: .matrix, decode: .tap(factor: 18), onPlanes: true,
            store: .planesConverted, planeFactor: 18),
        Row(
            name: "Display P3 JPEG turned (orientation 6), 4000 × 3000: converted, held as its store's YCbCr",
            turned: 6, colour: .matrix, decode: .tap(factor: 18), onPlanes: true, store: .planesConverted,
            planeFactor: 18, held: true),
        Row(
            name: "Display P3 JPEG turned (orientation 3), 4001 × 3000 (an odd side): converted, held as RGB",
            width: 4001, turned: 3, colour: .matrix, decode: .tap(factor: 18), onPlanes: true,
            store: .planesConverted, planeFactor: 18),
        Row(
            name: "Display P3 JPEG turned, no store asked for: nothing held", turned: 6, colour: .matrix,
            makeStore: false, decode: .tap(factor: 18), onPlanes: true, store: .none, planeFactor: 18),
        Row(
            name: "no store asked for: the thumbnail still on the planes", makeStore: false, decode: .tap(factor: 18),
            onPlanes: true, store: .none, blocks: true, means: true, planeFactor: 16),
        Row(
            name: "a PNG: libvips, no reason given", format: "PNG", colour: nil, decode: .tap(factor: 18),
            onPlanes: false, store: .libvips(nil)),
        Row(
            name: "CMYK JPEG", colour: .other("CMYK"), decode: .tap(factor: 18), onPlanes: false,
            store: .libvips("CMYK")),
        Row(
            name: "grey JPEG", colour: .other("grey"), decode: .tap(factor: 18), onPlanes: false,
            store: .libvips("grey")),
        Row(
            name: "a LUT profile", colour: .other("a profile that is not RGB matrix/TRC"), decode: .tap(factor: 18),
            onPlanes: false, store: .libvips("a profile that is not RGB matrix/TRC")),
        Row(
            name: "THUMBPIPE_JPEG_PLANES=off", planes: false, decode: .tap(factor: 18), onPlanes: false,
            store: .libvips("THUMBPIPE_JPEG_PLANES=off")),
        Row(
            name: "too small to shrink on load: once, in memory", width: 200, height: 150, decode: .once,
            onPlanes: false, store: .libvips("too small to shrink on load")),
        Row(
            name: "a strip too large to hold: twice", width: 110_000, height: 300, decode: .twice, onPlanes: false,
            store: .libvips("a strip too large to hold")),
        Row(
            name: "over 30 Mpx", width: 8000, height: 4000, decode: .tap(factor: 25), onPlanes: false,
            store: .libvips("over 30 Mpx")),
        Row(
            name: "store.orientation tag: the thumbnail on the planes, the store on libvips", orientation: .tag,
            decode: .tap(factor: 18), onPlanes: true, store: .libvips("store.orientation tag"), blocks: true,
            means: true, planeFactor: 16),
        Row(
            name: "store.keepMetadata", keepMetadata: true, decode: .tap(factor: 18), onPlanes: true,
            store: .libvips("store.keepMetadata"), blocks: true, means: true,
            planeFactor: 16),
        Row(
            name: "a phone HEIC: the HEIC route for both", width: 4032, height: 3024, format: "HEIF", colour: nil,
            decode: .tap(factor: 18), onPlanes: false, store: .planesConverted, heic: true),
        Row(
            name: "a HEIC with alpha: libvips", width: 4032, height: 3024, format: "HEIF", colour: nil,
            decode: .tap(factor: 18), onPlanes: false, store: .libvips(nil), alpha: true),
        Row(
            name: "a HEIC, store.keepMetadata: the thumbnail on the HEIC route, the store on libvips", width: 4032,
            height: 3024, format: "HEIF", colour: nil, keepMetadata: true, decode: .tap(factor: 18), onPlanes: false,
            store: .libvips("store.keepMetadata"), heic: true),
        Row(
            name: "a HEIC with the route off (THUMBPIPE_HEIC_PLANES=off): libvips", width: 4032, height: 3024,
            format: "HEIF", colour: nil, decode: .tap(factor: 18), onPlanes: false, store: .libvips(nil),
            heicPlanes: false),
        Row(
            name: "a HEIC over 30 Mpx: libvips", width: 8000, height: 4000, format: "HEIF", colour: nil,
            decode: .tap(factor: 25), onPlanes: false, store: .libvips(nil)),
    ]

    @Test(arguments: rows)
    func route(_ row: Row) {
        let header = SourceHeader(
            width: row.width, height: row.height, orientation: row.turned, format: row.format,
            hasAlpha: row.alpha, shrink: .integer, jpegColour: row.colour)
        var store = PipelineSettings.Store()
        store.orientation = row.orientation
        store.keepMetadata = row.keepMetadata
        let plan = ItemPlan.make(
            header: header, makeStore: row.makeStore, canvasWidth: 80, canvasHeight: 80, store: store,
            planes: row.planes, heicPlanes: row.heicPlanes)
        #expect((plan.onHEIC != nil) == row.heic)
        #expect(plan.decode == row.decode)
        #expect((plan.onPlanes != nil) == row.onPlanes)
        #expect(plan.store == row.store)
        #expect((plan.onPlanes?.blocks ?? false) == row.blocks)
        #expect((plan.onPlanes?.tapMeans ?? false) == row.means)
        #expect((plan.onPlanes?.tapFactor ?? 0) == row.planeFactor)
        #expect((plan.onPlanes?.holdTurned ?? false) == row.held)
    }

    @Test("The thumbnail's route (planes, blocks as coded) never depends on the store's settings")
    func thumbnailIndependentOfStore() {
        for row in Self.rows {
            let header = SourceHeader(
                width: row.width, height: row.height, orientation: row.turned, format: row.format,

                hasAlpha: row.alpha, shrink: .integer, jpegColour: row.colour)
            var plans: Set<[Int]> = []
            for orientation in [PipelineSettings.StoreOrientation.rotate, .tag] {
                for keep in [false, true] {
                    var store = PipelineSettings.Store()
                    store.orientation = orientation
                    store.keepMetadata = keep
                    plans.insert(
                        ItemPlan.make(
                            header: header, makeStore: true, canvasWidth: 80, canvasHeight: 80, store: store,
                            planes: row.planes, heicPlanes: row.heicPlanes
                        ).thumbnailRoute)
                }
            }
            #expect(plans.count == 1, "\(row.name)")
        }
    }
}

@Test("The plan takes a store as coded only from a 4:2:0 frame, read from the JPEG's own frame header")
func blocksOnlyFor420() throws {
    let header = SourceHeader(
        width: 4000, height: 3000, orientation: 1, format: "JPEG", hasAlpha: false,
        shrink: .integer, jpegColour: .sRGB)
    func plan(_ sampling: [UInt8]?) -> ItemPlan {
        ItemPlan.make(
            header: header, sampling: sampling, makeStore: true, canvasWidth: 80, canvasHeight: 80,
            store: PipelineSettings.Store(), planes: true)
    }
    #expect(plan([0x22, 0x11, 0x11]).onPlanes?.blocks == true)
    #expect(plan([0x21, 0x11, 0x11]).onPlanes?.blocks == false, "4:2:2: decoded, not requantized")
    #expect(plan([0x11, 0x11, 0x11]).onPlanes?.blocks == false, "4:4:4")
    #expect(plan([0x11, 0x11, 0x11]).onPlanes?.tapMeans == true, "the tap's route does not depend on it")
    // The frame header as the plane code's own files have it.
    let jpeg = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg")))
    #expect(jpeg.withUnsafeBytes(ItemPlan.frameSampling) == [0x21, 0x11, 0x11], "the Nikon D3100 writes 4:2:2")
    #expect(Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00]).withUnsafeBytes(ItemPlan.frameSampling) == nil, "cut short")
}

@Test("A turn keeps a 4:2:0 JPEG's block grid when the edges turned to the left and top are whole MCUs")
func turnKeepsBlocks() {
    // (width, height): the orientations whose turn keeps the grid.
    let cases: [((Int, Int), Set<Int>)] = [
        ((4032, 3024), Set(1...8)), ((4000, 3000), [1, 2, 5, 8]), ((3001, 2000), [1, 4, 5, 6]),
        ((3001, 2001), [1, 5]),
    ]
    for ((width, height), keeps) in cases {
        for orientation in 1...8 {
            #expect(
                ItemPlan.turnKeepsBlocks(width: width, height: height, orientation: orientation)
                    == keeps.contains(orientation), "\(width)×\(height), orientation \(orientation)")
        }
    }
}

extension ItemPlan {
    /// What of the plan decides a thumbnail's bytes: its tap's reader, whether it reads blocks' means, its factor.
    fileprivate var thumbnailRoute: [Int] {
        [onHEIC != nil ? 2 : onPlanes == nil ? 0 : 1, onPlanes?.tapMeans == true ? 1 : 0, onPlanes?.tapFactor ?? 0]
    }
}
