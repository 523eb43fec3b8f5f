import Foundation
import Testing

@testable import ThumbpipeCore

@Suite("Rounded clip")
struct RoundedClipTests {
    /// Coverage by brute force: a 256 × 256 grid of samples per pixel. A pixel the
    /// arc does not cross is wholly inside (its four corners are: the shape is convex)
    /// or wholly outside (it is farther than `r` from the shape's straight core) and
    /// its coverage is exact without sampling.
    func sampledCoverage(x: Int, y: Int, width: Int, height: Int, r: Double) -> Double {
        let (x0, x1, y0, y1) = (r, Double(width) - r, r, Double(height) - r)
        func inside(_ px: Double, _ py: Double) -> Bool {
            let dx = px - min(max(px, x0), x1)
            let dy = py - min(max(py, y0), y1)
            return dx * dx + dy * dy <= r * r
        }
        let (left, top) = (Double(x), Double(y))
        if inside(left, top) && inside(left + 1, top) && inside(left, top + 1) && inside(left + 1, top + 1) { return 1 }
        let gapX = max(0, x0 - (left + 1), left - x1)
        let gapY = max(0, y0 - (top + 1), top - y1)
        if gapX * gapX + gapY * gapY >= r * r { return 0 }
        let n = 256
        var hits = 0
        for j in 0..<n {
            for i in 0..<n where inside(left + (Double(i) + 0.5) / Double(n), top + (Double(j) + 0.5) / Double(n)) {
                hits += 1
            }
        }
        return Double(hits) / Double(n * n)
    }

    @Test(arguments: [(80, 80, 10.0), (120, 80, 10.0), (80, 80, 40.0), (40, 40, 7.5), (61, 33, 16.5), (30, 90, 0.0)])
    func coverageMatchesTheExactArea(width: Int, height: Int, radius: Double) {
        let clip = RoundedClip(radius: radius)
        let mask = clip.coverage(width: width, height: height)
        let total = mask.reduce(0, +)
        #expect(abs(total - clip.area(width: width, height: height)) < 1e-6 * Double(width * height))
        // Every pixel near a corner against brute-force sampling.
        var errors: [Double] = []
        let span = Int(radius.rounded(.up)) + 1
        for y in 0..<height where y < span || y >= height - span {
            for x in 0..<width where x < span || x >= width - span {
                let expected = sampledCoverage(
                    x: x, y: y, width: width, height: height, r: min(radius, Double(min(width, height)) / 2))
                errors.append(abs(mask[y * width + x] - expected))
            }
        }
        let worst = errors.max() ?? 0
        let mean = errors.reduce(0, +) / Double(max(1, errors.count))
        #expect(worst < 2.0 / 255, "max error \(worst * 255)/255")
        #expect(mean < 0.5 / 255, "mean error \(mean * 255)/255")
    }

    @Test func clipKeepsSourceAlphaInsideAndZeroOutside() {
        var buffer = RGBABuffer(width: 80, height: 80, pixels: [UInt8](repeating: 200, count: 80 * 80 * 4))
        RoundedClip(radius: 10).apply(to: &buffer)
        #expect(buffer[40, 40].a == 200)
        #expect(buffer[0, 0].a == 0)
        #expect(buffer[79, 79].a == 0)
        #expect(buffer[40, 0].a == 200)
        // On the arc: partially covered.
        #expect(buffer[2, 2].a > 0 && buffer[2, 2].a < 200)
        #expect(buffer[40, 40].r == 200)
    }
}
