import Foundation
import Synchronization

/// One item that was made, but whose decoders warned (corrupt data, bad CRCs…).
public struct WarningRecord: Sendable, Codable {
    /// The item's key.
    public var itemKey: String
    /// The manifest line of the item.
    public var line: Int
    /// The image path as the manifest wrote it.
    public var source: String
    /// The decoders' messages, each once.
    public var messages: [String]

    public init(itemKey: String, line: Int, source: String, messages: [String]) {
        self.itemKey = itemKey
        self.line = line
        self.source = source
        self.messages = messages
    }
}
