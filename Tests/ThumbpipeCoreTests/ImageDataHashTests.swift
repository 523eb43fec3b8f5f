import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// The hash that tells a title written into a photo from an edit of its pixels:
/// metadata segments leave it, everything that shapes the pixels moves it.
@Suite("Image-data hash: a JPEG's pixels without its metadata")
struct ImageDataHashTests {
    static let photo = [UInt8](try! Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg"))))

    static func hash(_ bytes: [UInt8], orientation: Int = 1) -> String? {
        bytes.withUnsafeBytes { ImageDataHash.jpeg($0, orientation: orientation) }
    }

    /// `jpeg` with a segment (marker, payload) inserted after its SOI.
    static func inserting(_ marker: UInt8, _ payload: String, into jpeg: [UInt8]) -> [UInt8] {
        let body = [UInt8](payload.utf8)
        let length = body.count + 2
        return [UInt8](jpeg.prefix(2)) + [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)] + body
            + jpeg.dropFirst(2)
    }

    /// Where the first segment with `marker` starts.
    static func segment(_ marker: UInt8, in jpeg: [UInt8]) -> Int? {
        var position = 2
        while position + 3 < jpeg.count, jpeg[position] == 0xFF {
            if jpeg[position + 1] == marker { return position }
            position += 2 + (Int(jpeg[position + 2]) << 8 | Int(jpeg[position + 3]))
        }
        return nil
    }

    @Test("A title, caption or comment written into the photo leaves the hash as it was")
    func metadataLeavesIt() throws {
        let original = try #require(Self.hash(Self.photo))
        var edited = Self.inserting(
            0xE1, "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta>Kirkjufell</x:xmpmeta>", into: Self.photo)
        edited = Self.inserting(0xED, "Photoshop 3.0\08BIM\u{04}\u{04}", into: edited)
        edited = Self.inserting(0xFE, "a comment", into: edited)
        #expect(Self.hash(edited) == original)
        #expect(original.hasPrefix("jpeg:") && original.count == 21)
    }

    @Test("The orientation, a colour profile, a quantisation table or one byte of the scan moves it")
    func pixelsMoveIt() throws {
        let original = try #require(Self.hash(Self.photo))
        #expect(Self.hash(Self.photo, orientation: 6) != original)
        #expect(Self.hash(Self.inserting(0xE2, "ICC_PROFILE\0\u{01}\u{01}profile", into: Self.photo)) != original)
        var table = Self.photo
        let dqt = try #require(Self.segment(0xDB, in: table))
        table[dqt + 6] ^= 1
        #expect(Self.hash(table) != original)
        var scan = Self.photo
        scan[scan.count - 1000] ^= 0x10
        #expect(Self.hash(scan) != original)
    }

    @Test("Not a JPEG, or segments that cannot be walked: no hash (an edit then redoes the item)")
    func noHash() throws {
        let png = [UInt8](try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("edge/icc-display-p3_p3.png"))))
        #expect(Self.hash(png) == nil)
        let sos = try #require(Self.segment(0xDA, in: Self.photo))
        #expect(Self.hash(Array(Self.photo.prefix(sos - 10))) == nil)
        var lying = Self.photo
        // The first segment's length 1: shorter than its own length field.
        lying[4] = 0
        lying[5] = 1
        #expect(Self.hash(lying) == nil)
        #expect(Self.hash([0xFF, 0xD8, 0x00, 0x00, 0x00]) == nil)
        #expect(Self.hash([]) == nil)
    }
}
