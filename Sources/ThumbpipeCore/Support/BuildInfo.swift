import CBuildInfo
import CDeflate
import CHevc
import CJpegPlanes
import CVips

/// What `thumbpipe --version` says about this build.
public enum BuildInfo {
    /// thumbpipe's release version.
    public static var version: String { RunReport.version }

    /// The source revision the binary was built from (`git describe` as the
    /// Makefile passed it), or "unknown" for a build that was not told.
    public static var revision: String { String(cString: CBuildInfo_revision()) }

    /// The version of the libvips this process runs with (not the one it was built against).
    public static var libvipsVersion: String { LibVips.version }

    /// The libjpeg-turbo the plane code was compiled against (`2.1.5`): the plane
    /// code reads its internals, so it is tied to it (CJpegPlanes refuses others).
    public static var libjpegTurboVersion: String {
        let number = Int(CJpegPlanes_libjpegTurboVersion())
        return "\(number / 1_000_000).\(number / 1_000 % 1_000).\(number % 1_000)"
    }

    /// The libdeflate thumbnails' PNGs are compressed with, as compiled against.
    public static var libdeflateVersion: String { LIBDEFLATE_VERSION_STRING }

    /// The libavcodec this process decodes HEIC tiles with (the one loaded, `59.37.100`).
    public static var libavcodecVersion: String {
        let number = CHevc_libavcodecVersion()
        return "\(number >> 16).\(number >> 8 & 0xFF).\(number & 0xFF)"
    }

    /// The lines of `--version`.
    public static var description: String {
        "thumbpipe \(version)\nrevision \(revision)\nlibvips \(libvipsVersion)\nlibjpeg-turbo \(libjpegTurboVersion)\nlibdeflate \(libdeflateVersion)\nlibavcodec \(libavcodecVersion)\nsandbox \(Sandbox.probe())"
    }
}
