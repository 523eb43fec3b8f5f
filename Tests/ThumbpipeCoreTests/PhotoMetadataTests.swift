import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// A photo's title, description and date taken, reconciled from EXIF, IPTC and
/// XMP as the Metadata Working Group says, against exiftool's own reading.
@Suite("Photo metadata: MWG reconciliation, hostile XMP and IPTC, time zones")
struct PhotoMetadataTests {
    static let utc = TimeZone(identifier: "UTC")!

    /// What exiftool 12.57 says of its test images (`exiftool -use MWG -MWG:Description
    /// -MWG:DateTimeOriginal -XMP-dc:Title -IPTC:ObjectName FILE`): the MWG composites, and
    /// the title as XMP `dc:title`, else IPTC ObjectName.
    static let exiftool: [(file: String, title: String?, description: String?, taken: String?)] = [
        ("ExifTool", "Test IPTC picture", "A witty caption", "2001-05-19T18:36:41"),
        ("Google", nil, nil, "2023-10-06T22:53:51.724+02:00"),
        ("IPTC", "Test IPTC picture", "A witty caption", "2004-02-26"),
        ("MWG", nil, "RIGHT-EXIF-Description", "2001-01-01T01:11:11.111"),
        ("PhotoMechanic", "Object Name", "Caption", "2006-10-29"),
        ("XMP", "Test IPTC picture", "A witty caption", "2001-05-19T18:36:41"),
    ]

    @Test("exiftool's test images: title, description and date equal its MWG composites", arguments: exiftool)
    func exiftoolImages(_ expected: (file: String, title: String?, description: String?, taken: String?)) throws {
        let path = TestPaths.fixture("metadata/exiftool-\(expected.file).jpg")
        let header = try Decode(limits: PipelineSettings.Limits()).header(of: path)
        #expect(header.embedded.title == expected.title)
        #expect(header.embedded.description == expected.description)
        #expect(header.embedded.taken == expected.taken.flatMap(TakenTime.iso))
        #expect(header.embedded.warnings.isEmpty, "\(header.embedded.warnings)")
    }

    @Test("MWG's IPTC digest rule: XMP wins while in step, a changed IPTC block wins once it is not")
    func digestRule() throws {
        let xmp = Self.xmp(#"<dc:title><rdf:Alt><rdf:li xml:lang="x-default">XMP title</rdf:li></rdf:Alt></dc:title>"#)
        let iim: [UInt8] = Self.dataset(5, "IPTC title")
        let inStep = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: xmp, iptc: Self.irb(iim, digest: MD5.hash(iim)))
        #expect(inStep.title == "XMP title")
        let noDigest = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: xmp, iptc: Self.irb(iim, digest: nil))
        #expect(noDigest.title == "XMP title")
        let stale = PhotoMetadata.reconcile(
            exif: EXIFFields(), xmp: xmp, iptc: Self.irb(iim, digest: [UInt8](repeating: 7, count: 16)))
        #expect(stale.title == "IPTC title")
        // An IPTC value cut at its 64-byte limit whose XMP runs on is the XMP's.
        let long = String(repeating: "Kirkjufell ", count: 8)
        let cut = Self.dataset(5, String(long.prefix(64)))
        let longXMP = Self.xmp(
            #"<dc:title><rdf:Alt><rdf:li xml:lang="x-default">\#(long)</rdf:li></rdf:Alt></dc:title>"#)
        let recovered = PhotoMetadata.reconcile(
            exif: EXIFFields(), xmp: longXMP, iptc: Self.irb(cut, digest: [UInt8](repeating: 7, count: 16)))
        #expect(recovered.title == long.trimmingCharacters(in: .whitespaces))
    }

    @Test("XMP as writers write it: other prefixes, entities, attributes, UTF-16, the x-default entry")
    func xmpForms() throws {
        let packet = #"""
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
            <rdf:Description xmlns:d="http://purl.org/dc/elements/1.1/" xmlns:ps="http://ns.adobe.com/photoshop/1.0/"
              ps:DateCreated="2019-06-01T21:30:00">
            <d:title><rdf:Alt><rdf:li xml:lang="is">Kirkjufell &#8212; Sólsetur</rdf:li>
              <rdf:li xml:lang="x-default">Kirkjufell &#x2014; Sunset &amp; clouds</rdf:li></rdf:Alt></d:title>
            </rdf:Description></rdf:RDF></x:xmpmeta>
            """#
        let read = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: Data(packet.utf8), iptc: nil)
        #expect(read.title == "Kirkjufell — Sunset & clouds")
        #expect(read.taken == .wallClock(Self.seconds("2019-06-01T21:30:00Z"), gpsOffset: nil))
        var utf16 = Data([0xFE, 0xFF])
        for unit in packet.utf16 { utf16.append(contentsOf: [UInt8(unit >> 8), UInt8(unit & 0xFF)]) }
        #expect(PhotoMetadata.reconcile(exif: EXIFFields(), xmp: utf16, iptc: nil).title == read.title)
    }

    @Test("Hostile XMP and IPTC cost a warning each: a billion laughs, undefined entities, sizes that lie")
    func hostile() throws {
        let lol = (1...9).map { #"<!ENTITY lol\#($0) "&lol\#($0 - 1);&lol\#($0 - 1);">"# }.joined()
        let laughs =
            #"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY lol0 "lol">\#(lol)]><x:xmpmeta><dc:title><rdf:Alt><rdf:li>&lol9;</rdf:li></rdf:Alt></dc:title></x:xmpmeta>"#
        let bomb = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: Data(laughs.utf8), iptc: nil)
        #expect(bomb.title == nil)
        #expect(bomb.warnings == ["XMP declares a DTD or entities, which XMP forbids: not read"])
        let undefined = PhotoMetadata.reconcile(
            exif: EXIFFields(),
            xmp: Self.xmp(#"<dc:title><rdf:Alt><rdf:li>&lol9;</rdf:li></rdf:Alt></dc:title>"#), iptc: nil)
        #expect(undefined.title == nil)
        #expect(undefined.warnings.first?.contains("an entity it does not define") == true)
        let huge = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: Data(count: 2 << 20), iptc: nil)
        #expect(huge.warnings == ["XMP of 2097152 bytes, over 1 MiB: not read"])
        // IPTC: a dataset longer than its block, a resource that overruns, an extended size of 9 bytes.
        let lying: [[UInt8]] = [
            [0x1C, 2, 5, 0xFF, 0xFF, 65, 66],
            Array("8BIM".utf8) + [4, 4, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x1C],
            [0x1C, 2, 5, 0x80, 9] + [UInt8](repeating: 0xFF, count: 9),
        ]
        for block in lying {
            let read = PhotoMetadata.reconcile(exif: EXIFFields(), xmp: nil, iptc: Data(block))
            #expect(read.title == nil && read.warnings.count == 1, "\(block): \(read.warnings)")
        }
        // A title of 30,000 characters is cut to 2,000, with a warning.
        let long = PhotoMetadata.reconcile(
            exif: EXIFFields(), xmp: nil,
            iptc: Self.irb(Self.dataset(5, String(repeating: "a", count: 30_000)), digest: nil))
        #expect(long.title?.count == 2000)
        #expect(long.warnings.first?.contains("cut to 2000") == true)
    }

    @Test("A time without an offset: the GPS stamp's zone, else the run's (summer and winter alike)")
    func zones() throws {
        let oslo = try #require(TimeZone(identifier: "Europe/Oslo"))
        let summer = try #require(TakenTime.exif(EXIFFields(dateTimeOriginal: "2023:07:01 12:00:00")))
        #expect(summer.resolved(in: oslo).date == Date(timeIntervalSince1970: Self.seconds("2023-07-01T10:00:00Z")))
        #expect(summer.resolved(in: oslo).zone == .assumed)
        let winter = try #require(TakenTime.exif(EXIFFields(dateTimeOriginal: "2023:01:01 12:00:00")))
        #expect(winter.resolved(in: oslo).date == Date(timeIntervalSince1970: Self.seconds("2023-01-01T11:00:00Z")))
        // GPS at 20:52:10 UTC beside 22:53:51 local: +02:00, whatever the run's zone.
        let gps = try #require(
            TakenTime.exif(
                EXIFFields(
                    dateTimeOriginal: "2023:10:06 22:53:51", subSecond: "724", gpsDate: "2023:10:06",
                    gpsTime: "20/1 52/1 10/1")))
        #expect(gps.resolved(in: Self.utc).zone == .gps)
        #expect(gps.resolved(in: oslo).date == Date(timeIntervalSince1970: Self.seconds("2023-10-06T20:53:51.724Z")))
        // The offset the photo names wins over both.
        let named = try #require(
            TakenTime.exif(
                EXIFFields(
                    dateTimeOriginal: "2023:10:06 22:53:51", offset: "+05:30", gpsDate: "2023:10:06",
                    gpsTime: "20/1 52/1 10/1")))
        #expect(named == .instant(Date(timeIntervalSince1970: Self.seconds("2023-10-06T17:23:51Z"))))
        // A GPS stamp a day away is not an offset.
        let far = TakenTime.exif(
            EXIFFields(dateTimeOriginal: "2023:10:06 22:53:51", gpsDate: "2023:10:04", gpsTime: "20/1 52/1 10/1"))
        #expect(far == .wallClock(Self.seconds("2023-10-06T22:53:51Z"), gpsOffset: nil))
        #expect(try timeZone("+02:00").secondsFromGMT() == 7200)
        #expect(throws: ThumbpipeError.self) { try timeZone("Mars/Olympus_Mons") }
    }

    @Test("Folder mode names an item by its photo's title; a manifest's itemName always wins")
    func titleRule() {
        var header = SourceHeader(width: 1, height: 1, orientation: 1, format: "JPEG", hasAlpha: false, shrink: .none)
        header.embedded.title = "Kirkjufell — Sunset"
        header.sidecars.xmp = PhotoMetadata(title: "From the sidecar")
        #expect(ItemLedger.title(of: header) == "From the sidecar")
        header.sidecars.takeoutTitle = "From Google Photos"
        #expect(ItemLedger.title(of: header) == "From Google Photos")
        var item = ItemLedgerTests.item()
        let manifest = ItemLedgerTests.ledger(item, nil)
        #expect(manifest.archivedName(title: "Kirkjufell") == "Bike")
        item.nameFromFile = true
        let folder = ItemLedgerTests.ledger(item, nil)
        #expect(folder.archivedName(title: "Kirkjufell") == "Kirkjufell")
        #expect(folder.archivedName(title: nil) == "Bike")
        #expect(SidecarReader.isFileName("IMG_1234.HEIC", photoName: "IMG_1234(1).jpg"))
        #expect(!SidecarReader.isFileName("Grandma's 80th", photoName: "IMG_1234.jpg"))
    }

    // MARK: - Helpers

    static func seconds(_ iso: String) -> Double { ISO8601.parse(iso)!.timeIntervalSince1970 }

    static func xmp(_ body: String) -> Data {
        Data(
            #"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/">\#(body)</rdf:Description></rdf:RDF></x:xmpmeta>"#
                .utf8)
    }

    static func dataset(_ number: UInt8, _ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        if bytes.count < 0x8000 {
            return [0x1C, 2, number, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        }
        return [0x1C, 2, number, 0x80, 4] + withUnsafeBytes(of: UInt32(bytes.count).bigEndian, Array.init) + bytes
    }

    /// Photoshop's APP13: the IIM resource (0x0404) and, when given, the digest resource (0x0425).
    static func irb(_ iim: [UInt8], digest: [UInt8]?) -> Data {
        func resource(_ id: UInt8, _ data: [UInt8]) -> [UInt8] {
            let size = withUnsafeBytes(of: UInt32(data.count).bigEndian, Array.init)
            return Array("8BIM".utf8) + [4, id, 0, 0] + size + data + (data.count % 2 == 1 ? [0] : [])
        }
        return Data(
            Array("Photoshop 3.0\u{0}".utf8) + resource(0x04, iim) + (digest.map { resource(0x25, $0) } ?? []))
    }
}
