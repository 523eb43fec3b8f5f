import Foundation
import Synchronization

/// Callbacks from a run, called in manifest order from the thread that writes the archive.
public struct RunHooks: Sendable {
    /// Once per failed item.
    public var onFailure: (@Sendable (FailureRecord) -> Void)?
    /// Once per item made with decoder warnings.
    public var onWarning: (@Sendable (WarningRecord) -> Void)?
    /// As items are archived, with the number archived so far.
    public var onProgress: (@Sendable (Int) -> Void)?
    /// Once per item, in manifest order: what happened to it (for `--log`).
    public var onItem: (@Sendable (ItemLogEntry) -> Void)?

    /// Creates hooks.
    public init(
        onFailure: (@Sendable (FailureRecord) -> Void)? = nil, onWarning: (@Sendable (WarningRecord) -> Void)? = nil,
        onProgress: (@Sendable (Int) -> Void)? = nil, onItem: (@Sendable (ItemLogEntry) -> Void)? = nil
    ) {
        self.onFailure = onFailure
        self.onWarning = onWarning
        self.onProgress = onProgress
        self.onItem = onItem
    }
}
