import Foundation

/// A small SVG writer for the report's charts: axes (linear or logarithmic),
/// bars, lines and points, as inline `<svg>` text. Output size follows the data
/// given, never the run's item count: callers aggregate or sample first.
public struct SVGChart {
    /// A value axis mapping data to pixels.
    public struct Axis {
        public var lower: Double
        public var upper: Double
        public var logarithmic: Bool

        /// An axis over `lower…upper` (widened when empty; positive for a log axis).
        public init(_ lower: Double, _ upper: Double, logarithmic: Bool = false) {
            var lo = lower
            var hi = upper
            if logarithmic {
                lo = max(lo, 1e-6)
                hi = max(hi, lo * 10)
            } else if hi <= lo {
                hi = lo + 1
            }
            self.lower = lo
            self.upper = hi
            self.logarithmic = logarithmic
        }

        /// Where `value` falls, from 0 (lower) to 1 (upper), clamped.
        public func fraction(_ value: Double) -> Double {
            let f =
                logarithmic
                ? (log10(max(value, lower)) - log10(lower)) / (log10(upper) - log10(lower))
                : (value - lower) / (upper - lower)
            return min(1, max(0, f.isFinite ? f : 0))
        }

        /// Round tick values: powers of ten on a log axis, 1-2-5 steps otherwise.
        public func ticks(_ count: Int = 5) -> [Double] {
            if logarithmic {
                let first = Int(floor(log10(lower)))
                let last = Int(ceil(log10(upper)))
                return (first...last).map { pow(10, Double($0)) }.filter { $0 >= lower * 0.999 && $0 <= upper * 1.001 }
            }
            let raw = (upper - lower) / Double(max(1, count))
            let magnitude = pow(10, floor(log10(raw)))
            let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? raw
            var values: [Double] = []
            var v = ceil(lower / step) * step
            // At most a few dozen ticks, whatever the range (a step too small to move v ends it too).
            while v <= upper + step * 1e-9 && values.count < 50 && v + step > v {
                values.append(abs(v) < step * 1e-9 ? 0 : v)
                v += step
            }
            return values
        }
    }

    public let width: Int
    public let height: Int
    /// The plot area inside the margins.
    public let left = 56.0
    public let right = 16.0
    /// Room above the plot for the legend.
    public let top = 24.0
    public let bottom = 34.0
    private var body = ""

    /// An empty chart of `width × height` pixels.
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    var plotWidth: Double { Double(width) - left - right }
    var plotHeight: Double { Double(height) - top - bottom }

    /// The x pixel of `value` on `axis`.
    public func x(_ value: Double, _ axis: Axis) -> Double { left + axis.fraction(value) * plotWidth }
    /// The y pixel of `value` on `axis` (up is larger).
    public func y(_ value: Double, _ axis: Axis) -> Double { top + (1 - axis.fraction(value)) * plotHeight }

    /// Draws both axes with ticks, labels and light grid lines.
    public mutating func axes(
        x: Axis, y: Axis, xLabel: String, yLabel: String, xFormat: (Double) -> String = SVGChart.number,
        yFormat: (Double) -> String = SVGChart.number
    ) {
        let baseline = top + plotHeight
        for tick in y.ticks() {
            let py = self.y(tick, y)
            body += line(left, py, left + plotWidth, py, stroke: "#e4e4e4")
            body += text(left - 6, py + 4, yFormat(tick), anchor: "end")
        }
        for tick in x.ticks() {
            let px = self.x(tick, x)
            body += line(px, baseline, px, baseline + 4, stroke: "#888")
            body += text(px, baseline + 16, xFormat(tick), anchor: "middle")
        }
        body += line(left, baseline, left + plotWidth, baseline, stroke: "#888")
        body += line(left, top, left, baseline, stroke: "#888")
        body += text(left + plotWidth / 2, Double(height) - 4, xLabel, anchor: "middle")
        body +=
            "<text x=\"12\" y=\"\(f(top + plotHeight / 2))\" text-anchor=\"middle\" font-size=\"11\" fill=\"#444\" transform=\"rotate(-90 12 \(f(top + plotHeight / 2)))\">\(Self.escape(yLabel))</text>"
    }

    /// A filled rectangle, with a tooltip.
    public mutating func bar(x: Double, y: Double, width: Double, height: Double, fill: String, title: String? = nil) {
        body +=
            "<rect x=\"\(f(x))\" y=\"\(f(y))\" width=\"\(f(max(0, width)))\" height=\"\(f(max(0, height)))\" fill=\"\(fill)\">"
        if let title { body += "<title>\(Self.escape(title))</title>" }
        body += "</rect>"
    }

    /// A polyline through `points` (data coordinates).
    public mutating func polyline(_ points: [(Double, Double)], x: Axis, y: Axis, stroke: String) {
        guard !points.isEmpty else { return }
        let coordinates = points.map { "\(f(self.x($0.0, x))),\(f(self.y($0.1, y)))" }.joined(separator: " ")
        body += "<polyline fill=\"none\" stroke=\"\(stroke)\" stroke-width=\"1.5\" points=\"\(coordinates)\"/>"
    }

    /// A point (data coordinates).
    public mutating func point(_ px: Double, _ py: Double, x: Axis, y: Axis, fill: String, title: String? = nil) {
        body +=
            "<circle cx=\"\(f(self.x(px, x)))\" cy=\"\(f(self.y(py, y)))\" r=\"2.5\" fill=\"\(fill)\" fill-opacity=\"0.7\">"
        if let title { body += "<title>\(Self.escape(title))</title>" }
        body += "</circle>"
    }

    /// A legend row at the top right: a swatch and a label per entry.
    public mutating func legend(_ entries: [(label: String, colour: String)]) {
        var px = Double(width) - right
        for entry in entries.reversed() {
            let w = Double(entry.label.count) * 6.2 + 18
            px -= w
            body += "<rect x=\"\(f(px))\" y=\"4\" width=\"10\" height=\"10\" fill=\"\(entry.colour)\"/>"
            body += text(px + 13, 13, entry.label, anchor: "start")
        }
    }

    /// Free text at a pixel position.
    public mutating func label(_ px: Double, _ py: Double, _ value: String, anchor: String = "start") {
        body += text(px, py, value, anchor: anchor)
    }

    /// The chart as an inline `<svg>` element with an accessible title.
    public func svg(title: String) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" font-family=\"sans-serif\"><title>\(Self.escape(title))</title>\(body)</svg>"
    }

    private func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String) -> String {
        "<line x1=\"\(f(x1))\" y1=\"\(f(y1))\" x2=\"\(f(x2))\" y2=\"\(f(y2))\" stroke=\"\(stroke)\"/>"
    }

    private func text(_ x: Double, _ y: Double, _ value: String, anchor: String) -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" text-anchor=\"\(anchor)\" font-size=\"11\" fill=\"#444\">\(Self.escape(value))</text>"
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value.isFinite ? value : 0) }

    /// Text safe inside SVG or HTML.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                if c.value < 0x20 && c != "\n" && c != "\t" { out += "\u{FFFD}" } else { out.unicodeScalars.append(c) }
            }
        }
        return out
    }

    /// A short number: 1.5k, 2M, 0.25.
    public static func number(_ value: Double) -> String {
        let a = abs(value)
        if a >= 1e9 { return String(format: "%.3gG", value / 1e9) }
        if a >= 1e6 { return String(format: "%.3gM", value / 1e6) }
        if a >= 1e4 { return String(format: "%.3gk", value / 1e3) }
        return String(format: "%.3g", value)
    }

    /// A duration from milliseconds: 850 ms, 1.2 s.
    public static func milliseconds(_ value: Double) -> String {
        value >= 1000 ? String(format: "%.3g s", value / 1000) : String(format: "%.3g ms", value)
    }
}
