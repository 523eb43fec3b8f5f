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
    static func workerEnvironment(allowing allowed: ImageFormats) -> [String: String] {
        // libvips's own answer (it honours a VIPSHOME the user set, and sets it
        // in this process's environment once it has guessed).
        guard let libdir = vips_guess_libdir("thumbpipe", "VIPSHOME").map({ String(cString: $0) }) else { return [:] }
        let folder = "\(libdir)/vips-modules-\(vips_version(0)).\(vips_version(1))"
        guard let names = FileSystem.names(in: folder)?.compactMap(\.text) else { return [:] }
        let chosen = names.filter { $0.hasSuffix(".so") }.sorted().filter { name in
            formats[name].map(allowed.contains) ?? true
        }
        return ["VIPSHOME": folder, "THUMBPIPE_VIPS_MODULES": chosen.map { "\(folder)/\($0)" }.joined(separator: ":")]
    }

    /// Loads the modules `THUMBPIPE_VIPS_MODULES` names (after vips_init). As
    /// libvips does with its own, a module that will not load is skipped (its
    /// formats then fail as unsupported), with one line on standard error.
    static func loadChosen() {
        guard let list = ProcessInfo.processInfo.environment["THUMBPIPE_VIPS_MODULES"] else { return }
        for path in list.split(separator: ":").map(String.init) where CVipsShim_load_module(path) != 0 {
            let error = Vips.takeError(operation: "load module")
            try? FileDescriptor.standardError.write("thumbpipe: cannot load libvips module \(path): \(error.message)\n")
        }
    }
}
