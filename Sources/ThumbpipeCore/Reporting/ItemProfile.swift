import Foundation

/// One decoded item's facts and times, for the report's slowest items and its
/// scatter of time against size.
public struct ItemProfile: Sendable, Codable {
    public var itemKey: String
    public var itemName: String
    public var line: Int
    /// The item's position in the archive (from 0), to find its thumbnail.
    public var position: Int?
    /// The image path as the manifest wrote it.
    public var source: String
    /// `JPEG`, `PNG`, `HEIF`…
    public var format: String
    public var width: Int
    public var height: Int
    /// The source's size in bytes.
    public var bytes: Int64
    /// How its store file was made (`planes` or `libvips`), when it was.
    public var path: String?
    /// Seconds per stage.
    public var stages: [String: Double]
    /// All stages' seconds.
    public var seconds: Double
    /// The item's thumbnail PNG, kept in memory by the run that made it (for
    /// its HTML report); never written to the JSON report.
    public var thumbnail: Data?

    public var megapixels: Double { Double(width) * Double(height) / 1e6 }

    private enum CodingKeys: String, CodingKey {
        case itemKey, itemName, line, position, source, format, width, height, bytes, path, stages, seconds
    }

    public init(
        itemKey: String, itemName: String, line: Int, position: Int?, source: String, format: String, width: Int,
        height: Int, bytes: Int64, path: String? = nil, stages: [String: Double], seconds: Double,
        thumbnail: Data? = nil
    ) {
        self.path = path
        self.itemKey = itemKey
        self.itemName = itemName
        self.line = line
        self.position = position
        self.source = source
        self.format = format
        self.width = width
        self.height = height
        self.bytes = bytes
        self.stages = stages
        self.seconds = seconds
        self.thumbnail = thumbnail
    }
}

/// One point of the report's scatter: an item's time, size and format.
public struct ItemSample: Sendable, Codable {
    public var seconds: Double
    public var megapixels: Double
    public var format: String

    public init(seconds: Double, megapixels: Double, format: String) {
        self.seconds = seconds
        self.megapixels = megapixels
        self.format = format
    }
}

/// Keeps the 20 slowest items and an even sample of at most 2,000, in memory
/// that does not grow with the run.
struct ProfileCollector: Sendable {
    static let slowestCount = 20
    static let sampleCount = 2000
    private(set) var slowest: [ItemProfile] = []
    private(set) var sample: [ItemSample] = []
    /// Every decoded item's time by format and size class.
    private(set) var groups = ProfileGroups()
    private var seen = 0
    private var generator = SplitMix(seed: 0x7468_756D_6270_6970)

    mutating func add(_ profile: ItemProfile) {
        groups.add(format: profile.format, path: profile.path, megapixels: profile.megapixels, seconds: profile.seconds)
        if slowest.count < Self.slowestCount || profile.seconds > slowest[slowest.count - 1].seconds {
            let at = slowest.firstIndex { $0.seconds < profile.seconds } ?? slowest.count
            slowest.insert(profile, at: at)
            if slowest.count > Self.slowestCount { slowest.removeLast() }
        }
        // Reservoir sampling (Algorithm R), with a fixed seed so reports repeat.
        seen += 1
        let point = ItemSample(
            seconds: StageTimings.round(profile.seconds), megapixels: StageTimings.round(profile.megapixels),
            format: profile.format)
        if sample.count < Self.sampleCount {
            sample.append(point)
        } else {
            let j = Int(generator.next() % UInt64(seen))
            if j < Self.sampleCount { sample[j] = point }
        }
    }

    /// A small, fast, seedable generator.
    struct SplitMix: Sendable {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}

/// One sample of a run over time: items archived and memory held.
public struct TimelinePoint: Sendable, Codable {
    /// Seconds since the run started.
    public var t: Double
    /// Items in the archive so far.
    public var items: Int
    /// Resident memory of the parent and its workers together.
    public var rssBytes: Int

    public init(t: Double, items: Int, rssBytes: Int) {
        self.t = t
        self.items = items
        self.rssBytes = rssBytes
    }
}

/// An item whose `dateCreated` is the file's modification time: a guess a migration should see.
public struct DateGuess: Sendable, Codable {
    public var itemKey: String
    public var line: Int
    public var source: String
    /// Why the file's time was used.
    public var reason: String
}

/// One line of `run --log FILE` (JSONL): what a run did with one item.
public struct ItemLogEntry: Sendable, Codable {
    public var itemKey: String
    public var itemName: String
    /// The manifest line (0 for a removed item).
    public var line: Int
    public var source: String
    /// What the run did with it.
    public var action: ItemAction
    /// Why, in a few words.
    public var reason: String
    /// The item's time in this run.
    public var milliseconds: Double
    /// A moved item's old key, when the photo moved to a new one (the app knows items by key).
    public var movedFrom: String?

    init(_ item: ManifestItem, action: ItemAction, reason: String, milliseconds: Double = 0) {
        itemKey = item.itemKey
        itemName = item.itemName
        line = item.line
        source = item.image ?? ""
        self.action = action
        self.reason = reason
        self.milliseconds = milliseconds
    }

    /// A removed item, by its last recorded name and source.
    public init(removed item: IncrementalPlan.RemovedItem) {
        itemKey = item.itemKey
        itemName = item.itemName
        line = 0
        source = item.source
        action = .removed
        reason = "not in the manifest"
        milliseconds = 0
    }
}
