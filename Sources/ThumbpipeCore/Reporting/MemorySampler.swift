import Foundation
import Synchronization

extension ProcessMemory {
    /// The current resident set size of process `pid` in bytes (from /proc/PID/statm), or 0.
    public static func residentBytes(pid: pid_t) -> Int {
        guard let fd = try? FileDescriptor.open("/proc/\(pid)/statm", O_RDONLY) else { return 0 }
        var buffer = [UInt8](repeating: 0, count: 128)
        guard let n = try? fd.read(into: &buffer), n > 0 else { return 0 }
        let fields = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

extension ProcessMemory {
    /// The proportional set size of process `pid` in bytes (from
    /// /proc/PID/smaps_rollup): its private pages plus its share of the pages it
    /// shares (libvips and the Swift runtime, mapped by every worker). Summed
    /// over processes, this counts shared pages once; summed RSS counts them per process.
    public static func proportionalBytes(pid: pid_t) -> Int {
        guard let text = FileSystem.text(of: "/proc/\(pid)/smaps_rollup") else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("Pss:") {
            let fields = line.split(separator: " ")
            if fields.count >= 2, let kilobytes = Int(fields[1]) { return kilobytes * 1024 }
        }
        return 0
    }
}

/// Samples the resident memory of a run, the parent and its live workers
/// together, every `interval`: the peak of the sum is what the machine held.
final class MemorySampler: Sendable {
    /// The most timeline points kept: past it, every other point goes and the spacing doubles.
    static let maxPoints = 600
    private let peak = Atomic<Int>(0)
    private let peakProportional = Atomic<Int>(0)
    /// At most every this many samples (once a second), the proportional sizes
    /// too, and only when the resident total is a new high (2 % over the total
    /// at the last proportional sample; the first sample always): reading them
    /// walks every process's page tables (7.5 ms for a parent and two workers),
    /// which once a second cost 0.3 % of a JPEG run's CPU (`perf`, 40 photos)
    /// and every 200 ms 1.6 %. Shared pages make the proportional total at most
    /// the resident one, so its peak is taken where the resident total peaks.
    static let proportionalEvery = 20
    static let proportionalRise = 1.02
    private let running = Atomic<Bool>(true)
    /// Signalled by ``stop()``: the sampling thread sleeps on it, so a stop
    /// does not wait out the rest of an interval.
    private let wake = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    /// The resident total when the proportional sizes were last read (-1: never).
    private let proportionalAt = Atomic<Int>(-1)
    private let points = Mutex<(list: [TimelinePoint], every: Double)>(([], 1))
    /// The machine's 1-minute load average, summed over the timeline's samples, and their count.
    private let load = Mutex<(sum: Double, count: Int)>((0, 0))
    private let started = Spans.now
    private let workers: @Sendable () -> [pid_t]
    private let progress: @Sendable () -> Int

    /// Starts sampling; `workers` gives the live worker pids at each sample, and
    /// `progress` the items archived so far, recorded with the memory about once a second.
    init(
        interval: Double = 0.05, workers: @escaping @Sendable () -> [pid_t],
        progress: @escaping @Sendable () -> Int = { 0 }
    ) {
        self.workers = workers
        self.progress = progress
        let started = self.started
        let thread = Thread { [self] in
            var next = 0.0
            var count = 0
            while running.load(ordering: .relaxed) {
                let pids = workers()
                let total = sample(pids)
                if count % Self.proportionalEvery == 0 { sampleProportionalIfHigher(pids, resident: total) }
                count += 1
                let t = Double(Spans.now - started) / 1e9
                if t >= next {
                    sampleLoad()
                    next = record(TimelinePoint(t: StageTimings.round(t), items: progress(), rssBytes: total))
                }
                _ = wake.wait(timeout: .now() + interval)
            }
            done.signal()
        }
        thread.name = "thumbpipe-memory"
        thread.start()
    }

    private func sample(_ workers: [pid_t]) -> Int {
        let total = workers.reduce(ProcessMemory.residentBytes(pid: getpid())) {
            $0 + ProcessMemory.residentBytes(pid: $1)
        }
        _ = peak.max(total, ordering: .relaxed)
        return total
    }

    /// Reads the proportional sizes when `resident` is a new high (see ``proportionalRise``).
    private func sampleProportionalIfHigher(_ workers: [pid_t], resident: Int) {
        let last = proportionalAt.load(ordering: .relaxed)
        guard last < 0 || Double(resident) > Double(last) * Self.proportionalRise else { return }
        proportionalAt.store(resident, ordering: .relaxed)
        let total = workers.reduce(ProcessMemory.proportionalBytes(pid: getpid())) {
            $0 + ProcessMemory.proportionalBytes(pid: $1)
        }
        _ = peakProportional.max(total, ordering: .relaxed)
    }

    /// Adds the machine's 1-minute load average (getloadavg) to the run's mean.
    private func sampleLoad() {
        var value = [0.0]
        guard getloadavg(&value, 1) == 1 else { return }
        load.withLock {
            $0.sum += value[0]
            $0.count += 1
        }
    }

    /// The machine's mean 1-minute load average over the run's samples, nil when none was read.
    var meanLoadAverage: Double? {
        load.withLock { $0.count == 0 ? nil : $0.sum / Double($0.count) }
    }

    /// The highest proportional total seen (shared pages counted once).
    var proportionalPeak: Int { peakProportional.load(ordering: .relaxed) }

    /// Keeps a point; returns when the next one is due.
    private func record(_ point: TimelinePoint) -> Double {
        points.withLock { state in
            state.list.append(point)
            if state.list.count > Self.maxPoints {
                state.list = state.list.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
                state.every *= 2
            }
            return point.t + state.every
        }
    }

    /// Stops sampling; returns the highest total seen and the timeline.
    func stop() -> (peak: Int, timeline: [TimelinePoint]) {
        running.store(false, ordering: .relaxed)
        wake.signal()
        done.wait()
        // The last point: where the run ended.
        let t = Double(Spans.now - started) / 1e9
        let pids = workers()
        let total = sample(pids)
        sampleLoad()
        _ = record(TimelinePoint(t: StageTimings.round(t), items: progress(), rssBytes: total))
        sampleProportionalIfHigher(pids, resident: total)
        return (peak.load(ordering: .relaxed), points.withLock { $0.list })
    }
}
