import CVips
import CVipsShim
import Foundation
import Testing
import ThumbpipeCore

/// ICC profiles crafted from libvips's own sRGB profile, for the tests that
/// check sRGB is decided by a profile's numbers and not its name.
public enum CraftedProfiles {
    /// libvips's own sRGB profile.
    public static func srgb() throws -> [UInt8] {
        try LibVips.start()
        var data: UnsafeRawPointer? = nil
        var length = 0
        var blob: UnsafeMutableRawPointer? = nil
        #expect(CVipsShim_profile_load("srgb", &data, &length, &blob) == 0)
        defer { CVipsShim_blob_unref(blob) }
        return [UInt8](UnsafeRawBufferPointer(start: data, count: length))
    }

    /// Where a tag's data starts in `profile`.
    public static func offset(of tag: String, in profile: [UInt8]) -> Int? {
        func u32(_ at: Int) -> Int { profile[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        for i in 0..<u32(128) where String(decoding: profile[(132 + i * 12)..<(136 + i * 12)], as: UTF8.self) == tag {
            return u32(132 + i * 12 + 4)
        }
        return nil
    }

    /// `profile` with a colorant tag's X, Y, Z replaced (s15Fixed16).
    public static func setting(_ tag: String, _ xyz: [Double], in profile: [UInt8]) throws -> [UInt8] {
        var bytes = profile
        let start = try #require(offset(of: tag, in: profile))
        for (i, value) in xyz.enumerated() {
            let fixed = UInt32(bitPattern: Int32((value * 65536).rounded()))
            bytes.replaceSubrange(
                (start + 8 + 4 * i)..<(start + 12 + 4 * i),
                with: [UInt8(fixed >> 24), UInt8(fixed >> 16 & 255), UInt8(fixed >> 8 & 255), UInt8(fixed & 255)])
        }
        return bytes
    }

    /// `profile` with every tone curve a gamma of 1 (a `curv` of one entry, 1.0 in u8.8), in place.
    public static func linear(_ profile: [UInt8]) throws -> [UInt8] {
        var bytes = profile
        for tag in ["rTRC", "gTRC", "bTRC"] {
            let start = try #require(offset(of: tag, in: profile))
            bytes.replaceSubrange(start..<(start + 14), with: Array("curv".utf8) + [0, 0, 0, 0, 0, 0, 0, 1, 1, 0])
        }
        return bytes
    }

    /// Display P3's colorants, adapted to D50 (as a P3 profile holds them).
    public static let p3 = (r: [0.5151, 0.2412, -0.0011], g: [0.2920, 0.6922, 0.0419], b: [0.1571, 0.0666, 0.7841])

    /// libvips's sRGB profile, its name and all, with Display P3's primaries.
    public static func srgbNamedP3() throws -> [UInt8] {
        var profile = try setting("rXYZ", p3.r, in: try srgb())
        profile = try setting("gXYZ", p3.g, in: profile)
        return try setting("bXYZ", p3.b, in: profile)
    }

    /// Writes `source` (a fixture JPEG) again as a JPEG at Q95 tagged with `profile`.
    public static func tag(_ source: String, with profile: [UInt8], to path: String) throws {
        try LibVips.start()
        var loaded: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_load(source, 1, 1, 0, 0, &loaded) == 0)
        var copy: UnsafeMutablePointer<VipsImage>? = nil
        try #require(CVipsShim_remove_metadata(loaded, &copy, 1) == 0)
        CVipsShim_unref(loaded)
        profile.withUnsafeBytes { vips_image_set_blob_copy(copy, VIPS_META_ICC_NAME, $0.baseAddress, $0.count) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(CVipsShim_jpegsave_fd(copy, fd, 95, 0) == 0)
        CVipsShim_unref(copy)
    }
}
