import Foundation

/// The rounded clip stage: multiplies alpha by the exact area of a rounded
/// rectangle (the whole canvas, corner radius `radius` px) inside each pixel,
/// so corners are anti-aliased by coverage. Outside alpha is 0; inside, the
/// source alpha is kept.
public struct RoundedClip: Sendable {
    /// Corner radius in pixels (clamped to half the shorter side).
    public var radius: Double

    /// Creates the stage with a corner radius in pixels.
    public init(radius: Double) { self.radius = max(0, radius) }

    /// Clips `buffer` in place.
    public func apply(to buffer: inout RGBABuffer) {
        let mask = coverage(width: buffer.width, height: buffer.height)
        buffer.pixels.withUnsafeMutableBufferPointer { pixels in
            for (index, cover) in mask.enumerated() where cover < 1 {
                let a = pixels[index * 4 + 3]
                pixels[index * 4 + 3] = UInt8((Double(a) * cover).rounded())
            }
        }
    }

    /// The coverage (0…1) of the rounded rectangle in each pixel of a `width × height` canvas, row by row.
    public func coverage(width: Int, height: Int) -> [Double] {
        var mask = [Double](repeating: 1, count: width * height)
        let r = min(radius, Double(min(width, height)) / 2)
        guard r > 0 else { return mask }
        let span = Int(r.rounded(.up))
        // Each corner box is r × r and the boxes never overlap (r ≤ half the
        // shorter side), so a pixel's coverage is 1, less its area inside each
        // corner box, plus its area inside that corner's quarter disk. The four
        // corners are mirror images: compute one and reflect it.
        for y in 0..<min(span, height) {
            for x in 0..<min(span, width) {
                // Pixel [x, x+1] × [y, y+1] relative to the top-left circle's centre (r, r),
                // as distances u, v ≥ 0 from the centre towards the corner.
                let u0 = max(0, r - Double(x + 1))
                let u1 = max(0, r - Double(x))
                let v0 = max(0, r - Double(y + 1))
                let v1 = max(0, r - Double(y))
                // Part of the pixel beyond the corner box (u or v < 0) is fully inside.
                let inBox = (u1 - u0) * (v1 - v0)
                let change = Self.diskArea(u0: u0, u1: u1, v0: v0, v1: v1, r: r) - inBox
                for (px, py) in [(x, y), (width - 1 - x, y), (x, height - 1 - y), (width - 1 - x, height - 1 - y)] {
                    mask[py * width + px] += change
                }
            }
        }
        return mask.map { min(1, max(0, $0)) }
    }

    /// The exact area of `{u² + v² ≤ r²}` inside `[u0, u1] × [v0, v1]` (all ≥ 0).
    static func diskArea(u0: Double, u1: Double, v0: Double, v1: Double, r: Double) -> Double {
        guard u1 > u0, v1 > v0 else { return 0 }
        // ∫ over u of clamp(√(r² − u²) − v0, 0, v1 − v0).
        let a = (max(0, r * r - v1 * v1)).squareRoot()  // where the arc leaves the top edge v1
        let b = (max(0, r * r - v0 * v0)).squareRoot()  // where the arc meets the bottom edge v0
        func overlap(_ lo: Double, _ hi: Double) -> (Double, Double)? {
            let l = max(lo, u0)
            let h = min(hi, u1)
            return h > l ? (l, h) : nil
        }
        func g(_ u: Double) -> Double {
            // ∫ √(r² − u²) du
            let c = min(1, max(-1, u / r))
            return 0.5 * (u * max(0, r * r - u * u).squareRoot() + r * r * asin(c))
        }
        var area = 0.0
        if let (l, h) = overlap(0, a) { area += (v1 - v0) * (h - l) }
        if let (l, h) = overlap(a, b) { area += g(h) - g(l) - v0 * (h - l) }
        return area
    }

    /// The analytic area of the rounded rectangle: `W·H − (4 − π)·r²`.
    public func area(width: Int, height: Int) -> Double {
        let r = min(radius, Double(min(width, height)) / 2)
        return Double(width * height) - (4 - Double.pi) * r * r
    }
}
