import CBuildInfo
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

    /// The lines of `--version`.
    public static var description: String {
        "thumbpipe \(version)\nrevision \(revision)\nlibvips \(libvipsVersion)\nsandbox \(Sandbox.probe())"
    }
}
