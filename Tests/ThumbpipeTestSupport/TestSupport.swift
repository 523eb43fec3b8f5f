import CReferenceVips
import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeCore

/// Paths of the repository, the shared corpus and the built executable.
public enum TestPaths {
    /// The repository root (the folder holding Package.swift).
    public static let repository: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no Package.swift above \(#filePath)")
    }()

    /// `Tests/Fixtures`: the real images every test reads (see its SOURCES.tsv).
    public static let fixtures = repository.appendingPathComponent("Tests/Fixtures")

    /// A fixture file, e.g. `photos/Nikon-D3100.jpg`. Its absence fails the calling test
    /// (with the path) when the test opens it.
    public static func fixture(_ relative: String) -> String { fixtures.appendingPathComponent(relative).path }

    /// Every fixture in a folder, sorted.
    public static func fixtureFiles(_ folder: String) -> [String] {
        let dir = fixtures.appendingPathComponent(folder).path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.sorted().filter { !$0.hasPrefix(".") }.map { "\(folder)/\($0)" }
    }

    /// The opt-in corpus sweep's folder: `THUMBPIPE_CORPUS`, or nil when the variable is not set.
    public static var corpusFolder: String? {
        guard let value = ProcessInfo.processInfo.environment["THUMBPIPE_CORPUS"], !value.isEmpty else { return nil }
        return URL(fileURLWithPath: value).standardizedFileURL.path
    }

    /// Every file of the corpus named by `THUMBPIPE_CORPUS` in `folders`, as absolute paths.
    /// Throws when the variable is set but the folder is missing or holds no file, so an
    /// opt-in sweep can never turn into zero test cases.
    public static func corpusFiles(_ folders: [String]) throws -> [String] {
        guard let root = corpusFolder else { return [] }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw TestImageError(message: "THUMBPIPE_CORPUS=\(root) is not a folder")
        }
        let files = folders.flatMap { folder -> [String] in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + folder)) ?? []
            return names.sorted().filter { !$0.hasPrefix(".") }.map { root + "/" + folder + "/" + $0 }
        }
        if files.isEmpty { throw TestImageError(message: "THUMBPIPE_CORPUS=\(root) holds no file in \(folders)") }
        return files
    }

    /// The `thumbpipe` executable built for the tests.
    public static let executable: String = {
        var candidates: [String] = []
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        candidates.append(runner.appendingPathComponent("thumbpipe").path)
        candidates.append(runner.deletingLastPathComponent().appendingPathComponent("thumbpipe").path)
        candidates.append(repository.appendingPathComponent(".build/debug/thumbpipe").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[candidates.count - 1]
    }()

    /// A fresh, empty temporary folder, inside the test process's own scratch folder
    /// (``TestScratch``), which goes when the process exits.
    public static func temporaryFolder(_ label: String = "test") -> String {
        let path = TestScratch.root + "/\(label)-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            Issue.record("cannot create \(path): \(error)")
        }
        return path
    }
}

/// One folder per test process, `$TMPDIR/thumbpipe-tests-PID`, that holds every folder the
/// tests make: removed when the process exits, and, when a run was killed before it could,
/// by the next run (its process is gone). Without it the tests' folders piled up in the
/// temporary folder (74,697 of them, 47 GB, over a few days' runs) until the disk filled.
public enum TestScratch {
    private static let prefix = "thumbpipe-tests-"

    /// The scratch folder of the test process `pid`.
    private static func folder(of pid: pid_t) -> String { NSTemporaryDirectory() + prefix + "\(pid)" }

    /// The folder, made (and the leftovers of dead test processes removed) on first use.
    public static let root: String = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())) ?? []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { remove(folder(of: pid)) }
        }
        let path = folder(of: getpid())
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            Issue.record("cannot create \(path): \(error)")
        }
        atexit { TestScratch.remove(TestScratch.folder(of: getpid())) }
        return path
    }()

    private static func remove(_ path: String) {
        // Folders a test took permissions from would stop the removal, and names that are
        // not UTF-8 stop FileManager's: rm and chmod take any name (and chmod -R passes
        // links by, never through them).
        let script = #"chmod -R u+rwX "$1" 2>/dev/null; rm -rf "$1""#
        let words: [String] = ["/bin/sh", "-c", script, "sh", path]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        guard posix_spawn(&child, "/bin/sh", nil, nil, argv, environ) == 0 else { return }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
    }
}

/// Starts libvips once before a suite's tests run.
public struct VipsStarted: SuiteTrait, TestScoping {
    public init() {}
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try LibVips.start()
        try await function()
    }
}

extension Trait where Self == VipsStarted {
    /// Starts libvips once for the suite.
    public static var vipsStarted: VipsStarted { VipsStarted() }
}

/// A fully decoded image, for checks: every pixel read, with the given strictness.
public struct DecodedTestImage: Sendable {
    public var width: Int
    public var height: Int
    public var bands: Int
    public var orientation: Int
    public var loader: String
    public var interpretation: String
    /// 8-bit samples, row by row, `bands` per pixel.
    public var pixels: [UInt8]

    /// Decodes a file through libvips (fail_on=error), optionally applying its EXIF
    /// orientation, and with `lcms` converted from its embedded profile to sRGB by lcms
    /// (libvips's `icc_transform`, relative intent): the reference a store is held to.
    public static func load(_ path: String, autorotate: Bool = false, failOn: Int32 = 2, lcms: Bool = false) throws
        -> DecodedTestImage
    {
        try LibVips.start()
        var image: UnsafeMutablePointer<VipsImage>? = nil
        guard CVipsShim_load(path, 1, 1, failOn, 0, &image) == 0, var current = image else {
            throw TestImageError(message: "cannot load \(path): \(errorText())")
        }
        let loader = CVipsShim_get_string(current, "vips-loader").map { String(cString: $0) } ?? "?"
        let orientation = Int(CVipsShim_get_int(current, "orientation", 1))
        let interpretation = String(
            cString: vips_enum_nick(
                vips_interpretation_get_type(), Int32(vips_image_get_interpretation(current).rawValue)))
        defer { CVipsShim_unref(current) }
        if lcms {
            var converted: UnsafeMutablePointer<VipsImage>? = nil
            guard CVipsShim_icc_to_srgb(current, &converted, "srgb") == 0, let converted else {
                throw TestImageError(message: "icc_transform failed: \(errorText())")
            }
            CVipsShim_unref(current)
            current = converted
        }
        if autorotate {
            var rotated: UnsafeMutablePointer<VipsImage>? = nil
            guard CVipsShim_autorot(current, &rotated) == 0, let rotated else {
                throw TestImageError(message: "autorot failed: \(errorText())")
            }
            CVipsShim_unref(current)
            current = rotated
        }
        if vips_image_get_format(current) != VIPS_FORMAT_UCHAR {
            var cast: UnsafeMutablePointer<VipsImage>? = nil
            guard CVipsShim_cast_uchar(current, &cast, 1) == 0, let cast else {
                throw TestImageError(message: "cast failed: \(errorText())")
            }
            CVipsShim_unref(current)
            current = cast
        }
        var size = 0
        guard let memory = vips_image_write_to_memory(current, &size) else {
            throw TestImageError(message: "decode of \(path) failed: \(errorText())")
        }
        defer { g_free(memory) }
        return DecodedTestImage(
            width: Int(vips_image_get_width(current)), height: Int(vips_image_get_height(current)),
            bands: Int(vips_image_get_bands(current)), orientation: orientation, loader: loader,
            interpretation: interpretation,
            pixels: [UInt8](UnsafeRawBufferPointer(start: memory, count: size)))
    }

    /// Decodes PNG bytes.
    public static func load(png: Data) throws -> DecodedTestImage {
        let path = TestPaths.temporaryFolder("png") + "/t.png"
        try png.write(to: URL(fileURLWithPath: path))
        return try load(path)
    }

    /// The samples of the pixel at (x, y).
    public subscript(x: Int, y: Int) -> [UInt8] {
        let i = (y * width + x) * bands
        return Array(pixels[i..<i + bands])
    }

    static func errorText() -> String {
        guard let buffer = vips_error_buffer_copy() else { return "" }
        defer { g_free(buffer) }
        return String(cString: buffer).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

public struct TestImageError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The result of running the `thumbpipe` executable.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs the built `thumbpipe` with `arguments`, capturing its output.
public func runThumbpipe(_ arguments: [String], environment: [String: String] = [:], in directory: String? = nil)
    throws -> ProcessResult
{
    try runProcess(TestPaths.executable, arguments, environment: environment, in: directory)
}

/// Starts the built `thumbpipe` in the background (output discarded), for tests
/// that act on a run while it is running: kill it, signal it, race it.
public func startThumbpipe(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: TestPaths.executable)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    process.environment = env
    process.standardError = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    return process
}

/// Runs a program to completion, capturing its output.
/// With `inheriting: false`, the program sees `environment` and nothing else.
public func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], in directory: String? = nil,
    inheriting: Bool = true
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var env = inheriting ? ProcessInfo.processInfo.environment : [:]
    for (key, value) in environment { env[key] = value }
    process.environment = env
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    // Files, not pipes: a chatty child can never block on a full pipe.
    let folder = TestPaths.temporaryFolder("proc")
    FileManager.default.createFile(atPath: folder + "/out", contents: nil)
    FileManager.default.createFile(atPath: folder + "/err", contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/out"))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/err"))
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    try out.close()
    try err.close()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    return ProcessResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOfFile: folder + "/out", encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: folder + "/err", encoding: .utf8)) ?? "")
}

/// Writes `text` to `folder/name` and returns the path.
@discardableResult
public func writeFile(_ folder: String, _ name: String, _ text: String) -> String {
    let path = folder + "/" + name
    do {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    } catch {
        Issue.record("cannot write \(path): \(error)")
    }
    return path
}

/// Header fields of an image file as text (vips_image_get_fields / vips_image_get_as_string).
public func imageFields(_ path: String) throws -> [String: String] {
    try LibVips.start()
    var image: UnsafeMutablePointer<VipsImage>? = nil
    guard CVipsShim_load(path, 1, 1, 0, 1, &image) == 0, let image else {
        throw TestImageError(message: "cannot open \(path)")
    }
    defer { CVipsShim_unref(image) }
    var result: [String: String] = [:]
    guard let fields = vips_image_get_fields(image) else { return result }
    defer { g_strfreev(fields) }
    var i = 0
    while let name = fields[i] {
        var value: UnsafeMutablePointer<CChar>? = nil
        if vips_image_get_as_string(image, name, &value) == 0, let value {
            result[String(cString: name)] = String(cString: value)
            g_free(value)
        }
        i += 1
    }
    return result
}

/// Peak signal-to-noise ratio in dB between two equal-sized 8-bit sample arrays.
public func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
    precondition(a.count == b.count)
    var sum = 0.0
    for i in 0..<a.count {
        let d = Double(a[i]) - Double(b[i])
        sum += d * d
    }
    let mse = sum / Double(a.count)
    return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
}

/// Runs a manifest through the library and returns the output folder and result.
public func runManifest(
    _ items: [ManifestItem], settings: PipelineSettings = PipelineSettings(), jobs: Int = 2, folder: String? = nil
) throws -> (output: String, result: RunReport) {
    let output = folder ?? TestPaths.temporaryFolder("run")
    let manifest = Manifest(
        path: output + "/items.jsonl", items: items, warnings: [],
        modificationDate: Date(timeIntervalSince1970: 1_000_000_000))
    let runner = BatchRunner(
        manifest: manifest, settings: settings,
        options: RunOptions(output: OutputFolder(output), jobs: jobs, workerExecutable: TestPaths.executable))
    let result = try runner.run()
    return (output, result)
}

/// A manifest item over a fixture, keyed by its index.
public func fixtureItem(_ relative: String, index: Int, line: Int? = nil) -> ManifestItem {
    ManifestItem(
        line: line ?? index + 1, itemName: "Item \(index) \(relative)", serialNumber: "SN\(index)",
        valueInDollars: Int32(index * 10), itemKey: "item-\(index)", image: relative,
        imagePath: TestPaths.fixture(relative))
}

/// The fidelity reference for `path` at `width × height`: premultiplied RGBA
/// samples (0…255) from `reference_thumbnail`, which calls libvips directly and
/// shares no code with ThumbpipeCore.
public func referenceThumbnail(_ path: String, width: Int, height: Int) throws -> [Double] {
    var pixels: UnsafeMutablePointer<Float>? = nil
    var error = [CChar](repeating: 0, count: 1024)
    guard reference_thumbnail(path, Int32(width), Int32(height), &pixels, &error, error.count) == 0, let pixels else {
        let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw TestImageError(message: "reference of \(path) failed: \(message)")
    }
    defer { reference_free(pixels) }
    return (0..<(width * height * 4)).map { Double(pixels[$0]) }
}

/// A JSON object read from a file; a missing file or a non-object fails the test with the path.
public func readJSONObject(_ path: String) throws -> [String: Any] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(path) is not a JSON object")
}

extension Dictionary where Key == String, Value == Any {
    /// The object under `key`, or a failed requirement naming the key.
    public func object(_ key: String) throws -> [String: Any] {
        try #require(self[key] as? [String: Any], "\(key) is not an object")
    }

    /// The array of objects under `key`, or a failed requirement naming the key.
    public func objects(_ key: String) throws -> [[String: Any]] {
        try #require(self[key] as? [[String: Any]], "\(key) is not an array of objects")
    }

    /// The integers of the object under `key`.
    public func counts(_ key: String) throws -> [String: Int] {
        try object(key).compactMapValues { $0 as? Int }
    }
}

/// Makes a test image from a fixture: scaled and centre-cropped to exactly
/// `width × height`, written to `destination` (suffix options as libvips takes them).
public func makeTestImage(from source: String, to destination: String, width: Int, height: Int) throws {
    var error = [CChar](repeating: 0, count: 1024)
    guard reference_make_image(source, destination, Int32(width), Int32(height), &error, error.count) == 0 else {
        let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw TestImageError(message: "cannot make \(destination): \(message)")
    }
}

/// Makes a test image in another encoding (`reference_convert`): `source`
/// converted by libvips to `interpretation`, with an opaque alpha when asked.
public func convertTestImage(from source: String, to destination: String, interpretation: String, alpha: Bool = false)
    throws
{
    var error = [CChar](repeating: 0, count: 1024)
    guard reference_convert(source, destination, interpretation, alpha ? 1 : 0, &error, error.count) == 0 else {
        let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        throw TestImageError(message: "cannot make \(destination): \(message)")
    }
}

/// A fresh folder holding copies of fixture photos under new names, and a JSONL
/// manifest over them (one item per photo, in order; a nil key lets thumbpipe derive it).
/// - Parameter photos: the file name in the folder, the fixture under `Tests/Fixtures/photos`,
///   the item's name and key.
public func photoCollection(
    _ label: String, _ photos: [(name: String, fixture: String, itemName: String, key: String?)]
) throws -> (folder: String, manifest: String) {
    let folder = TestPaths.temporaryFolder(label)
    var lines: [String] = []
    for photo in photos {
        try FileManager.default.copyItem(
            atPath: TestPaths.fixture("photos/" + photo.fixture), toPath: folder + "/" + photo.name)
        let key = photo.key.map { #", "itemKey": "\#($0)""# } ?? ""
        lines.append(#"{"itemName": "\#(photo.itemName)", "image": "\#(photo.name)"\#(key)}"#)
    }
    return (folder, writeFile(folder, "items.jsonl", lines.joined(separator: "\n") + "\n"))
}

/// The uid a run's workers run as: the tests' own, or nobody's (65534) when the
/// tests run as root (a worker never keeps uid 0).
public var workerUID: uid_t { getuid() == 0 ? 65534 : getuid() }

/// Lets a run's workers write in `folder` (a fault hook's marker folder): they
/// run as ``workerUID``, which is not the tests' own when the tests run as root.
public func writableByWorkers(_ folder: String) {
    if chmod(folder, 0o777) != 0 { Issue.record("cannot chmod \(folder): \(errno)") }
}
