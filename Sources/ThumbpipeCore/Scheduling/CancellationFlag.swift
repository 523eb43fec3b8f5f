import Foundation
import Synchronization

/// Set from a signal handler to stop a run at once.
public final class CancellationFlag: Sendable {
    private let flag = Atomic<Int32>(0)
    private let handlers = Mutex<[@Sendable () -> Void]>([])
    /// Creates an unset flag.
    public init() {}
    /// Requests a stop, recording the signal number, and runs the registered handlers.
    public func cancel(signal: Int32) {
        flag.store(signal, ordering: .relaxed)
        for handler in handlers.withLock({ $0 }) { handler() }
    }
    /// The signal that stopped the run, or 0.
    public var signal: Int32 { flag.load(ordering: .relaxed) }
    /// Runs `handler` on cancel (at once if already cancelled).
    func onCancel(_ handler: @escaping @Sendable () -> Void) {
        handlers.withLock { $0.append(handler) }
        if signal != 0 { handler() }
    }
}
