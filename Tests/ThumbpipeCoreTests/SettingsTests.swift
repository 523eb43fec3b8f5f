import Foundation
import Testing

@testable import ThumbpipeCore

/// The settings table: one description per setting drives parsing, flags, the
/// summary and the fingerprints, so no setting can be left out of them.
@Suite("Settings: one description per setting")
struct SettingsTests {
    /// The fingerprints a setting can move.
    struct Prints: Equatable {
        var thumbnail, store, failure, shard: String

        init(_ settings: PipelineSettings) {
            thumbnail = IncrementalPlan.thumbnailFingerprint(settings)
            store = IncrementalPlan.storeFingerprint(settings)
            failure = IncrementalPlan.failureFingerprint(settings)
            shard = ShardInfo.fingerprint(settings)
        }
    }

    @Test("Every setting, changed, moves exactly the fingerprints of what it shapes")
    func everySettingMovesItsFingerprints() throws {
        let seed = PipelineSettings()
        let before = Prints(seed)
        var walked: [String] = []
        for setting in PipelineSettings.descriptions {
            // Its value is part of every fingerprint of what it shapes.
            for output in setting.shapes {
                #expect(seed.fingerprintText(of: output).contains("\(setting.key)="), "\(setting.key) in \(output)")
            }
            #expect(!setting.shapes.isEmpty, "\(setting.key) shapes nothing")
            // A setting with one valid value (thumbnail.format: png) cannot be changed.
            guard setting.examples.count > 1 else { continue }
            var changed = seed
            for example in setting.examples where setting.value(in: changed) == setting.value(in: seed) {
                try changed.set(setting.key, example, at: "test")
            }
            #expect(setting.value(in: changed) != setting.value(in: seed), "\(setting.key): no example changes it")
            try changed.validate(at: "test")
            let after = Prints(changed)
            let thumbnail = setting.shapes.contains(.thumbnail)
            #expect((after.thumbnail != before.thumbnail) == thumbnail, "\(setting.key): thumbnail fingerprint")
            #expect((after.store != before.store) == setting.shapes.contains(.store), "\(setting.key): store")
            #expect(
                (after.failure != before.failure) == (thumbnail || setting.shapes.contains(.failure)),
                "\(setting.key): failure fingerprint")
            // Parts of one run must agree on what shapes outputs; a limit may differ.
            #expect(
                (after.shard != before.shard) == !setting.shapes.isDisjoint(with: [.thumbnail, .store, .archive]),
                "\(setting.key): a part's settings fingerprint")
            walked.append(setting.key)
        }
        #expect(walked.count == PipelineSettings.descriptions.count - 1, "all but thumbnail.format: \(walked)")
    }

    @Test("Every setting a pipeline file spells out is described, and read back to the same settings")
    func pipelineFileRoundTrip() throws {
        var settings = PipelineSettings()
        settings.thumbnail.scale = 3
        settings.limits.formats = [.png, .jpeg, .jxl]
        settings.store.quality = 0.8
        let json = String(decoding: try settings.pipelineFileJSON(), as: UTF8.self)
        guard case .object(let sections, _) = try JSONParser.parse(Array(json.utf8)) else {
            Issue.record("not an object")
            return
        }
        var keys: [String] = []
        for section in sections {
            guard case .object(let members, _) = section.value else { continue }
            keys += members.map { "\(section.key).\($0.key)" }
        }
        #expect(Set(keys) == Set(PipelineSettings.descriptions.map(\.key)), "described settings = file settings")
        let read = try #require(PipelineSettings(recorded: json))
        #expect(read.summary.map(\.value) == settings.summary.map(\.value))
        #expect(read.limits.formats.names == "jpeg,png,jxl", "a set, written in one order")
    }

    @Test("Formats are parsed once into a set; unknown names and empty lists are refused")
    func formats() throws {
        var settings = PipelineSettings()
        try settings.set("limits.formats", .string("PNG, jpeg,png"), at: "test")
        #expect(settings.limits.formats == [.jpeg, .png])
        #expect(throws: ThumbpipeError.self) { try settings.set("limits.formats", .string("jpeg,bmp"), at: "test") }
        #expect(throws: ThumbpipeError.self) { try settings.set("limits.formats", .string(""), at: "test") }
        #expect(throws: ThumbpipeError.self) { try settings.set("thumbnail.colour", .string("red"), at: "test") }
        // A flag takes the 1–100 quality too; a file only 0–1 (validated).
        try settings.set("store.quality", .number("80"), at: "test", origin: .flag)
        #expect(settings.store.quality == 0.8)
    }

    @Test("A setting past 2^53 is refused at start: its run's report could not be read back (ReportBounds)")
    func settingsWithinReportBounds() throws {
        let cases: [(String, (inout PipelineSettings) -> Void)] = [
            ("thumbnail.cornerRadius", { $0.thumbnail.cornerRadius = 1e16 }),
            ("limits.maxPixels", { $0.limits.maxPixels = 9_000_000_000_000_000_000 }),
            ("limits.maxFileBytes", { $0.limits.maxFileBytes = 9_007_199_254_740_994 }),
            ("limits.workerMemoryBytes", { $0.limits.workerMemoryBytes = .max }),
        ]
        for (name, change) in cases {
            var settings = PipelineSettings()
            change(&settings)
            #expect(throws: ThumbpipeError(.dataError, "test: \(name) must be at most 2^53 (9007199254740992)")) {
                try settings.validate(at: "test")
            }
        }
        var largest = PipelineSettings()
        largest.thumbnail.cornerRadius = 1e6
        largest.limits.maxPixels = 1 << 53
        largest.limits.maxFileBytes = 1 << 53
        try largest.validate(at: "test")
        var report = RunReport()
        report.settings = largest
        #expect(throws: Never.self) { try RunReport.decoded(try JSONEncoder().encode(report)) }
    }

    @Test("The run's flag table lists every setting that has a flag, with its help")
    func flagHelp() {
        let help = PipelineSettings.flagHelp
        for setting in PipelineSettings.descriptions {
            guard let flag = setting.flag else { continue }
            #expect(help.contains("  \(flag) \(setting.flagValue) "), "\(flag)")
        }
    }
}
