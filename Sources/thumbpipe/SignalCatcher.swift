import Dispatch
import Foundation
import Synchronization
import ThumbpipeCore

/// Catches signals from the moment it is made; once a run has started, passes
/// them on to its cancellation flag (and any that came earlier, at once).
final class SignalCatcher {
    private let sources: [any DispatchSourceSignal]
    private final class State: Sendable {
        let value = Mutex<(received: Int32, flag: CancellationFlag?)>((0, nil))
    }
    private let state = State()

    init(_ numbers: [Int32]) {
        var sources: [any DispatchSourceSignal] = []
        for number in numbers {
            // libdispatch delivers a signal to its source only when the default action is off.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        for (number, source) in zip(numbers, sources) {
            source.setEventHandler { [state] in
                let flag = state.value.withLock { state -> CancellationFlag? in
                    if state.received == 0 { state.received = number }
                    return state.flag
                }
                if let flag {
                    flag.cancel(signal: number)
                } else {
                    // Nothing written yet: stop as the shell expects.
                    exit(128 + number)
                }
            }
            source.resume()
        }
    }

    deinit { sources.forEach { $0.cancel() } }

    /// From now on, signals cancel `flag`.
    func forward(to flag: CancellationFlag) {
        let received = state.value.withLock { state -> Int32 in
            state.flag = flag
            return state.received
        }
        if received != 0 { flag.cancel(signal: received) }
    }
}
