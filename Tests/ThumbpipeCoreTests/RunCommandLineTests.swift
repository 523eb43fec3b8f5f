import Foundation
import Testing

@testable import ThumbpipeCore

/// `run`'s option table: one description an option parses, documents and is checked by.
@Suite("run's option table")
struct RunCommandLineTests {
    static func option(_ name: String) throws -> RunOptionDescription {
        try #require(RunOptionDescription.all.first { $0.names.contains(name) }, "no \(name)")
    }

    @Test("Every name once (the setting flags included), and every one in --help's OPTIONS")
    func namesAndHelp() {
        let names = RunOptionDescription.all.flatMap(\.names) + PipelineSettings.descriptions.compactMap(\.flag)
        #expect(Set(names).count == names.count, "a name given twice: \(names)")
        let help = RunOptionDescription.optionsHelp
        for name in names { #expect(help.contains(name), "\(name) is not in --help") }
        #expect(help.contains("-q, --quiet") && help.contains("-h, --help"))
        // The setting flags come just before --set, as the help always listed them.
        let set = try? #require(help.range(of: "  --set KEY=VALUE"))
        let scale = try? #require(help.range(of: "  --scale S"))
        if let set, let scale { #expect(scale.lowerBound < set.lowerBound) }
    }

    @Test("Options set the command line; bad values are refused with the option's name")
    func apply() throws {
        var line = RunCommandLine()
        try Self.option("-o").apply("nightly", to: &line)
        try Self.option("--jobs").apply("3", to: &line)
        try Self.option("--exit-on-failure").apply("new", to: &line)
        try Self.option("--sandbox").apply("off", to: &line)
        try Self.option("--set").apply("thumbnail.scale=3", to: &line)
        try Self.option("--set").apply("store.quality=0.9", to: &line)
        try Self.option("--no-html").apply("", to: &line)
        try Self.option("--shard").apply("1/4", to: &line)
        #expect(line.output == "nightly" && line.jobs == 3 && line.exitOnNewOnly && line.flags.sandbox == .off)
        #expect(line.overrides.map(\.key) == ["thumbnail.scale", "store.quality"])
        #expect(!line.flags.html && line.flags.shard?.index == 1 && line.flags.shard?.count == 4)
        let request = line.request(input: "items.jsonl", settings: PipelineSettings())
        #expect(
            request.output.path == "nightly" && request.jobs == 3 && !request.flags.html
                && request.flags.sandbox == .off)
        for (name, value, message) in [
            ("--jobs", "0x10", "--jobs must be a whole number from 1 to 256, not '0x10'"),
            ("--sandbox", "strict", "--sandbox takes required, auto or off, not 'strict'"),
            ("--exit-on-failure", "some", "--exit-on-failure takes any or new, not 'some'"),
            ("--set", "scale", "--set takes KEY=VALUE, not 'scale'"),
        ] {
            #expect(throws: ThumbpipeError.self) { try Self.option(name).apply(value, to: &line) }
            do {
                try Self.option(name).apply(value, to: &line)
            } catch let error as ThumbpipeError {
                #expect(error.message == message)
            }
        }
    }
}
