import CVips
import CVipsShim
import Foundation

/// The libvips modules a worker loads. libvips loads every module of its module
/// folder at start (ImageMagick, poppler, OpenSlide, libjxl, libheif on Debian),
/// about 45 ms a process and code no default run can use; a worker loads only
/// the modules its run's `limits.formats` need.
enum VipsModules {
    /// The format each known module's loaders read; other modules are always loaded.
    static let formats: [String: ImageFormat] = [
        "vips-heif.so": .heif, "vips-jxl.so": .jxl, "vips-magick.so": .magick, "vips-poppler.so": .pdf,
        "vips-openslide.so": .openslide,
    ]

    /// The environment entries that make a worker load just the modules `allowed`
    /// needs: `VIPSHOME` moved to a folder with no modules in it (below the real,
    /// system-owned module folder, so nobody else can add one there), and the
    /// chosen modules' paths in `THUMBPIPE_VIPS_MODULES`. Empty (libvips left to
    /// itself) when libvips has no module folder.
    static func workerEnvironment(allowing allowed: [ImageFormat]) -> [String: String] {
        // libvips's own answer (it honours a VIPSHOME the user set, and sets it
        // in this process's environment once it has guessed).
        guard let libdir = vips_guess_libdir("thumbpipe", "VIPSHOME").map({ String(cString: $0) }) else { return [:] }
        let folder = "\(libdir)/vips-modules-\(vips_version(0)).\(vips_version(1))"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [:] }
        let chosen = names.filter { $0.hasSuffix(".so") }.sorted().filter { name in
            formats[name].map(allowed.contains) ?? true
        }
        return ["VIPSHOME": folder, "THUMBPIPE_VIPS_MODULES": chosen.map { "\(folder)/\($0)" }.joined(separator: ":")]
    }

    /// Loads the modules `THUMBPIPE_VIPS_MODULES` names (after vips_init).
    /// - Throws: ``VipsError`` for a module that cannot be loaded.
    static func loadChosen() throws {
        guard let list = ProcessInfo.processInfo.environment["THUMBPIPE_VIPS_MODULES"] else { return }
        for path in list.split(separator: ":").map(String.init) {
            try Vips.check(CVipsShim_load_module(path), "load module \(path)")
        }
    }
}
