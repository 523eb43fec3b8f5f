import Foundation
import Testing
import ThumbpipeTestSupport

/// A migration keeps what the photos know of themselves: folder mode names an
/// item by its photo's title and dates it by its reconciled date, read in the
/// zone the user gives when the photo names none.
@Suite("Metadata in a run: titles name items, dates in the right zone, a manifest's fields win")
struct MetadataRunTests {
    static func archive(_ path: String, in folder: String) throws -> [String: String] {
        let inspect = try runThumbpipe(["inspect", path, "--json"], in: folder)
        var names: [String: String] = [:]
        for line in inspect.stdout.split(separator: "\n") {
            let item = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            names[item["itemName"] as? String ?? ""] = item["dateCreated"] as? String
        }
        return names
    }

    @Test("exiftool's images in folder mode: named by their titles, dated in --time-zone, kept so the next night")
    func folderMode() throws {
        let folder = TestPaths.temporaryFolder("metadata-run")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in ["PhotoMechanic", "MWG", "Google"] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("metadata/exiftool-\(name).jpg"), toPath: folder + "/photos/\(name).jpg")
        }
        let run = try runThumbpipe(["run", "photos", "-o", "out", "--time-zone", "America/New_York"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(
            run.stderr.contains(
                "2 photos' times name no UTC offset: read as local time in America/New_York (--time-zone to change)"),
            "\(run.stderr)")
        let expected = [
            // IPTC ObjectName and XMP dc:title agree; a date alone is midnight in the
            // zone (still summer time there: it ended at 2:00 that night).
            "Object Name": "2006-10-29T04:00:00Z",
            // No title: the file's name; EXIF time with sub-seconds, no offset.
            "MWG": "2001-01-01T06:11:11.111Z",
            // The offset the photo names wins over the zone.
            "Google": "2023-10-06T20:53:51.724Z",
        ]
        #expect(try Self.archive("out/items.archive", in: folder) == expected)
        let night = try runThumbpipe(["run", "photos", "-o", "out", "--time-zone", "America/New_York"], in: folder)
        #expect(night.stderr.contains("0 new, 0 changed, 3 unchanged, 0 removed; 0 decoded"), "\(night.stderr)")
        #expect(try Self.archive("out/items.archive", in: folder) == expected)
        // A manifest's itemName wins over the photo's title.
        let manifest = writeFile(
            folder, "items.jsonl", #"{"itemName": "Caption from the manifest", "image": "photos/PhotoMechanic.jpg"}"#)
        let listed = try runThumbpipe(["run", manifest, "-o", "listed", "-q", "--time-zone", "UTC"], in: folder)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(
            try Self.archive("listed/items.archive", in: folder) == [
                "Caption from the manifest": "2006-10-29T00:00:00Z"
            ])
        let unknown = try runThumbpipe(["run", "photos", "-o", "x", "--time-zone", "Europe/Atlantis"], in: folder)
        #expect(unknown.status == 64 && unknown.stderr.contains("unknown zone 'Europe/Atlantis'"), "\(unknown.stderr)")
    }
}

extension MetadataRunTests {
    @Test("A Takeout sidecar edited (a date corrected in Google Photos) is a metadata change: nothing decoded")
    func sidecarEdit() throws {
        let folder = TestPaths.temporaryFolder("sidecar-edit")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/photos/IMG_1.jpg")
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Canon-EOS-1000D.jpg"), toPath: folder + "/photos/IMG_2.jpg")
        func sidecar(_ seconds: Int) {
            _ = writeFile(
                folder + "/photos", "IMG_1.jpg.json",
                #"{"title": "IMG_1.jpg", "photoTakenTime": {"timestamp": "\#(seconds)"}}"#)
        }
        sidecar(1_577_880_000)
        let first = try runThumbpipe(["run", "photos", "-o", "out", "-q"], in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try Self.archive("out/items.archive", in: folder)["IMG_1"] == "2020-01-01T12:00:00Z")
        let quiet = try runThumbpipe(["run", "photos", "-o", "out"], in: folder)
        #expect(quiet.stderr.contains("0 new, 0 changed, 2 unchanged, 0 removed; 0 decoded"), "\(quiet.stderr)")
        // The date corrected: one item's metadata read again, no photo decoded.
        sidecar(1_577_966_400)
        let plan = try runThumbpipe(["run", "photos", "-o", "out", "--dry-run"], in: folder)
        #expect(plan.stdout.contains("metadata") && plan.stdout.contains("sidecars edited"), "\(plan.stdout)")
        let edited = try runThumbpipe(["run", "photos", "-o", "out"], in: folder)
        #expect(edited.status == 0, "\(edited.stderr)")
        #expect(edited.stderr.contains("1 unchanged") && edited.stderr.contains("0 decoded"), "\(edited.stderr)")
        #expect(try Self.archive("out/items.archive", in: folder)["IMG_1"] == "2020-01-02T12:00:00Z")
        // A fresh run agrees, byte for byte; then the night after is quiet again.
        let fresh = try runThumbpipe(["run", "photos", "-o", "fresh", "-q"], in: folder)
        #expect(fresh.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/fresh/items.archive")))
        let after = try runThumbpipe(["run", "photos", "-o", "out"], in: folder)
        #expect(after.stderr.contains("0 new, 0 changed, 2 unchanged, 0 removed; 0 decoded"), "\(after.stderr)")
        // The sidecar gone: read again, the photo's own EXIF date back.
        try FileManager.default.removeItem(atPath: folder + "/photos/IMG_1.jpg.json")
        let gone = try runThumbpipe(["run", "photos", "-o", "out"], in: folder)
        #expect(gone.stderr.contains("0 decoded"), "\(gone.stderr)")
        #expect(try Self.archive("out/items.archive", in: folder)["IMG_1"] != "2020-01-02T12:00:00Z")
    }
}

extension MetadataRunTests {
    @Test("scan names items by their titles and writes their descriptions, read by workers; --no-metadata reads none")
    func scanWritesMetadata() throws {
        let folder = TestPaths.temporaryFolder("scan-metadata")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        for name in ["ExifTool", "MWG", "Google"] {
            try FileManager.default.copyItem(
                atPath: TestPaths.fixture("metadata/exiftool-\(name).jpg"), toPath: folder + "/photos/\(name).jpg")
        }
        // A photo whose header cannot be read keeps its file's name; the others are still read.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("bad/corrupt-header_corrupt-header.jpg"), toPath: folder + "/photos/bad.jpg")
        // A Takeout photo: its sidecar's description and place (geoData) go into the manifest too.
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Nikon-D3100.jpg"), toPath: folder + "/photos/IMG_7.jpg")
        _ = writeFile(
            folder + "/photos", "IMG_7.jpg.supplemental-metadata.json",
            #"{"title": "IMG_7.jpg", "description": "Hraunfossar", "photoTakenTime": {"timestamp": "1577880000"}, "geoData": {"latitude": 64.7028, "longitude": -20.9775, "altitude": 0.0}}"#
        )
        let scan = try runThumbpipe(["scan", "photos", "-o", "items.jsonl", "--jobs", "2"], in: folder)
        #expect(scan.status == 0, "\(scan.stderr)")
        let lines = try String(contentsOfFile: folder + "/items.jsonl", encoding: .utf8).split(separator: "\n")
        let items = try lines.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let byImage = Dictionary(uniqueKeysWithValues: items.map { ($0["image"] as? String ?? "", $0) })
        #expect(byImage["photos/ExifTool.jpg"]?["itemName"] as? String == "Test IPTC picture")
        #expect(byImage["photos/ExifTool.jpg"]?["description"] as? String == "A witty caption")
        #expect(byImage["photos/MWG.jpg"]?["itemName"] as? String == "MWG")
        #expect(byImage["photos/MWG.jpg"]?["description"] as? String == "RIGHT-EXIF-Description")
        #expect(byImage["photos/Google.jpg"]?["description"] == nil)
        #expect(byImage["photos/bad.jpg"]?["itemName"] as? String == "bad")
        #expect(byImage["photos/IMG_7.jpg"]?["itemName"] as? String == "IMG_7")
        #expect(byImage["photos/IMG_7.jpg"]?["description"] as? String == "Hraunfossar")
        #expect(byImage["photos/IMG_7.jpg"]?["latitude"] as? Double == 64.7028)
        #expect(byImage["photos/IMG_7.jpg"]?["longitude"] as? Double == -20.9775)
        // The manifest runs without a warning about its description field, with the scan's names.
        let run = try runThumbpipe(["run", "items.jsonl", "-o", "out"], in: folder)
        #expect(!run.stderr.contains("unknown field"), "\(run.stderr)")
        #expect(try Self.archive("out/items.archive", in: folder)["Test IPTC picture"] != nil)
        let plain = try runThumbpipe(["scan", "photos", "--no-metadata"], in: folder)
        #expect(plain.stdout.contains(#""itemName": "ExifTool""#) && !plain.stdout.contains("description"))
    }
}

extension MetadataRunTests {
    /// `jpeg` with `segments` (marker, payload) inserted after its SOI.
    static func withSegments(_ jpeg: Data, _ segments: [(UInt8, Data)]) -> Data {
        var out = Data(jpeg.prefix(2))
        for (marker, payload) in segments {
            let length = payload.count + 2
            out += Data([0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)]) + payload
        }
        return out + jpeg.dropFirst(2)
    }

    @Test(
        "Hostile metadata inside photos, read by the confined workers: a warning each, the photos done, nothing written outside the output"
    )
    func hostileEmbeddedMetadata() throws {
        let folder = TestPaths.temporaryFolder("hostile-metadata")
        let photos = folder + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg")))
        let xmpHeader = Data("http://ns.adobe.com/xap/1.0/\u{0}".utf8)
        let lol = (1...9).map { #"<!ENTITY lol\#($0) "&lol\#($0 - 1);&lol\#($0 - 1);&lol\#($0 - 1);">"# }.joined()
        let laughs =
            #"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY lol0 "lol">\#(lol)]><x:xmpmeta><dc:title><rdf:Alt><rdf:li>&lol9;</rdf:li></rdf:Alt></dc:title></x:xmpmeta>"#
        try Self.withSegments(jpeg, [(0xE1, xmpHeader + Data(laughs.utf8))])
            .write(to: URL(fileURLWithPath: photos + "/laughs.jpg"))
        // An IPTC block whose resource claims 4 GB and whose dataset runs past its end.
        let iptc =
            Data("Photoshop 3.0\u{0}8BIM".utf8) + Data([4, 4, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x1C, 2, 5, 0x7F, 0xFF])
        try Self.withSegments(jpeg, [(0xED, iptc)]).write(to: URL(fileURLWithPath: photos + "/iptc.jpg"))
        // A title of 60,000 characters, one entity after another.
        let long = String(repeating: "&amp;", count: 12_000)
        let title =
            #"<x:xmpmeta><dc:title><rdf:Alt><rdf:li xml:lang="x-default">\#(long)</rdf:li></rdf:Alt></dc:title></x:xmpmeta>"#
        try Self.withSegments(jpeg, [(0xE1, xmpHeader + Data(title.utf8))])
            .write(to: URL(fileURLWithPath: photos + "/long.jpg"))
        let before = try FileManager.default.subpathsOfDirectory(atPath: folder).filter { !$0.hasPrefix("out") }
        let started = Date()
        let run = try runThumbpipe(["run", "photos", "-o", "out", "--sandbox", "required"], in: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Date().timeIntervalSince(started) < 60)
        #expect(run.stderr.contains("XMP declares a DTD or entities, which XMP forbids: not read"), "\(run.stderr)")
        #expect(run.stderr.contains("IPTC resource longer than its block"), "\(run.stderr)")
        #expect(run.stderr.contains("cut to 2000"), "\(run.stderr)")
        let names = try Self.archive("out/items.archive", in: folder)
        #expect(names.keys.contains("laughs") && names.keys.contains("iptc"), "\(names.keys)")
        #expect(names.keys.contains(String(repeating: "&", count: 2000)), "the long title, cut")
        // Judged outside the workers: every photo has its store file, the scratch
        // folders are empty, and nothing appeared outside the output folder.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder + "/out").filter {
                !$0.hasPrefix(".") && $0 != "items.archive"
            }.count == 3)
        for worker in (try? FileManager.default.contentsOfDirectory(atPath: folder + "/out/.thumbpipe/work")) ?? [] {
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: folder + "/out/.thumbpipe/work/" + worker).isEmpty)
        }
        let after = try FileManager.default.subpathsOfDirectory(atPath: folder).filter { !$0.hasPrefix("out") }
        #expect(Set(after) == Set(before), "\(Set(after).subtracting(before))")
    }
}

extension MetadataRunTests {
    @Test(
        "A title written into the photo itself (as Lightroom saves it) is a metadata change: nothing decoded, outputs kept"
    )
    func titleWrittenIntoPhoto() throws {
        let folder = TestPaths.temporaryFolder("title-in-photo")
        try FileManager.default.createDirectory(atPath: folder + "/photos", withIntermediateDirectories: true)
        let photo = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Nikon-D3100.jpg")))
        try photo.write(to: URL(fileURLWithPath: folder + "/photos/IMG_2500.jpg"))
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/Canon-EOS-1000D.jpg"), toPath: folder + "/photos/IMG_2501.jpg")
        let first = try runThumbpipe(["run", "photos", "-o", "out", "-q"], in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        // Each store file's time: a kept one keeps it.
        func storeTimes() throws -> [String: Date] {
            let names = try FileManager.default.contentsOfDirectory(atPath: folder + "/out").filter {
                !$0.hasPrefix(".") && $0 != "items.archive"
            }
            var times: [String: Date] = [:]
            for name in names {
                let attributes = try FileManager.default.attributesOfItem(atPath: folder + "/out/" + name)
                times[name] = try #require(attributes[.modificationDate] as? Date)
            }
            return times
        }
        let storeBefore = try storeTimes()
        #expect(storeBefore.count == 2)
        // The title saved into the file: its bytes and size change, its image data does not.
        let xmp = Data(
            "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description xmlns:dc='http://purl.org/dc/elements/1.1/'><dc:title><rdf:Alt><rdf:li xml:lang='x-default'>Kirkjufell — Sunset</rdf:li></rdf:Alt></dc:title></rdf:Description></rdf:RDF></x:xmpmeta>"
                .utf8)
        try Self.withSegments(photo, [(0xE1, xmp)]).write(to: URL(fileURLWithPath: folder + "/photos/IMG_2500.jpg"))
        let plan = try runThumbpipe(["run", "photos", "-o", "out", "--dry-run"], in: folder)
        #expect(plan.stdout.contains("source changed (its image data compared first)"), "\(plan.stdout)")
        let edited = try runThumbpipe(["run", "photos", "-o", "out", "--log", "night.jsonl"], in: folder)
        #expect(edited.status == 0, "\(edited.stderr)")
        #expect(edited.stderr.contains("2 done"), "\(edited.stderr)")
        let log = try String(contentsOfFile: folder + "/night.jsonl", encoding: .utf8)
        #expect(
            log.contains(#""action":"metadata""#) && log.contains("photo changed, image data the same"), "\(log)")
        let report = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: folder + "/out/.thumbpipe/report.json"))) as? [String: Any])
        #expect((report["incremental"] as? [String: Any])?["decoded"] as? Int == 0, "nothing decoded")
        #expect(try Self.archive("out/items.archive", in: folder).keys.sorted() == ["IMG_2501", "Kirkjufell — Sunset"])
        #expect(try storeTimes() == storeBefore, "store files kept")
        // A fresh run agrees, byte for byte; the night after is quiet.
        let fresh = try runThumbpipe(["run", "photos", "-o", "fresh", "-q"], in: folder)
        #expect(fresh.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder + "/out/items.archive"))
                == Data(contentsOf: URL(fileURLWithPath: folder + "/fresh/items.archive")))
        let quiet = try runThumbpipe(["run", "photos", "-o", "out"], in: folder)
        #expect(quiet.stderr.contains("0 new, 0 changed, 2 unchanged, 0 removed; 0 decoded"), "\(quiet.stderr)")
        // Its pixels edited (another photo under the same name and title): redone, decoded.
        let other = try Data(contentsOf: URL(fileURLWithPath: TestPaths.fixture("photos/Canon-EOS-1000D.jpg")))
        try Self.withSegments(other, [(0xE1, xmp)]).write(to: URL(fileURLWithPath: folder + "/photos/IMG_2500.jpg"))
        let redone = try runThumbpipe(["run", "photos", "-o", "out", "--log", "redone.jsonl"], in: folder)
        #expect(redone.status == 0, "\(redone.stderr)")
        let redoneLog = try String(contentsOfFile: folder + "/redone.jsonl", encoding: .utf8)
        #expect(redoneLog.contains(#""action":"changed""#), "\(redoneLog)")
        let remade = try storeTimes().filter { storeBefore[$0.key] != $0.value }
        #expect(remade.count == 1, "its store file made again")
    }
}
