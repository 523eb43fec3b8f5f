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
        guard let folder = folder, let names = FileSystem.names(in: folder)?.compactMap(\.text) else { return [:] }
        let chosen = names.filter { $0.hasSuffix(".so") }.sorted().filter { name in
            formats[name].map(allowed.contains) ?? true
        }
        return ["VIPSHOME": folder, "THUMBPIPE_VIPS_MODULES": chosen.map { "\(folder)/\($0)" }.joined(separator: ":")]
    }

    /// libvips's module folder: the one beside the libvips this process loaded
    /// (`…/vips-modules-8.14` beside `…/libvips.so.42`), nil when there is none.
    /// Not libvips's own guess (vips_guess_libdir): that is made once a process
    /// and kept, so it would outlive the VIPSHOME ``loadNoneInThisProcess()`` sets.
    static let folder: String? = {
        guard let library = CVipsShim_library_file().map({ String(cString: $0) }) else { return nil }
        let folder =
            "\((library as NSString).deletingLastPathComponent)/vips-modules-\(vips_version(0)).\(vips_version(1))"
        return FileInfo(path: folder)?.kind == .directory ? folder : nil
    }()

    /// Makes this process load no module when libvips starts, as a worker's
    /// environment does for the modules its formats do not need: for a run's
    /// parent, which decodes nothing (its workers do) and uses libvips only to
    /// encode thumbnails past 1 Mpx as PNG (``PNGEncode``). Loading all five (ImageMagick, poppler, OpenSlide,
    /// libjxl, libheif) cost the parent about 30 ms of CPU, on the cores its
    /// workers use: a one-photo run's parent took 0.12–0.13 s of CPU with them
    /// and 0.09–0.10 s without (medians of 7 runs, twice). Call it before
    /// libvips starts and before any thread runs: it sets the process's environment.
    static func loadNoneInThisProcess() {
        guard let folder else { return }
        setenv("VIPSHOME", folder, 1)
        setenv("THUMBPIPE_VIPS_MODULES", "", 1)
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
