import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

/// A `report.json` read back (by `report`, `merge`, `contact-sheet`) is a file
/// anyone could have edited: what is within bounds is drawn without a trap,
/// what is past them is refused with its path. A run's own report, with every
/// one of its numbers set to a bound in turn, is the test.
@Suite("Report bounds: a report.json read back is drawn or refused, never trapped on")
struct ReportBoundsTests {
    static let fixture = TestPaths.fixture("reports/run-report.json")

    /// Every number's path in `json`, as keys and indices.
    static func numberPaths(_ json: Any, _ path: [Any] = []) -> [[Any]] {
        switch json {
        case let object as [String: Any]:
            return object.sorted { $0.key < $1.key }.flatMap { numberPaths($0.value, path + [$0.key]) }
        case let array as [Any]:
            return array.indices.flatMap { numberPaths(array[$0], path + [$0]) }
        case is String, is NSNull, is Bool:
            return []
        case is NSNumber:
            return [path]
        default:
            return []
        }
    }

    /// The paths of `json`'s numbers, two of each shape (a list's elements are alike:
    /// `histograms.decode[3][1]` stands for every bucket's count after the first two).
    static func distinctNumberPaths(_ json: Any) -> [[Any]] {
        var seen: [String: Int] = [:]
        return numberPaths(json).filter { path in
            let shape = path.map { $0 is Int ? "*" : "\($0)" }.joined(separator: "/")
            let count = seen[shape, default: 0] + 1
            seen[shape] = count
            return count <= 2
        }
    }

    /// `json` with the number at `path` set to `value`.
    static func setting(_ json: Any, _ path: ArraySlice<Any>, to value: Any) -> Any {
        guard let first = path.first else { return value }
        if var object = json as? [String: Any], let key = first as? String, let inner = object[key] {
            object[key] = setting(inner, path.dropFirst(), to: value)
            return object
        }
        if var array = json as? [Any], let index = first as? Int {
            array[index] = setting(array[index], path.dropFirst(), to: value)
            return array
        }
        return json
    }

    static func report() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: fixture)))
    }

    @Test("The fixture is a run's report, drawn as it is, with the parts a report can hold")
    func fixtureDraws() throws {
        let report = try RunReport.decoded(Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
        #expect(report.profile != nil && !report.slowest.isEmpty && !report.failures.isEmpty)
        #expect(!report.incremental.removedItems.isEmpty && !report.incremental.movedItems.isEmpty)
        #expect(HTMLReport.render(report).contains("</html>"))
        #expect(Self.numberPaths(try Self.report()).count > 300)
        #expect(Self.distinctNumberPaths(try Self.report()).count > 100)
    }

    @Test("Every number at 0 and at 2^53 in turn: drawn (no trap, no endless axis), or refused as settings")
    func withinBounds() throws {
        let json = try Self.report()
        for path in Self.distinctNumberPaths(json) {
            for value in [0, ReportBounds.largestNumber] as [Double] {
                let number: Any = value.rounded() == value ? Int(value) : value
                let data = try JSONSerialization.data(withJSONObject: Self.setting(json, path[...], to: number))
                let report: RunReport
                do {
                    report = try RunReport.decoded(data)
                } catch {
                    // Refused only where no run writes it: settings no pipeline file holds.
                    #expect(
                        path.first as? String == "settings" && "\(error)".hasPrefix("settings: "),
                        "\(path) = \(value) refused: \(error)")
                    continue
                }
                #expect(HTMLReport.render(report).hasSuffix("</html>\n"), "\(path) = \(value)")
            }
        }
    }

    @Test("A negative number, one past 2^53 or past a double's range: refused, naming where")
    func pastBounds() throws {
        let json = try Self.report()
        for path in Self.distinctNumberPaths(json) {
            let dotted = path.map { $0 is Int ? "[\($0)]" : ".\($0)" }.joined()
            let name = dotted.hasPrefix(".") ? String(dotted.dropFirst()) : dotted
            for value in [-1, 2 * ReportBounds.largestNumber, 1e308] as [Double] {
                let data = try JSONSerialization.data(withJSONObject: Self.setting(json, path[...], to: value))
                #expect(throws: ReportBounds.Problem.self, "\(name) = \(value)") { try RunReport.decoded(data) }
                let message = Self.problem(data)
                #expect(message.hasPrefix(name + " is "), "\(name) = \(value): \(message)")
            }
        }
    }

    static func problem(_ data: Data) -> String {
        do {
            _ = try RunReport.decoded(data)
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test(
        "Past what a run writes: a capped list too long, settings no pipeline file holds, numbers adding up past 2^62")
    func pastWhatARunWrites() throws {
        let fixture = try RunReport.decoded(Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
        var report = fixture
        report.slowest = Array(repeating: report.slowest[0], count: 21)
        #expect(Self.problem(try JSONEncoder().encode(report)) == "slowest lists 21 items; a run lists at most 20")
        // Each number within bounds, their product not: width × scale is no canvas.
        report = fixture
        report.settings?.thumbnail.width = ReportBounds.largestNumber
        report.settings?.thumbnail.scale = ReportBounds.largestNumber
        #expect(Self.problem(try JSONEncoder().encode(report)).contains("thumbnail canvas must be 1 to 4096 pixels"))
        report = fixture
        report.settings?.archive.fileName = "../../etc/shadow"
        #expect(Self.problem(try JSONEncoder().encode(report)).contains("is not a safe file name"))
        report = fixture
        report.histograms["decode"] = [[1, 2], []]
        #expect(
            Self.problem(try JSONEncoder().encode(report))
                == "histograms.decode[1] is not a pair of milliseconds and items")
        // 513 buckets of 2^53 items each: every number in bounds, their sum past any Int.
        report = fixture
        report.histograms["decode"] = Array(repeating: [1, ReportBounds.largestNumber], count: 513)
        #expect(Self.problem(try JSONEncoder().encode(report)).contains("past 2^62"))
        report.histograms["decode"] = Array(repeating: [1, ReportBounds.largestNumber], count: 500)
        let drawn = try RunReport.decoded(try JSONEncoder().encode(report))
        #expect(HTMLReport.render(drawn).hasSuffix("</html>\n"), "500 × 2^53 is drawn")
    }

    @Test("An axis over any range has a few ticks: 2^53 wide, or a step too small to move a large value")
    func axisTicks() {
        for (lower, upper) in [(0, ReportBounds.largestNumber), (1e16, 1e16 + 4), (0, 1e-300), (5, 5)] {
            let ticks = SVGChart.Axis(lower, upper).ticks()
            #expect(ticks.count <= 50, "\(lower)…\(upper)")
            #expect(SVGChart.Axis(lower, upper, logarithmic: true).ticks().count <= 50)
        }
    }
}
