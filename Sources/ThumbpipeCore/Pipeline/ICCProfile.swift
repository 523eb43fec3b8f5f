import CThumbKernels
import CVipsShim
import Foundation

/// Reads what thumbpipe needs from an ICC profile: its description (for
/// messages) and, for matrix/TRC RGB profiles, the colorants and tone curves
/// (to recognise sRGB by its numbers, and to convert to sRGB through tables
/// instead of lcms).
struct ICCProfile {
    private let bytes: [UInt8]
    /// Tag signature → (offset, size), for tags that lie inside the profile.
    private var tags: [UInt32: (offset: Int, size: Int)] = [:]

    /// Reads the header and tag table; nil when the profile is too short to have them.
    init?(_ profile: UnsafeRawBufferPointer) {
        bytes = [UInt8](profile.bindMemory(to: UInt8.self))
        guard let count = u32(128), count < 1000 else { return nil }
        for i in 0..<count {
            let entry = 132 + i * 12
            guard let signature = u32(entry), let offset = u32(entry + 4), let size = u32(entry + 8) else {
                return nil
            }
            if offset + size <= bytes.count && size >= 8 && tags[UInt32(signature)] == nil {
                tags[UInt32(signature)] = (offset, size)
            }
        }
    }

    private func u32(_ at: Int) -> Int? {
        guard at >= 0, at + 4 <= bytes.count else { return nil }
        return Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
    }

    private func u16(_ at: Int) -> Int? {
        guard at >= 0, at + 2 <= bytes.count else { return nil }
        return Int(bytes[at]) << 8 | Int(bytes[at + 1])
    }

    /// An s15Fixed16Number.
    private func fixed(_ at: Int) -> Double? {
        u32(at).map { Double(Int32(bitPattern: UInt32($0))) / 65536 }
    }

    private static func signature(_ text: StaticString) -> UInt32 {
        text.withUTF8Buffer { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }

    /// The profile's description (`desc` tag, v2 text or v4 `mluc`), or nil when it has none.
    var description: String? {
        guard let (offset, size) = tags[Self.signature("desc")], size >= 12 else { return nil }
        let type = u32(offset)
        if type == 0x6465_7363, let length = u32(offset + 8), offset + 12 + length <= bytes.count {  // 'desc' v2
            let text = bytes[(offset + 12)..<(offset + 12 + length)].prefix { $0 != 0 }
            return String(decoding: text, as: UTF8.self)
        }
        if type == 0x6D6C_7563, let records = u32(offset + 8), records > 0,  // 'mluc' v4
            let length = u32(offset + 20), let start = u32(offset + 24), offset + start + length <= bytes.count
        {
            let units = stride(from: offset + start, to: offset + start + length - 1, by: 2).map {
                UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])
            }
            return String(decoding: units, as: UTF16.self)
        }
        return nil
    }

    /// How close a profile's numbers must be to sRGB's for it to count as sRGB:
    /// each colorant's X, Y and Z (D50, the primaries and so the white they add
    /// up to), the white point tag's (D50 or sRGB's D65), and each tone curve's
    /// linear light at every 8-bit value.
    static let sRGBTolerance = (colorant: 0.002, whitePoint: 0.003, curve: 0.002)

    /// Whether 8-bit pixels tagged with this profile are already sRGB, decided by
    /// its numbers, not its name: a matrix/TRC RGB profile whose colorants, white
    /// point and tone curves are libvips's sRGB's within ``sRGBTolerance``. A
    /// profile named sRGB with other primaries or another curve is converted.
    var isSRGB: Bool {
        guard let shaper = matrixShaper, let reference = ShaperConversion.target else { return false }
        let tolerance = Self.sRGBTolerance
        guard zip(shaper.toXYZ, reference.toXYZ).allSatisfy({ abs($0 - $1) <= tolerance.colorant }) else {
            return false
        }
        if let white = colorant("wtpt") {
            let d50 = [0.9642, 1.0, 0.8249]
            let d65 = [0.9505, 1.0, 1.0890]
            guard [d50, d65].contains(where: { zip(white, $0).allSatisfy { abs($0 - $1) <= tolerance.whitePoint } })
            else { return false }
        }
        for curve in shaper.curves {
            for v in 0..<256 where abs(curve(Double(v) / 255) - reference.curve(Double(v) / 255)) > tolerance.curve {
                return false
            }
        }
        return true
    }

    // MARK: Matrix/TRC profiles

    /// A tone curve (`curv` or `para`), mapping a device value 0…1 to linear light.
    enum ToneCurve: Equatable, Sendable {
        case gamma(Double)
        case table([UInt16])
        /// ICC parametric function type 0–4 and its parameters g, a, b, c, d, e, f.
        case parametric(type: Int, [Double])

        /// The curve at `x` (0…1), clipped to 0…1 as lcms keeps it.
        func callAsFunction(_ x: Double) -> Double {
            let y: Double
            switch self {
            case .gamma(let g):
                y = pow(x, g)
            case .table(let table):
                let position = x * Double(table.count - 1)
                let low = min(Int(position), table.count - 2)
                let t = position - Double(low)
                y = (Double(table[low]) * (1 - t) + Double(table[low + 1]) * t) / 65535
            case .parametric(let type, let p):
                func power(_ base: Double) -> Double { base > 0 ? pow(base, p[0]) : 0 }
                switch type {
                case 0: y = power(x)
                case 1: y = x >= -p[2] / p[1] ? power(p[1] * x + p[2]) : 0
                case 2: y = x >= -p[2] / p[1] ? power(p[1] * x + p[2]) + p[3] : p[3]
                case 3: y = x >= p[4] ? power(p[1] * x + p[2]) : p[3] * x
                default: y = x >= p[4] ? power(p[1] * x + p[2]) + p[5] : p[3] * x + p[6]
                }
            }
            return y.isFinite ? min(1, max(0, y)) : 0
        }
    }

    private func toneCurve(_ tag: StaticString) -> ToneCurve? {
        guard let (offset, size) = tags[Self.signature(tag)], size >= 12, let type = u32(offset) else { return nil }
        if type == 0x6375_7276 {  // 'curv'
            guard let count = u32(offset + 8), 12 + count * 2 <= size else { return nil }
            if count == 0 { return .gamma(1) }
            if count == 1 { return u16(offset + 12).map { .gamma(Double($0) / 256) } }
            return .table((0..<count).map { UInt16(u16(offset + 12 + 2 * $0)!) })
        }
        if type == 0x7061_7261 {  // 'para'
            let counts = [1, 3, 4, 5, 7]
            guard let function = u16(offset + 8), function < counts.count, 12 + 4 * counts[function] <= size else {
                return nil
            }
            let parameters = (0..<counts[function]).compactMap { fixed(offset + 12 + 4 * $0) }
            guard parameters.count == counts[function] else { return nil }
            if function == 1 || function == 2, parameters[1] == 0 { return nil }
            return .parametric(type: function, parameters)
        }
        return nil
    }

    func colorant(_ tag: StaticString) -> [Double]? {
        guard let (offset, size) = tags[Self.signature(tag)], size >= 20, u32(offset) == 0x5859_5A20 else {  // 'XYZ '
            return nil
        }
        let xyz = (0..<3).compactMap { fixed(offset + 8 + 4 * $0) }
        return xyz.count == 3 ? xyz : nil
    }

    /// For an RGB profile that lcms would apply as matrix and tone curves (XYZ
    /// connection space, colorants and curves, no lookup tables, which lcms
    /// prefers when present): the curves and the 3 × 3 matrix from linear RGB
    /// to D50 XYZ (row-major). Nil for any other profile.
    /// Whether it is a matrix/TRC profile whose tone curves are the identity (a
    /// linear-light profile, as float images from HDR merges carry).
    var isLinearMatrixShaper: Bool {
        guard let curves = matrixShaper?.curves else { return false }
        return curves.allSatisfy { curve in [0.1, 0.25, 0.5, 0.75, 0.9].allSatisfy { abs(curve($0) - $0) < 0.005 } }
    }

    var matrixShaper: (curves: [ToneCurve], toXYZ: [Double])? {
        guard u32(16) == 0x5247_4220, u32(20) == 0x5859_5A20 else { return nil }  // 'RGB ', 'XYZ '
        for lookup: StaticString in ["A2B0", "A2B1", "A2B2", "D2B0", "D2B1", "D2B2"] {
            if tags[Self.signature(lookup)] != nil { return nil }
        }
        guard let r = colorant("rXYZ"), let g = colorant("gXYZ"), let b = colorant("bXYZ"),
            let rc = toneCurve("rTRC"), let gc = toneCurve("gTRC"), let bc = toneCurve("bTRC")
        else { return nil }
        return ([rc, gc, bc], [r[0], g[0], b[0], r[1], g[1], b[1], r[2], g[2], b[2]])
    }
}

/// The tables of ``CThumbKernels_shaper_to_srgb`` for one source profile: what
/// lcms's relative-intent transform from a matrix/TRC profile to libvips's
/// sRGB computes, at a fraction of its cost (a 22 Mpx Display P3 photo spent
/// longer in lcms than in its JPEG decode and encode together).
struct ShaperConversion: Sendable {
    /// 3 × 256 linear-light values, one table per source channel.
    var linear: [Float]
    /// Source linear RGB to sRGB linear RGB, row-major.
    var matrix: [Float]
    /// libvips's sRGB profile, which the conversion ends in.
    private let target: Target

    /// The tables for `profile`, or nil when it is not a matrix/TRC RGB profile
    /// (lcms then converts) or libvips's sRGB target cannot be read.
    init?(profile: ICCProfile) {
        guard let target = Self.target, let source = profile.matrixShaper,
            let product = Self.multiply(target.fromXYZ, source.toXYZ)
        else { return nil }
        self.target = target
        // Real colorants give entries within ±2; anything past ±10 is a crafted
        // or broken profile, left to lcms (and the C tables' 32-bit sums stay safe).
        guard product.allSatisfy({ abs($0) <= 10 }) else { return nil }
        linear = source.curves.flatMap { curve in (0..<256).map { Float(curve(Double($0) / 255)) } }
        matrix = product.map(Float.init)
    }

    /// The tables for a profile's bytes (see ``init(profile:)``).
    init?(profile bytes: UnsafeRawBufferPointer) {
        guard let profile = ICCProfile(bytes) else { return nil }
        self.init(profile: profile)
    }

    /// Whether ``makeShaper()`` can make a converter of this matrix (its entries
    /// fit the shaper's integer sums): decided by the plan, before any decode.
    var fitsShaper: Bool { matrix.withUnsafeBufferPointer { CThumbKernels_shaper_fits($0.baseAddress) != 0 } }

    /// The tables as a row converter for the plane path (free it with
    /// `CThumbKernels_shaper_free`); nil when the matrix is out of range.
    func makeShaper() -> OpaquePointer? {
        linear.withUnsafeBufferPointer { linear in
            matrix.withUnsafeBufferPointer { matrix in
                target.encode.withUnsafeBufferPointer { encode in
                    CThumbKernels_shaper_new(linear.baseAddress, matrix.baseAddress, encode.baseAddress)
                }
            }
        }
    }

    /// Converts `image` (8-bit RGB or RGBA in the source profile) to sRGB.
    func apply(_ image: VImage) throws -> VImage {
        try linear.withUnsafeBufferPointer { linear in
            try matrix.withUnsafeBufferPointer { matrix in
                try target.encode.withUnsafeBufferPointer { encode in
                    try image.derive("icc_transform") {
                        CThumbKernels_shaper_to_srgb($0, $1, linear.baseAddress, matrix.baseAddress, encode.baseAddress)
                    }
                }
            }
        }
    }

    /// libvips's own sRGB profile, the one `icc_transform` to "srgb" uses:
    /// XYZ to its linear RGB, and linear light to 8-bit values (its curve inverted).
    struct Target: Sendable {
        var fromXYZ: [Double]
        var encode: [UInt8]
        /// Its linear RGB to D50 XYZ and its tone curve, what ``ICCProfile/isSRGB`` compares with.
        var toXYZ: [Double]
        var curve: ICCProfile.ToneCurve
    }

    static let target: Target? = {
        var data: UnsafeRawPointer? = nil
        var length = 0
        var blob: UnsafeMutableRawPointer? = nil
        guard CVipsShim_profile_load("srgb", &data, &length, &blob) == 0, let data else {
            _ = Vips.takeError(operation: "profile_load")
            return nil
        }
        defer { CVipsShim_blob_unref(blob) }
        guard let profile = ICCProfile(UnsafeRawBufferPointer(start: data, count: length))?.matrixShaper,
            profile.curves.allSatisfy({ $0 == profile.curves[0] }), let fromXYZ = invert(profile.toXYZ)
        else { return nil }
        // Linear light L encodes to v when the curve's inverse at L rounds to v,
        // that is when L lies below the light of (v + ½) / 255: 255 thresholds
        // (the curve rises), walked once over the table's steps.
        let curve = profile.curves[0]
        let thresholds = (0..<255).map { curve((Double($0) + 0.5) / 255) }
        let steps = Int(CTHUMBKERNELS_SHAPER_STEPS)
        var encode = [UInt8](repeating: 0, count: steps)
        var value = 0
        for step in 0..<steps {
            let light = Double(step) / Double(steps - 1)
            while value < 255 && light >= thresholds[value] { value += 1 }
            encode[step] = UInt8(value)
        }
        return Target(fromXYZ: fromXYZ, encode: encode, toXYZ: profile.toXYZ, curve: curve)
    }()

    static func multiply(_ a: [Double], _ b: [Double]) -> [Double]? {
        var product = [Double](repeating: 0, count: 9)
        for row in 0..<3 {
            for column in 0..<3 {
                for k in 0..<3 { product[row * 3 + column] += a[row * 3 + k] * b[k * 3 + column] }
            }
        }
        return product.allSatisfy { $0.isFinite } ? product : nil
    }

    static func invert(_ m: [Double]) -> [Double]? {
        // The cofactor of row r, column c; the inverse is their transpose over the determinant.
        func cofactor(_ r: Int, _ c: Int) -> Double {
            let (r1, r2) = ((r + 1) % 3, (r + 2) % 3)
            let (c1, c2) = ((c + 1) % 3, (c + 2) % 3)
            return m[r1 * 3 + c1] * m[r2 * 3 + c2] - m[r1 * 3 + c2] * m[r2 * 3 + c1]
        }
        let determinant = m[0] * cofactor(0, 0) + m[1] * cofactor(0, 1) + m[2] * cofactor(0, 2)
        guard determinant.isFinite, abs(determinant) > 1e-9 else { return nil }
        return (0..<9).map { cofactor($0 % 3, $0 / 3) / determinant }
    }
}
