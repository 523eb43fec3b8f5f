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

    /// Describes a part.
    public init(
        manifestHash: String, manifestItems: Int, settingsFingerprint: String, className: String,
        archiveFileName: String, shard: Int, shards: Int, positions: [Int]
    ) {
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
    public static func path(in folder: String) -> String { folder + "/.thumbpipe/shard.json" }

    /// The settings fingerprint of a pipeline.
    public static func fingerprint(_ settings: PipelineSettings) -> String {
        ContentHash.hex(
            IncrementalPlan.thumbnailFingerprint(settings) + IncrementalPlan.storeFingerprint(settings)
                + settings.archive.className + "|" + settings.archive.fileName)
    }

    /// Writes the file atomically.
    public func write(in folder: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try TemporaryFile.write(try encoder.encode(self), to: Self.path(in: folder))
    }

    /// Reads a part's file.
    /// - Throws: ``ThumbpipeError`` (66) when the folder is not a shard's output.
    public static func read(from folder: String) throws -> ShardInfo {
        let path = Self.path(in: folder)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ThumbpipeError(
                .noInput, "\(folder): not a shard's output (no .thumbpipe/shard.json; run it with --shard K/N)")
        }
        do {
            return try JSONDecoder().decode(ShardInfo.self, from: data)
        } catch {
            throw ThumbpipeError(.dataError, "\(path): not a valid shard description")
        }
    }
}
