import Foundation

/// Where `--pipeline NAME` finds its settings: pipeline files in a fixed list of
/// folders, then the pipelines compiled into the binary.
///
/// The folders, in order: `./pipelines`, `$THUMBPIPE_PIPELINES`,
/// `$XDG_CONFIG_HOME/thumbpipe/pipelines` (default `~/.config/thumbpipe/pipelines`),
/// `/etc/thumbpipe/pipelines`, and `<prefix>/share/thumbpipe/pipelines` of the
/// installed binary (`<prefix>/bin/thumbpipe`). The first `NAME.json` found wins;
/// a name no folder holds falls back to a built-in pipeline (`homepwner`), so the
/// binary works alone, from any folder.
public struct PipelineCatalog: Sendable {
    /// The folders searched, in order.
    public var folders: [String]

    /// The pipelines every build carries: `homepwner` is the seed's defaults.
    public static let builtIn: [String: PipelineSettings] = ["homepwner": PipelineSettings()]

    /// The name `run` uses without `--pipeline`.
    public static let defaultName = "homepwner"

    /// The catalog for this process: its working folder, environment and executable.
    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingFolder: String = FileSystem.currentFolder,
        executable: String = RunOptions.currentExecutable
    ) {
        var folders = [workingFolder + "/pipelines"]
        if let env = environment["THUMBPIPE_PIPELINES"], !env.isEmpty { folders.append(env) }
        let configHome =
            environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()) + "/.config")
        folders.append(configHome + "/thumbpipe/pipelines")
        folders.append("/etc/thumbpipe/pipelines")
        // <prefix>/bin/thumbpipe → <prefix>/share/thumbpipe/pipelines
        let prefix = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
            .deletingLastPathComponent()
        folders.append(prefix.appendingPathComponent("share/thumbpipe/pipelines").path)
        var seen = Set<String>()
        self.folders = folders.filter { seen.insert(URL(fileURLWithPath: $0).standardizedFileURL.path).inserted }
    }

    /// A catalog over exactly these folders (for tests).
    public init(folders: [String]) { self.folders = folders }

    /// Where a pipeline's settings came from.
    public enum Origin: Sendable, Equatable, CustomStringConvertible {
        /// A pipeline file.
        case file(String)
        /// Compiled into the binary.
        case builtIn

        public var description: String {
            switch self {
            case .file(let path): path
            case .builtIn: "built in"
            }
        }
    }

    /// Resolves `--pipeline NAME|FILE`: a value with a `/` or ending in `.json` is a
    /// path; anything else a name looked up in ``folders``, then among the built-ins.
    /// - Returns: the settings (validated) and where they came from.
    /// - Throws: ``ThumbpipeError``: 66 when nothing has that name (the message lists
    ///   every folder tried), 65 for a pipeline file with a wrong setting.
    public func resolve(_ nameOrPath: String) throws -> (settings: PipelineSettings, origin: Origin) {
        if nameOrPath.hasSuffix(".json") || nameOrPath.contains("/") {
            guard FileSystem.exists(nameOrPath) else {
                throw ThumbpipeError(.noInput, "\(nameOrPath): pipeline file not found")
            }
            return (try PipelineSettings.load(path: nameOrPath), .file(nameOrPath))
        }
        guard ManifestItem.isSafeKey(nameOrPath) else {
            throw ThumbpipeError(.usage, "'\(nameOrPath)' is not a pipeline name (a file name without .json)")
        }
        if let path = file(named: nameOrPath) {
            return (try PipelineSettings.load(path: path), .file(path))
        }
        if let settings = Self.builtIn[nameOrPath] { return (settings, .builtIn) }
        throw ThumbpipeError(
            .noInput,
            "pipeline '\(nameOrPath)' not found: no \(nameOrPath).json in \(folders.joined(separator: ", ")), and no built-in pipeline of that name (built in: \(Self.builtIn.keys.sorted().joined(separator: ", "))); pass a file's path to use another"
        )
    }

    /// The first `NAME.json` in ``folders``.
    public func file(named name: String) -> String? {
        folders.lazy.map { $0 + "/" + name + ".json" }.first { FileSystem.exists($0) }
    }

    /// Every pipeline by name, with the one a lookup would pick.
    public func all() -> [(name: String, origin: Origin)] {
        var names = Set(Self.builtIn.keys)
        for folder in folders {
            for entry in FileSystem.textNames(in: folder)
            where entry.hasSuffix(".json") && !entry.hasPrefix(".") {
                names.insert(String(entry.dropLast(5)))
            }
        }
        return names.sorted().map { name in (name, file(named: name).map(Origin.file) ?? .builtIn) }
    }
}

extension PipelineSettings {
    /// The settings as `pipeline show` prints them: a pipeline file with every
    /// setting spelled out in the documented order (thumbnail, store, archive,
    /// limits; each section's settings as the user guide lists them), one a line
    /// as `"key": value`, and no `name` (a copy is named by its file), so that
    /// editing a value by hand or with sed (`"scale": 3`) does what it says.
    public func pipelineFileText() throws -> String {
        guard let object = try JSONSerialization.jsonObject(with: try pipelineFileJSON()) as? [String: Any] else {
            throw ThumbpipeError(.software, "the settings are not a JSON object")
        }
        var sections: [(String, [String])] = []
        for description in Self.descriptions {
            let parts = description.key.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            if sections.last?.0 != parts[0] { sections.append((parts[0], [])) }
            sections[sections.count - 1].1.append(parts[1])
        }
        func literal(_ value: Any) throws -> String {
            let data = try JSONSerialization.data(withJSONObject: [value], options: [.withoutEscapingSlashes])
            // One value inside `[` … `]`: arrays stay on one line, numbers keep JSON's spelling.
            return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast()).replacingOccurrences(
                of: ",", with: ", ")
        }
        var text = "{\n"
        for (index, (section, keys)) in sections.enumerated() {
            let members = object[section] as? [String: Any] ?? [:]
            text += "  \"\(section)\": {\n"
            let present = keys.filter { members[$0] != nil }
            for (k, key) in present.enumerated() {
                text += "    \"\(key)\": \(try literal(members[key]!))\(k == present.count - 1 ? "" : ",")\n"
            }
            text += "  }\(index == sections.count - 1 ? "" : ",")\n"
        }
        return text + "}"
    }

    /// The settings as a pipeline file: every setting spelled out, keys sorted, so
    /// that a copy is a complete starting point for one's own pipeline.
    public func pipelineFileJSON() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }
}
