import CVips
import Foundation
import Synchronization

/// Stops libvips work that runs past `limits.timeoutSeconds`: while an image is
/// being computed, a watchdog thread sets libvips's kill flag on it
/// (vips_image_set_kill) once the task's deadline passes, and libvips stops at
/// its next tile with an error.
final class Watchdog: Sendable {
    private struct Watch {
        var image: VImage
        var deadline: UInt64
    }
    private let watches = Mutex<[Int: Watch]>([:])
    private let nextToken = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)

    /// The task deadline of the calling thread (nanoseconds of the monotonic clock), if any.
    nonisolated(unsafe) private static var deadlineKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    static let shared = Watchdog()

    /// Runs `body` with a deadline `seconds` from now for every libvips
    /// computation it starts on this thread; 0 or less means none.
    static func withDeadline<T>(seconds: Double, _ body: () throws -> T) rethrows -> T {
        guard seconds > 0 else { return try body() }
        let deadline = Spans.now + UInt64(seconds * 1e9)
        let boxed = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
        boxed.pointee = deadline
        pthread_setspecific(deadlineKey, boxed)
        defer {
            pthread_setspecific(deadlineKey, nil)
            boxed.deallocate()
        }
        return try body()
    }

    /// The calling thread's deadline, if it runs under one.
    static var currentDeadline: UInt64? {
        pthread_getspecific(deadlineKey).map { $0.assumingMemoryBound(to: UInt64.self).pointee }
    }

    /// Whether the calling thread's deadline has passed.
    static var expired: Bool { currentDeadline.map { Spans.now >= $0 } ?? false }

    /// Computes `image` through `body`, killing it if the thread's deadline passes first.
    static func compute<T>(_ image: VImage, _ body: () throws -> T) rethrows -> T {
        guard let deadline = currentDeadline else { return try body() }
        let token = shared.watch(image, deadline: deadline)
        defer { shared.unwatch(token) }
        return try body()
    }

    private func watch(_ image: VImage, deadline: UInt64) -> Int {
        let token = nextToken.add(1, ordering: .relaxed).newValue
        watches.withLock { $0[token] = Watch(image: image, deadline: deadline) }
        if !running.exchange(true, ordering: .acquiring) {
            let thread = Thread { [self] in patrol() }
            thread.name = "thumbpipe-watchdog"
            thread.start()
        }
        return token
    }

    private func unwatch(_ token: Int) {
        watches.withLock { _ = $0.removeValue(forKey: token) }
    }

    private func patrol() {
        while true {
            usleep(20_000)
            let now = Spans.now
            watches.withLock { all in
                for (token, watch) in all where now >= watch.deadline {
                    vips_image_set_kill(watch.image.pointer, 1)
                    all[token] = nil
                }
            }
        }
    }
}
