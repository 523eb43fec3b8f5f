import Foundation

/// How many of the previous run's items one run may remove (`--max-removed N|P%`).
public struct RemovalLimit: Sendable, Equatable {
    /// A count, or a percentage of the previous items.
    public var count: Int?
    public var percent: Double?

    /// The default: 10 % of the previous items.
    public static let standard = RemovalLimit(count: nil, percent: 10)

    /// Parses `N` or `P%`.
    /// - Throws: ``ThumbpipeError`` (64) for anything else.
    public init(parsing text: String) throws {
        let bad = ThumbpipeError(
            .usage, "--max-removed takes a count (e.g. 25) or a percentage (e.g. 20%), not '\(text)'")
        if text.hasSuffix("%") {
            guard let value = Double(text.dropLast()), value.isFinite, value >= 0, value <= 100 else { throw bad }
            percent = value
        } else {
            guard let value = Int(text), value >= 0 else { throw bad }
            count = value
        }
    }

    init(count: Int?, percent: Double?) {
        self.count = count
        self.percent = percent
    }

    /// The most items that may go, of `previous`.
    func allowed(of previous: Int) -> Int {
        if let count { return count }
        return Int((Double(previous) * (percent ?? 10) / 100).rounded(.down))
    }

    var text: String {
        if let count { return String(count) }
        let p = percent ?? 10
        return (p == p.rounded() ? String(Int(p)) : String(p)) + "%"
    }
}

extension IncrementalPlan {
    /// Refuses a plan that would remove more of the previous items than `limit`
    /// allows, and always one whose manifest is empty over a folder with items:
    /// the wrong or an empty manifest must not empty last night's folder.
    /// - Throws: ``ThumbpipeError`` (65) naming the count and the flag.
    public func checkRemovals(limit: RemovalLimit, manifestItems: Int, manifestName: String, output: String) throws {
        let previous = removed.count + work.reduce(0) { $0 + ($1.itemClass == .new ? 0 : 1) }
        guard !removed.isEmpty else { return }
        if manifestItems == 0 {
            throw ThumbpipeError(
                .dataError,
                "\(manifestName) has no items: it would remove all \(previous) items from \(output); refusing "
                    + "(delete \(output) to start over)")
        }
        let allowed = limit.allowed(of: previous)
        if removed.count > allowed {
            throw ThumbpipeError(
                .dataError,
                "\(manifestName) would remove \(removed.count) of the \(previous) items in \(output), more than "
                    + "--max-removed \(limit.text) allows; pass --max-removed \(removed.count) if that is meant:\n"
                    + Self.list(removed, limit: 20))
        }
    }

    /// Removed items, one a line (`  Bike (photos/bike.jpg) KEY`, each after
    /// `prefix`), at most `limit`, then how many more of `total` (by default, of `items`:
    /// a report lists only the first of its removed items).
    public static func list(
        _ items: [some CustomStringConvertible], total: Int? = nil, limit: Int, prefix: String = "  "
    ) -> String {
        var lines = items.prefix(limit).map { prefix + $0.description }
        let count = total ?? items.count
        if count > limit { lines.append("  … and \(count - limit) more") }
        return lines.joined(separator: "\n")
    }
}
