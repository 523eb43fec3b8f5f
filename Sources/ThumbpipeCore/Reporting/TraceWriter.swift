import Foundation
import Synchronization

/// Writes a Chrome trace-event JSON file (opens in Perfetto or chrome://tracing):
/// one complete event per stage per item, one track per worker thread.
public final class TraceWriter: Sendable {
    private struct State {
        var buffer: [UInt8] = []
        var first = true
        var failed: (any Error)?
        /// Items offered, bytes written so far, and items left out past the cap.
        var offered = 0
        var bytes = 0
        var dropped = 0
    }
    /// Every how many items one is traced.
    private let sampleEvery: Int
    /// The most bytes the trace may take; past it, items are counted, not traced.
    private let byteLimit: Int
    /// The cap when none is asked for: about 130,000 items at 1.9 KB each.
    public static let defaultByteLimit = 256 << 20
    /// A regular file is written under a temporary name and renamed into place;
    /// a FIFO, device or standard output is written straight through.
    private let file: TemporaryFile?
    private let stream: FileDescriptor?
    private let target: OutputTarget
    private let origin: UInt64
    private let state = Mutex(State())

    /// Starts a trace at `target` (a file is written under a temporary name until ``finish()``).
    /// - Parameter workers: how many worker tracks to name.
    /// - Throws: ``ThumbpipeError`` (73) when the file cannot be created.
    /// - Parameters:
    ///   - sampleEvery: trace one item in this many (`--trace-sample N`), so a large
    ///     set's trace stays small and still covers the whole run.
    ///   - byteLimit: past this size no more items are traced (``droppedItems`` says how many).
    public init(target: OutputTarget, workers: Int, sampleEvery: Int = 1, byteLimit: Int = defaultByteLimit) throws {
        self.target = target
        self.sampleEvery = max(1, sampleEvery)
        self.byteLimit = byteLimit
        if target.kind == .file {
            file = try TemporaryFile(in: URL(fileURLWithPath: target.path).deletingLastPathComponent().path)
            stream = nil
        } else {
            file = nil
            stream = try target.open()
        }
        origin = Spans.now
        var head = #"{"displayTimeUnit":"ms","traceEvents":["#
        head += #"{"name":"process_name","ph":"M","pid":1,"args":{"name":"thumbpipe"}}"#
        for worker in 0..<workers {
            head +=
                #",{"name":"thread_name","ph":"M","pid":1,"tid":\#(worker + 1),"args":{"name":"worker \#(worker + 1)"}}"#
        }
        state.withLock { $0.buffer = Array(head.utf8) }
    }

    /// Adds one task's spans on `worker`'s track, labelled with the item.
    /// With `source`, spans also carry the file's name, format, megapixels, bytes
    /// and how its store file was made (`planes` or `libvips`).
    public func record(
        _ spans: Spans, worker: Int, itemKey: String, line: Int,
        source: (file: String, format: String, megapixels: Double, bytes: Int64, path: String?)? = nil
    ) {
        guard !spans.all.isEmpty else { return }
        let (take, full) = state.withLock { state -> (Bool, Bool) in
            state.offered += 1
            guard (state.offered - 1) % sampleEvery == 0 else { return (false, false) }
            if state.bytes >= byteLimit {
                state.dropped += 1
                return (false, true)
            }
            return (true, false)
        }
        guard take, !full else { return }
        let key = Self.escape(itemKey)
        var extra = ""
        if let source {
            extra =
                #","file":"\#(Self.escape(source.file))","format":"\#(Self.escape(source.format))","megapixels":\#(String(format: "%.2f", source.megapixels)),"bytes":\#(source.bytes)"#
            if let path = source.path { extra += #","path":"\#(path)""# }
        }
        var text = ""
        for span in spans.all {
            let ts = Double(span.start &- origin) / 1000
            let dur = Double(span.end &- span.start) / 1000
            text += #",{"name":"\#(span.stage.rawValue)","cat":"stage","ph":"X","pid":1,"tid":\#(worker + 1),"#
            text += #""ts":\#(String(format: "%.1f", ts)),"dur":\#(String(format: "%.1f", dur)),"#
            text += #""args":{"itemKey":"\#(key)","line":\#(line)\#(extra)}}"#
        }
        state.withLock { state in
            state.buffer += Array(text.utf8)
            state.bytes += text.utf8.count
            if state.buffer.count > 1 << 20 { flush(&state) }
        }
    }

    /// Items sampled for the trace but left out because it reached its size cap.
    public var droppedItems: Int { state.withLock { $0.dropped } }

    private func flush(_ state: inout State) {
        guard state.failed == nil else { return }
        do {
            if let file {
                try state.buffer.withUnsafeBytes { try file.write($0) }
            } else if let stream {
                try state.buffer.withUnsafeBytes { try OutputTarget.writeAll(stream, $0, to: target.path) }
            }
        } catch {
            state.failed = error
        }
        state.buffer.removeAll(keepingCapacity: true)
    }

    /// Closes the JSON and renames the trace into place.
    /// - Throws: ``ThumbpipeError`` (74) when it cannot be written.
    public func finish() throws {
        try state.withLock { state in
            state.buffer += Array("]}\n".utf8)
            flush(&state)
            if let failed = state.failed { throw failed }
        }
        if let file {
            try file.commit(to: target.path)
        } else {
            try? stream?.close()
        }
    }

    /// Removes the unfinished trace.
    public func abandon() { file?.discard() }

    static func escape(_ text: String) -> String { JSONText.escape(text) }
}
