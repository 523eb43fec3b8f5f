import Foundation

/// One shard of a manifest: the items whose `itemKey` hashes to it.
///
/// The hash is XXH64 (seed 0) of the key's UTF-8 bytes; an item belongs to
/// shard `hash % count`. Shards are numbered from 0, as Kubernetes completion
/// indexes and Slurm array task IDs usually are.
public struct Shard: Sendable, Equatable {
    /// This shard's number, 0 ..< count.
    public var index: Int
    /// How many shards there are.
    public var count: Int

    /// Parses `K/N`.
    /// - Throws: ``ThumbpipeError`` (64) unless 0 ≤ K < N.
    public init(parsing text: String) throws {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), n >= 1, n <= 100_000, k >= 0, k < n else {
            throw ThumbpipeError(.usage, "--shard takes K/N with 0 ≤ K < N (shards count from 0), not '\(text)'")
        }
        index = k
        count = n
    }

    /// The shard an item key belongs to, of `count`.
    public static func of(key: String, count: Int) -> Int {
        let hash = Array(key.utf8).withUnsafeBytes { ContentHash.xxh64($0) }
        return Int(hash % UInt64(count))
    }

    /// The items of `manifest` in this shard, in manifest order, with their positions in the full manifest.
    public func select(_ manifest: Manifest) -> (manifest: Manifest, positions: [Int]) {
        let positions = manifest.items.indices.filter {
            Self.of(key: manifest.items.itemKey(at: $0), count: count) == index
        }
        var part = manifest
        part.items = manifest.items.selecting(positions)
        return (part, positions)
    }
}

/// What a shard's partial output records about itself, so `merge` can check
/// and join the parts: `.thumbpipe/shard.json`.
public struct ShardInfo: Codable, Sendable, Equatable {
    /// Format version.
    public var version = 1
    /// XXH64 of the manifest file's bytes.
    public var manifestHash: String
    /// How many items the whole manifest has.
    public var manifestItems: Int
    /// Fingerprint of every setting that shapes the outputs.
    public var settingsFingerprint: String
    /// The archive's class and file name.
    public var className: String
    public var archiveFileName: String
    /// This part's shard and the shard count.
    public var shard: Int
    public var shards: Int
    /// The manifest positions of this part's items, ascending.
    public var positions: [Int]
    /// The run this part belongs to (`run --run-id`), so that `merge --run-id`
    /// never joins tonight's parts with one left from an earlier night.
    public var runId: String?
    /// The size and XXH64 of the part's archive, as its run wrote it: what binds this
    /// description to that archive (nil in descriptions of earlier versions).
    public var archiveBytes: Int64?
    public var archiveHash: String?

    /// Describes a part.
    public init(
        manifestHash: String, manifestItems: Int, settingsFingerprint: String, className: String,
        archiveFileName: String, shard: Int, shards: Int, positions: [Int], runId: String? = nil
    ) {
        self.runId = runId
        self.manifestHash = manifestHash
        self.manifestItems = manifestItems
        self.settingsFingerprint = settingsFingerprint
        self.className = className
        self.archiveFileName = archiveFileName
        self.shard = shard
        self.shards = shards
        self.positions = positions
    }

    /// The file's path in an output folder.

    /// The settings fingerprint of a pipeline.
    public static func fingerprint(_ settings: PipelineSettings) -> String {
        ContentHash.hex(
            IncrementalPlan.thumbnailFingerprint(settings) + IncrementalPlan.storeFingerprint(settings)
                + settings.fingerprintText(of: .archive))
    }

    /// Writes the file atomically.
    public func write(in output: OutputFolder) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try TemporaryFile.write(try encoder.encode(self), to: output.layout.shard)
    }

    /// Reads a part's file and checks it: thumbpipe wrote it, but a part folder is
    /// only as trustworthy as the shared volume it sits on.
    /// - Throws: ``ThumbpipeError``: 66 when the folder is not a shard's output, 65
    ///   when the file is not a valid shard description (with the reason).
    public static func read(from output: OutputFolder) throws -> ShardInfo {
        let folder = output.path
        let path = output.layout.shard
        guard FileInfo(path: path) != nil else {
            throw ThumbpipeError(
                .noInput, "\(folder): not a shard's output (no .thumbpipe/shard.json; run it with --shard K/N)")
        }
        // Eight bytes a position at most, for the largest manifest thumbpipe takes.
        guard let data = FileDescriptor.contents(ofRegularFile: path, limit: Int64(8 * Self.maxItems + 65_536)) else {
            throw ThumbpipeError(.dataError, "\(path): not a valid shard description (not a regular file of sane size)")
        }
        return try decode(data, path: path)
    }

    /// Decodes and checks a shard description's bytes (`path` names it in messages).
    /// - Throws: ``ThumbpipeError`` (65) with the reason.
    public static func decode(_ data: Data, path: String) throws -> ShardInfo {
        let decoded: ShardInfo
        do {
            decoded = try JSONDecoder().decode(ShardInfo.self, from: data)
        } catch {
            throw ThumbpipeError(.dataError, "\(path): not a valid shard description")
        }
        if let reason = decoded.problem {
            throw ThumbpipeError(.dataError, "\(path): not a valid shard description: \(reason)")
        }
        return decoded
    }

    /// The most items a manifest may have for a sharded run.
    static let maxItems = 100_000_000

    /// What is wrong with a decoded description, or nil.
    var problem: String? {
        if version != 1 { return "version \(version) (this thumbpipe reads 1)" }
        if !(1...100_000).contains(shards) { return "shards \(shards) (1 to 100000)" }
        if !(0..<shards).contains(shard) { return "shard \(shard) of \(shards)" }
        if !(0...Self.maxItems).contains(manifestItems) { return "manifestItems \(manifestItems)" }
        if !ManifestItem.isSafeKey(archiveFileName) {
            return "archiveFileName '\(archiveFileName)' is not a safe file name"
        }
        if className.isEmpty || className.utf8.count > 1024 { return "className is empty or too long" }
        if let runId, !RunIdentity.isValid(runId) { return "runId is not a valid run identity" }
        var previous = -1
        for position in positions {
            guard position > previous, position < manifestItems else {
                return "positions are not ascending manifest positions below \(manifestItems)"
            }
            previous = position
        }
        return nil
    }
}

/// `--run-id ID`: what ties the parts of one night's sharded run together.
public enum RunIdentity {
    /// 1 to 128 characters of letters, digits and `._:+-` (a Slurm job ID, a
    /// Kubernetes job name or generation, a date).
    public static func isValid(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128
            && id.unicodeScalars.allSatisfy {
                $0.isASCII
                    && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._:+-".unicodeScalars.contains($0))
            }
    }

    /// Checks a `--run-id` value.
    /// - Throws: ``ThumbpipeError`` (64) when it is not valid.
    public static func parse(_ id: String) throws -> String {
        guard isValid(id) else {
            throw ThumbpipeError(
                .usage, "--run-id takes 1 to 128 letters, digits and . _ : + -, not '\(id)'")
        }
        return id
    }
}
