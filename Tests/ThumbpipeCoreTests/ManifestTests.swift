import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("Manifest")
struct ManifestTests {
    func read(_ name: String, _ text: String) throws -> Manifest {
        let folder = TestPaths.temporaryFolder("manifest")
        return try Manifest.read(path: writeFile(folder, name, text))
    }

    func failure(_ name: String, _ text: String) -> ThumbpipeError? {
        do {
            _ = try read(name, text)
            return nil
        } catch let error as ThumbpipeError {
            return error
        } catch {
            return nil
        }
    }

    @Test("Dates are shown to the millisecond, rounded: .9999 carries into the next second")
    func dateMilliseconds() {
        let base = 1_577_871_000.0  // 2020-01-01T09:30:00Z
        #expect(ISO8601Format.string(Date(timeIntervalSince1970: base)) == "2020-01-01T09:30:00Z")
        #expect(ISO8601Format.string(Date(timeIntervalSince1970: base + 0.9999)) == "2020-01-01T09:30:01Z")
        #expect(ISO8601Format.string(Date(timeIntervalSince1970: base + 0.25)) == "2020-01-01T09:30:00.250Z")
        #expect(ISO8601Format.string(Date(timeIntervalSince1970: base - 0.001)) == "2020-01-01T09:29:59.999Z")
        #expect(ISO8601Format.string(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }

    @Test func jsonLinesWithDefaults() throws {
        let manifest = try read(
            "items.jsonl",
            """
            {"itemName": "Rusty Spork", "serialNumber": "A1", "valueInDollars": 12, "image": "photos/a.jpg"}

            {"itemName": "Gift Card", "dateCreated": "2019-07-21", "itemKey": "card-1"}
            """)
        #expect(manifest.items.count == 2)
        let spork = manifest.items[0]
        #expect(spork.line == 1)
        #expect(spork.itemName == "Rusty Spork")
        #expect(spork.serialNumber == "A1")
        #expect(spork.valueInDollars == 12)
        #expect(spork.dateCreated == nil)
        // RFC 4122 v5 in the URL namespace of "photos/a.jpg\0Rusty Spork" (checked with Python's uuid.uuid5).
        #expect(spork.itemKey == "0C3EA5F7-1B17-5C78-A9AA-777A029B6B47")
        #expect(spork.imagePath?.hasSuffix("/photos/a.jpg") == true)
        let card = manifest.items[1]
        #expect(card.line == 3)
        #expect(card.serialNumber == "")
        #expect(card.valueInDollars == 0)
        #expect(card.itemKey == "card-1")
        #expect(card.imagePath == nil)
        #expect(card.dateCreated == Date(timeIntervalSince1970: 1_563_667_200))
    }

    @Test func jsonArrayKeepsLines() throws {
        let manifest = try read(
            "items.json",
            """
            [
              {"itemName": "A", "valueInDollars": -5},
              {
                "itemName": "B",
                "image": "/abs/b.png"
              }
            ]
            """)
        #expect(manifest.items.map(\.line) == [2, 3])
        #expect(manifest.items[0].valueInDollars == -5)
        #expect(manifest.items[1].imagePath == "/abs/b.png")
    }

    @Test func csvWithQuotesAndNewlines() throws {
        let manifest = try read(
            "items.csv",
            "itemName,serialNumber,valueInDollars,image\r\n\"Spork, rusty\",\"A\"\"1\",12,a.jpg\r\n\"Two\nlines\",,,\r\nLast,Z,0,\r\n"
        )
        #expect(manifest.items.map(\.itemName) == ["Spork, rusty", "Two\nlines", "Last"])
        #expect(manifest.items.map(\.line) == [2, 3, 5])
        #expect(manifest.items[0].serialNumber == "A\"1")
        #expect(manifest.items[1].image == nil)
        #expect(manifest.items[1].valueInDollars == 0)
    }

    @Test func unknownFieldsWarnOncePerName() throws {
        let manifest = try read(
            "items.jsonl",
            """
            {"itemName": "A", "colour": "red"}
            {"itemName": "B", "colour": "blue", "size": 3}
            """)
        #expect(
            manifest.warnings == [
                "items.jsonl:1: unknown field 'colour' ignored", "items.jsonl:2: unknown field 'size' ignored",
            ])
    }

    @Test(arguments: [
        ("../x", false), ("/etc/passwd", false), ("a/b", false), (".hidden", false), ("-x", false),
        ("a\u{0}b", false), ("", false), (String(repeating: "k", count: 256), false),
        ("A", true), ("fluffy-mac", true), ("x.y_z-1", true), (String(repeating: "k", count: 255), true),
    ])
    func keySafety(key: String, safe: Bool) {
        #expect(ManifestItem.isSafeKey(key) == safe)
    }

    @Test(arguments: [
        (
            "items.jsonl", "{\"itemName\": \"A\"}\n{\"itemName\": \"B\", \"itemKey\": \"../x\"}",
            "items.jsonl:2: itemKey '../x' is not a safe file name"
        ),
        (
            "items.jsonl", "{\"itemName\": \"A\", \"itemKey\": \"k\"}\n\n{\"itemName\": \"B\", \"itemKey\": \"k\"}",
            "items.jsonl:3: itemKey 'k' is used twice, on lines 1 and 3"
        ),
        (
            "items.jsonl", "{\"itemName\": \"A\", \"valueInDollars\": 2147483648}",
            "items.jsonl:1: valueInDollars 2147483648 is out of range"
        ),
        (
            "items.jsonl", "{\"itemName\": \"A\", \"valueInDollars\": \"12\"}",
            "items.jsonl:1: valueInDollars must be an integer, found a string"
        ),
        (
            "items.jsonl", "{\"itemName\": \"A\", \"valueInDollars\": 1.5}",
            "items.jsonl:1: valueInDollars must be a whole number"
        ),
        ("items.jsonl", "{\"itemName\": 7}", "items.jsonl:1: itemName must be a string, found a number"),
        ("items.jsonl", "{\"serialNumber\": \"x\"}", "items.jsonl:1: itemName is required"),
        ("items.jsonl", "{\"itemName\": \"A\"}\n{\"itemName\": \"B\",}", "items.jsonl:2: invalid JSON"),
        (
            "items.jsonl", "{\"itemName\": \"A\", \"dateCreated\": \"yesterday\"}",
            "items.jsonl:1: dateCreated 'yesterday' is not an ISO 8601"
        ),
        ("items.json", "[\n{\"itemName\": \"A\"},\n\"B\"\n]", "items.json:3: expected an object, found a string"),
        ("items.csv", "itemName,image\nA,a.jpg\nB\n", "items.csv:3: row has 1 fields, the header has 2"),
        (
            "items.csv", "itemName,valueInDollars\nA,lots\n",
            "items.csv:2: valueInDollars must be a whole number, found 'lots'"
        ),
    ])
    func badManifests(name: String, text: String, expected: String) throws {
        let error = try #require(failure(name, text))
        #expect(error.kind == .dataError)
        #expect(error.message.hasPrefix(expected), "\(error.message)")
    }

    @Test func invalidUTF8IsRejectedWithItsLine() throws {
        let folder = TestPaths.temporaryFolder("manifest")
        let path = folder + "/items.jsonl"
        var bytes = Array("{\"itemName\": \"A\"}\n{\"itemName\": \"".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\"}\n".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(throws: ThumbpipeError.self) { try Manifest.read(path: path) }
        do {
            _ = try Manifest.read(path: path)
        } catch let error as ThumbpipeError {
            #expect(error.message.hasPrefix("items.jsonl:2: invalid JSON: invalid UTF-8"))
        }
    }

    @Test func missingManifestIsNoInput() {
        do {
            _ = try Manifest.read(path: "/nonexistent/items.jsonl")
            Issue.record("expected an error")
        } catch let error as ThumbpipeError {
            #expect(error.kind == .noInput)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test(
        "EXIF dates: the wall-clock time in the zone OffsetTimeOriginal names; without a valid offset, UTC",
        arguments: [
            ("+02:00 (+02:00, ASCII, 7 components, 7 bytes)", 1_571_589_270.0),
            ("-05:30", 1_571_616_270.0),
            ("+00:00", 1_571_596_470.0),
            ("   :  ", 1_571_596_470.0),
            ("+25:00", 1_571_596_470.0),
        ])
    func exifOffsets(offset: String, seconds: Double) throws {
        // 2019-10-20 18:34:30 on the camera's clock.
        let date = try #require(
            ISO8601.parseEXIF(
                "2019:10:20 18:34:30 (2019:10:20 18:34:30, ASCII, 20 components, 20 bytes)", offset: offset))
        #expect(date.timeIntervalSince1970 == seconds)
    }

    @Test(arguments: [
        ("2024-05-01", 1_714_521_600.0),
        ("2024-05-01T09:30:00Z", 1_714_555_800.0),
        ("2024-05-01T09:30:00.250+02:00", 1_714_548_600.25),
        ("2024-05-01 09:30", 1_714_555_800.0),
        ("2000-02-29T00:00:00-0130", 951_787_800.0),
    ])
    func isoDates(text: String, seconds: Double) throws {
        let date = try #require(ISO8601.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 1e-6)
    }

    @Test(arguments: [
        "2023-02-29", "2024-13-01", "2024-05-01T25:00", "20240501", "2024-05-01T09:30:00+", "2024-05-01X",
    ])
    func badISODates(text: String) {
        #expect(ISO8601.parse(text) == nil)
    }

    @Test("One rule for shown paths: relative to the manifest's folder inside it, absolute outside")
    func shownPaths() throws {
        let manifest = try Manifest.parse(
            Array(#"{"itemName": "A", "image": "a.jpg"}"#.utf8), fileName: "items.jsonl", folder: "/data/photos",
            type: "jsonl")
        #expect(manifest.folder == "/data/photos")
        #expect(manifest.shown("/data/photos/a.jpg") == "a.jpg")
        #expect(manifest.shown("/data/photos/2024/b.jpg") == "2024/b.jpg")
        #expect(manifest.shown("/data/photos/../other/c.jpg") == "/data/other/c.jpg")
        #expect(manifest.shown("/data/photosx/d.jpg") == "/data/photosx/d.jpg")
        #expect(manifest.shown("") == "")
    }
}

@Suite("Manifest fuzzing")
struct ManifestFuzzTests {
    static let seeds: [(String, String)] = [
        (
            "jsonl",
            """
            {"itemName": "Rusty Spork", "serialNumber": "A1", "valueInDollars": 12, "image": "a.jpg", "dateCreated": "2019-07-21T10:00:00Z"}
            {"itemName": "Café \\u00e9 ☕︎", "itemKey": "card-1", "valueInDollars": -3}
            """
        ),
        (
            "json",
            """
            [{"itemName": "A", "valueInDollars": 1, "image": "x/y.png"},
             {"itemName": "B", "serialNumber": "S\\"Q", "dateCreated": "2024-05-01"}]
            """
        ),
        ("csv", "itemName,serialNumber,valueInDollars,image\n\"Spork, rusty\",\"A\"\"1\",12,a.jpg\nB,,,\n"),
    ]

    @Test("10,000 mutated manifests: a manifest or a data error, never a crash or a hang")
    func mutatedManifests() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("{}[]\",:\\\n\r 0123456789-+.eEtrufalsn".utf8) + [0x00, 0xC3, 0xFF, 0x80]
        var parsed = 0
        var rejected = 0
        let started = Date()
        for round in 0..<10_000 {
            let (type, seed) = Self.seeds[round % Self.seeds.count]
            var bytes = Array(seed.utf8)
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                guard !bytes.isEmpty else { break }
                let i = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes[i] = alphabet[Int.random(in: alphabet.indices, using: &generator)]
                case 1: bytes.remove(at: i)
                case 2: bytes.insert(alphabet[Int.random(in: alphabet.indices, using: &generator)], at: i)
                default: bytes = Array(bytes.prefix(i))
                }
            }
            do {
                let manifest = try Manifest.parse(bytes, fileName: "m.\(type)", folder: "/tmp", type: type)
                #expect(manifest.items.allSatisfy { ManifestItem.isSafeKey($0.itemKey) })
                parsed += 1
            } catch let error as ThumbpipeError {
                #expect(error.kind == .dataError)
                #expect(error.message.hasPrefix("m.\(type):"), "\(error.message)")
                rejected += 1
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        #expect(parsed + rejected == 10_000)
        #expect(rejected > 1000 && parsed > 100)
        #expect(Date().timeIntervalSince(started) < 60)
    }
}
