import Foundation

/// The versions of the code that makes each output, part of each output's
/// fingerprint: after an upgrade that changes an output's bytes, an incremental
/// run redoes exactly the outputs whose version moved, and no other.
///
/// Bump ``thumbnail`` with any change to a thumbnail's pixels or PNG bytes (the
/// decode plan, the tap, the resampler, the rounded clip, the PNG encoder), and
/// ``store`` with any change to a store file's bytes (decode, colour conversion,
/// orientation, the JPEG encoder). The libvips version counts for both: its
/// decoders and encoders shape every output.
public struct OutputVersions: Sendable, Equatable {
    /// The thumbnail code's version.
    public var thumbnail: Int
    /// The store code's version.
    public var store: Int
    /// The libvips version the outputs are made with.
    public var libvips: String
    /// The switches that change output bytes (``buildOptions``).
    public var options = ""

    /// This build's versions.
    public static var current: OutputVersions {
        // thumbnail 2: the item's date now honours EXIF OffsetTimeOriginal; it is read
        // with the thumbnail, so items made before are made again to correct it.
        // thumbnail 3, store 2: 8-bit YCbCr JPEGs in sRGB take the plane path
        // (StorePath.planes): their store files and thumbnails are made from the
        // JPEG's planes, byte-different from libvips's.
        // thumbnail 4, store 3: 4:4:4, 4:2:2 and 4:4:0 JPEGs take the plane path too,
        // and every plane store is encoded band by band through libjpeg (edges padded
        // as libjpeg pads them, where TurboJPEG's planes padded otherwise).
        // thumbnail 5, store 4: float and colorimetric sources (scRGB from HDR merges,
        // XYZ, LAB) are converted by libvips, as vips_thumbnail does, not through the
        // profile embedded with them (which made them black).
        // store 5: JPEGs in an RGB matrix/TRC profile (Display P3, Adobe RGB…) take the
        // plane path, converted a band at a time: the same pixels as before (the same
        // tables), written by libjpeg as the plane stores are (their markers differ
        // from libvips's). Their thumbnails are unchanged, byte for byte.
        // store 6: a 4:2:0 JPEG in sRGB whose turn keeps its block grid has its store
        // taken as coded (ItemPlan.Planes.blocks, StorePath.planesRequantized): requantized
        // from its blocks. Its thumbnail is unchanged, byte for byte (the tap reads
        // the same pixels).
        // thumbnail 6: a JPEG in sRGB (or untagged) on the planes whose tap factor is
        // 16 or more is tapped from its blocks' means (their DCs: ItemPlan.Planes.tapMeans),
        // its factor rounded down to a multiple of 16: the same block means up to
        // rounding and clipping, no inverse DCT run for them.
        // thumbnail 7, store 7: the matrix/TRC conversion (CThumbKernels' shaper) sums
        // integer products, as lcms's own 8-bit transforms do, so that AVX-512 can
        // convert 64 pixels at a time: a converted photo's pixels move by one level in
        // some samples (0.47 % of every colour's, for a P3 matrix and a gamma-2.2 curve
        // in a standalone copy), still within one level of lcms's everywhere.
        // Photos in sRGB keep their store files byte for byte. Every thumbnail's PNG is
        // written by PNGEncode itself (libdeflate, rows filtered "up"), not libvips:
        // the same pixels, new bytes.
        // thumbnail 8, store 8: HEICs take the HEIC route (ItemPlan.heic: the container
        // read by thumbpipe, the tiles decoded by libavcodec): the same store pixels as
        // libheif's on the corpus's iPhones, written by libjpeg as the plane stores are;
        // their thumbnails tapped from the stored planes before the turn, not after it.
        // A float TIFF with a linear profile is converted through it once, not twice.
        // thumbnail 9, store 9: an upright HEIC in sRGB whose planes are JPEG's own YCbCr
        // (BT.601, full range: x265's and libheif's default) is encoded from its planes
        // as they are, not through RGB, and tapped from them as a JPEG's planes are:
        // its store's samples the decoded ones (not rounded through RGB and back).
        OutputVersions(thumbnail: 9, store: 9, libvips: LibVips.version, options: buildOptions)
    }

    /// The process-wide switches that change output bytes, in words ("" when none
    /// is set): `THUMBPIPE_JPEG_PLANES=off` keeps JPEGs off the plane path,
    /// `VIPS_NOVECTOR` turns off libvips's vector paths (their rounding differs).
    /// Part of both fingerprints, so outputs made under one are redone under another.
    public static var buildOptions: String {
        var options = ItemPlan.buildOptions
        if ProcessInfo.processInfo.environment["VIPS_NOVECTOR"] != nil { options.append("novector") }
        return options.joined(separator: ",")
    }

    /// Versions as given (to test what a bump redoes).
    public init(thumbnail: Int, store: Int, libvips: String, options: String = "") {
        self.thumbnail = thumbnail
        self.store = store
        self.libvips = libvips
        self.options = options
    }

    /// The libjpeg-turbo, libdeflate and libavcodec versions the outputs are made with
    /// (the plane code's decoder and encoder, the thumbnails' compressor, the HEIC
    /// route's decoder).
    public var codecs =
        "jpeg-turbo \(BuildInfo.libjpegTurboVersion) deflate \(BuildInfo.libdeflateVersion) avcodec \(BuildInfo.libavcodecVersion)"

    /// What the fingerprints carry of the build: the libvips, libjpeg-turbo and
    /// libdeflate versions, and the switches when any is set.
    var codeSuffix: String { "vips \(libvips) \(codecs)" + (options.isEmpty ? "" : "|\(options)") }
}
