import Foundation

/// One item that could not be processed.
public struct FailureRecord: Sendable, Codable {
    /// The manifest line of the item.
    public var line: Int
    /// The item's key.
    public var itemKey: String
    /// The item's name.
    public var itemName: String
    /// The image path as the manifest wrote it.
    public var source: String
    /// The stage that failed.
    public var stage: FailureStage
    /// Why.
    public var message: String
    /// Its source is missing and its last good outputs were kept (a failure of
    /// its own kind: nothing was lost, but the source needs looking after).
    public var kept: Bool? = nil
    /// It failed the same way in an earlier run (same source stamp, same settings;
    /// for a kept item, its source was already missing): no news for a nightly job.
    public var known: Bool? = nil

    public init(line: Int, itemKey: String, itemName: String, source: String, stage: FailureStage, message: String) {
        self.line = line
        self.itemKey = itemKey
        self.itemName = itemName
        self.source = source
        self.stage = stage
        self.message = message
    }
}
