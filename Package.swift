// swift-tools-version:6.0
import PackageDescription

// The source revision `thumbpipe --version` names; the Makefile passes `git describe`.
let revision = (Context.environment["THUMBPIPE_REVISION"] ?? "unknown").filter {
    $0.isLetter || $0.isNumber || "-._+".contains($0)
}

// MARK: - C libraries

let cLibraries: [Target] = [
    // libvips, found through pkg-config (Debian: libvips-dev).
    .systemLibrary(
        name: "CVips",
        pkgConfig: "vips",
        providers: [.apt(["libvips-dev"])]
    ),
    // SQLite, for incremental-run state (Debian: libsqlite3-dev).
    .systemLibrary(
        name: "CSQLite",
        pkgConfig: "sqlite3",
        providers: [.apt(["libsqlite3-dev"])]
    ),
    // libjpeg-turbo's libjpeg API (the one libvips decodes with), for the store of
    // JPEG sources through their planes (Debian: libjpeg62-turbo-dev).
    .systemLibrary(
        name: "CJpeg",
        pkgConfig: "libjpeg",
        providers: [.apt(["libjpeg62-turbo-dev"])]
    ),
    // A JPEG's store file and thumbnail tap through its Y, Cb, Cr planes, band by band.
    .target(
        name: "CJpegPlanes",
        dependencies: ["CJpeg", "CThumbKernels"]
    ),
    // FFmpeg's decoders' headers (Debian: libavcodec-dev), for a HEIC's HEVC
    // pictures; the library itself is loaded by CHevc at run time, not linked.
    .systemLibrary(
        name: "CAvcodec",
        path: "Sources/CAvcodec",
        providers: [.apt(["libavcodec-dev"])]
    ),
    // A HEIC's coded pictures decoded one at a time by libavcodec (CHevc.h says why).
    .target(
        name: "CHevc",
        dependencies: ["CAvcodec"],
        linkerSettings: [.linkedLibrary("dl")]
    ),
    // The few glibc calls Swift's Glibc module does not export (renameat2,
    // sync_file_range, mallopt): declared only under _GNU_SOURCE.
    .target(name: "CSystem"),
    // fontconfig, for which characters of a contact sheet's labels no installed font
    // has (Debian: libfontconfig-dev; pango draws with the same fonts).
    .systemLibrary(
        name: "CFontconfig",
        pkgConfig: "fontconfig",
        providers: [.apt(["libfontconfig-dev"])]
    ),
    // zlib's crc32, for the chunks of a thumbnail read back from the state (Debian: zlib1g-dev).
    .systemLibrary(
        name: "CZlib",
        pkgConfig: "zlib",
        providers: [.apt(["zlib1g-dev"])]
    ),
    // libdeflate, for the thumbnails' PNG image data (Debian: libdeflate-dev).
    .systemLibrary(
        name: "CDeflate",
        pkgConfig: "libdeflate",
        providers: [.apt(["libdeflate-dev"])]
    ),
    // libseccomp, for the worker's system-call filter (Debian: libseccomp-dev).
    .systemLibrary(
        name: "CSeccomp",
        pkgConfig: "libseccomp",
        providers: [.apt(["libseccomp-dev"])]
    ),
    // The worker's sandbox: Landlock's raw system calls and the seccomp filter.
    .target(
        name: "CSandbox",
        dependencies: ["CSeccomp"],
        // The tests' hostile worker (Hostile.c) exists in debug builds only.
        cSettings: [.define("THUMBPIPE_FAULTS", .when(configuration: .debug))]
    ),
    // Fixed-arity wrappers over libvips's variadic calls, which Swift cannot call.
    .target(
        name: "CVipsShim",
        dependencies: ["CVips"],
        // GModule (part of GLib, which libvips needs) loads libvips modules one by one.
        linkerSettings: [.linkedLibrary("gmodule-2.0")]
    ),
    // thumbpipe's own pixel kernels as libvips operations: the thumbnail tap and
    // its resample, the table-driven sRGB conversion, the pipeline clocks.
    .target(
        name: "CThumbKernels",
        dependencies: ["CVips"]
    ),
    // The build's source revision, for --version (a define only C can take).
    .target(
        name: "CBuildInfo",
        cSettings: [.define("THUMBPIPE_REVISION", to: "\"\(revision)\"")]
    ),
]

// MARK: - Library and command-line tool

let products: [Target] = [
    .target(
        name: "ThumbpipeCore",
        dependencies: [
            "CVips", "CVipsShim", "CThumbKernels", "CJpegPlanes", "CSQLite", "CBuildInfo", "CSandbox", "CFontconfig",
            "CSystem", "CZlib", "CDeflate", "CHevc",
        ]
    ),
    .executableTarget(
        name: "thumbpipe",
        dependencies: ["ThumbpipeCore"]
    ),
    // The fuzz targets (Fuzz/): a libFuzzer program under `make fuzz`, a replay program otherwise.
    .target(name: "CFuzzDriver", path: "Fuzz/Sources/CFuzzDriver"),
    .executableTarget(
        name: "thumbpipe-fuzz",
        dependencies: ["ThumbpipeCore", "CFuzzDriver"],
        path: "Fuzz/Sources/thumbpipe-fuzz",
        swiftSettings: [.unsafeFlags(["-parse-as-library"])]
    ),
]

// MARK: - Benchmarks

let benchmarks: [Target] = [
    .executableTarget(
        name: "archive-benchmark",
        dependencies: ["ThumbpipeCore"],
        path: "Benchmarks/ArchiveBenchmark"
    ),
    .executableTarget(
        name: "store-floor",
        dependencies: ["ThumbpipeCore"],
        path: "Benchmarks/StoreFloor"
    ),
]

// MARK: - Tests

let tests: [Target] = [
    // The fidelity tests' reference, written against libvips directly so that it
    // shares no code with the product it checks.
    .target(
        name: "CReferenceVips",
        dependencies: ["CVips"],
        path: "Tests/CReferenceVips"
    ),
    .target(
        name: "ThumbpipeTestSupport",
        dependencies: ["ThumbpipeCore", "CVips", "CVipsShim", "CReferenceVips"],
        path: "Tests/ThumbpipeTestSupport"
    ),
    .testTarget(
        name: "ThumbpipeCoreTests",
        dependencies: ["ThumbpipeCore", "ThumbpipeTestSupport", "CVips", "CVipsShim", "CThumbKernels", "CJpegPlanes"]
    ),
    .testTarget(
        name: "ThumbpipeCLITests",
        dependencies: ["ThumbpipeCore", "ThumbpipeTestSupport"]
    ),
]

let package = Package(
    name: "thumbpipe",
    products: [
        .executable(name: "thumbpipe", targets: ["thumbpipe"]),
        .library(name: "ThumbpipeCore", targets: ["ThumbpipeCore"]),
    ],
    targets: cLibraries + products + benchmarks + tests,
    swiftLanguageModes: [.v6]
)

let swiftSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]
for target in package.targets where target.type != .system {
    if ["CVipsShim", "CThumbKernels", "CJpegPlanes", "CReferenceVips", "CBuildInfo", "CSandbox"].contains(target.name) {
        continue
    }
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
// Only the library's release build skips the run-time exclusivity checks (debug
// builds, and so the tests, keep them; so does every other target): in the archive
// writer they were a third of a million-item rebuild's time (297 -> 414 MB/s,
// Benchmarks/ArchiveBenchmark rebuild). Nowhere else was a cost measured.
for target in package.targets where target.name == "ThumbpipeCore" {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
        ]
}
// The pixel code in C (the kernels, the plane path, the libvips shim) is built
// optimised in the debug build too: `make test` runs it on every test photo, in
// the test bundle and in the debug thumbpipe the command-line suites start, and
// at -O0 it was most of their time. (Integer code and IEEE float without
// -ffast-math: the same bytes at either level.)
for target in package.targets where ["CThumbKernels", "CJpegPlanes", "CVipsShim"].contains(target.name) {
    target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-O2"], .when(configuration: .debug))]
}
