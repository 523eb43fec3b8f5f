import CVips
import CVipsShim
import Foundation

/// An error reported by libvips, with the operation that failed and libvips's own message.
public struct VipsError: Error, Sendable, CustomStringConvertible {
    /// The libvips operation that failed, e.g. `jpegload` or `resize`.
    public var operation: String
    /// libvips's message, condensed to one line.
    public var message: String

    public var description: String { "\(operation): \(message)" }
}

/// The one place where libvips is started and where its error buffer becomes Swift errors.
enum Vips {
    private static let started: Result<Void, VipsError> = {
        // libvips's own threads per image: thumbpipe runs one image per core,
        // so extra threads per image only contend (measured in Benchmarks/).
        let threads = Int32(ProcessInfo.processInfo.environment["THUMBPIPE_VIPS_THREADS"].flatMap(Int32.init) ?? 1)
        if CVipsShim_init("thumbpipe", threads) != 0 {
            return .failure(takeError(operation: "vips_init"))
        }
        VipsModules.loadChosen()
        return .success(())
    }()

    /// Restricts loading to `formats`: every other loader, and every operation
    /// libvips marks untrusted, is blocked in this process. JPEG's loader is left
    /// unblocked whatever `formats` says; a JPEG source is still refused by
    /// thumbpipe's own format check (``Decode/header(of:)``) when `formats` lacks it.
    static func restrictLoaders(to formats: ImageFormats) throws {
        try start()
        var classes = Set(formats.map(\.loaderClass))
        classes.insert(ImageFormat.jpeg.loaderClass)
        var pointers = classes.sorted().map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) {
                CVipsShim_restrict_loaders($0.baseAddress, Int32($0.count))
            }
        }
    }

    /// The warnings libvips and its loaders logged since the last call, each
    /// distinct message once (with a count when repeated).
    static func takeWarnings() -> [String] {
        guard let text = CVipsShim_take_warnings() else { return [] }
        defer { CVipsShim_free(text) }
        var order: [String] = []
        var counts: [String: Int] = [:]
        for line in String(cString: text).split(whereSeparator: \.isNewline) {
            let message = line.trimmingCharacters(in: .whitespaces)
            guard !message.isEmpty else { continue }
            if counts[message] == nil { order.append(message) }
            counts[message, default: 0] += 1
        }
        return order.map { counts[$0, default: 1] > 1 ? "\($0) (×\(counts[$0, default: 1]))" : $0 }
    }

    /// Starts libvips once per process (vips_init); later calls return at once.
    /// - Throws: ``VipsError`` when libvips cannot start.
    static func start() throws {
        try started.get()
    }

    /// Checks a libvips return code, turning a failure into a ``VipsError`` that
    /// carries libvips's message (vips_error_buffer_copy, which also clears it).
    @inline(__always)
    static func check(_ result: Int32, _ operation: String) throws {
        if result != 0 { throw takeError(operation: operation) }
    }

    /// Reads and clears libvips's error buffer.
    static func takeError(operation: String) -> VipsError {
        var message = ""
        if let buffer = vips_error_buffer_copy() {
            message = String(cString: buffer)
            g_free(buffer)
        }
        let lines = message.split(whereSeparator: \.isNewline).map {
            $0.trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
        let condensed = lines.isEmpty ? "failed" : lines.suffix(2).joined(separator: "; ")
        return VipsError(operation: operation, message: condensed)
    }
}

/// Owns one `VipsImage` reference and releases it (g_object_unref) when dropped.
// @unchecked: a VipsImage is immutable once built and its reference count is atomic (GObject).
final class VImage: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<VipsImage>

    init(_ pointer: UnsafeMutablePointer<VipsImage>) { self.pointer = pointer }
    deinit { CVipsShim_unref(pointer) }

    var width: Int { Int(vips_image_get_width(pointer)) }
    var height: Int { Int(vips_image_get_height(pointer)) }
    var bands: Int { Int(vips_image_get_bands(pointer)) }
    var format: VipsBandFormat { vips_image_get_format(pointer) }
    var interpretation: VipsInterpretation { vips_image_get_interpretation(pointer) }
    var hasAlpha: Bool { vips_image_hasalpha(pointer) != 0 }

    /// The EXIF orientation libvips read from the header (1 when absent or invalid).
    var orientation: Int {
        let value = Int(CVipsShim_get_int(pointer, VIPS_META_ORIENTATION, 1))
        return (1...8).contains(value) ? value : 1
    }

    func string(_ field: String) -> String? {
        CVipsShim_get_string(pointer, field).map { String(cString: $0) }
    }

    func has(_ field: String) -> Bool { CVipsShim_has_field(pointer, field) != 0 }

    /// `body` over the embedded ICC profile's bytes; nil when the image has none.
    func withProfile<T>(_ body: (UnsafeRawBufferPointer) -> T?) -> T? {
        withBlob(VIPS_META_ICC_NAME, body)
    }

    /// A metadata block's bytes (`xmp-data`, `iptc-data`), copied; nil when the image has none.
    func blob(_ field: String) -> Data? { withBlob(field) { Data($0) } }

    private func withBlob<T>(_ field: String, _ body: (UnsafeRawBufferPointer) -> T?) -> T? {
        guard has(field) else { return nil }
        var data: UnsafeRawPointer? = nil
        var length = 0
        guard vips_image_get_blob(pointer, field, &data, &length) == 0, let data else {
            vips_error_clear()
            return nil
        }
        return body(UnsafeRawBufferPointer(start: data, count: length))
    }

    /// An EXIF field's value as libvips read it. libvips gives an ASCII field as
    /// `value (value, ASCII, n components, m bytes)` and others as `raw (shown, …)`:
    /// the ASCII value is the part that appears twice, the raw one the part before ` (`.
    func exif(_ field: String) -> String? {
        guard let text = string(field) else { return nil }
        if let ascii = text.range(of: ", ASCII, ", options: .backwards) {
            let both = text[..<ascii.lowerBound]
            let half = (both.count - 2) / 2
            if half >= 0, both.count == 2 * half + 2 {
                let value = both.prefix(half)
                if both.dropFirst(half).hasPrefix(" (") && both.suffix(half) == value { return String(value) }
            }
        }
        return text.range(of: " (").map { String(text[..<$0.lowerBound]) } ?? text
    }

    /// Runs a libvips call that produces a new image, through ``Vips/check(_:_:)``.
    func derive(
        _ operation: String,
        _ call: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws -> VImage {
        var out: UnsafeMutablePointer<VipsImage>? = nil
        try Vips.check(call(pointer, &out), operation)
        guard let out else { throw VipsError(operation: operation, message: "no image returned") }
        return VImage(out)
    }

    /// Computes the image into memory (vips_image_copy_memory), so later
    /// operations may read it in any order.
    func inMemory() throws -> VImage {
        guard let out = vips_image_copy_memory(pointer) else {
            throw Vips.takeError(operation: "copy_memory")
        }
        return VImage(out)
    }

    /// Builds an 8-bit sRGB image over a copy of interleaved pixels (vips_image_new_from_memory_copy).
    static func fromPixels(_ buffer: RGBABuffer) throws -> VImage {
        try buffer.pixels.withUnsafeBytes { raw in
            guard
                let image = vips_image_new_from_memory_copy(
                    raw.baseAddress, raw.count, Int32(buffer.width), Int32(buffer.height), 4,
                    VIPS_FORMAT_UCHAR)
            else { throw Vips.takeError(operation: "new_from_memory") }
            return VImage(image)
        }
    }

    /// Computes every pixel and hands them to `body`, packed row by row
    /// (vips_image_write_to_memory); the memory is freed when `body` returns.
    func withSamples<T>(operation: String = "write_to_memory", _ body: (UnsafeRawBufferPointer) throws -> T) throws
        -> T
    {
        var size = 0
        guard let memory = vips_image_write_to_memory(pointer, &size) else {
            throw Vips.takeError(operation: operation)
        }
        defer { g_free(memory) }
        return try body(UnsafeRawBufferPointer(start: memory, count: size))
    }

    /// Reads an 8-bit, 4-band image's pixels into a buffer.
    func rgbaPixels() throws -> RGBABuffer {
        precondition(bands == 4 && format == VIPS_FORMAT_UCHAR, "rgbaPixels needs uchar RGBA")
        return RGBABuffer(width: width, height: height, pixels: try withSamples { [UInt8]($0) })
    }
}

/// An interleaved 8-bit RGBA pixel buffer, straight (not premultiplied) alpha.
public struct RGBABuffer: Sendable, Equatable {
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int
    /// `width × height × 4` bytes, row by row, R G B A.
    public var pixels: [UInt8]

    /// Creates a buffer over existing pixels.
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height * 4, "pixel count does not match the size")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// The four channels of the pixel at column `x`, row `y`.
    public subscript(x: Int, y: Int) -> (r: UInt8, g: UInt8, b: UInt8, a: UInt8) {
        let i = (y * width + x) * 4
        return (pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3])
    }
}

/// Starting libvips from outside the library (tools, tests).
public enum LibVips {
    /// Starts libvips once per process; later calls return at once.
    /// - Throws: ``VipsError`` when libvips cannot start.
    public static func start() throws { try Vips.start() }

    /// Makes libvips load none of its modules in this process (a run's parent,
    /// which decodes nothing itself). Call it first thing, before any thread runs.
    public static func loadNoModules() { VipsModules.loadNoneInThisProcess() }

    /// The libvips version, e.g. `8.14.1`.
    public static var version: String {
        "\(vips_version(0)).\(vips_version(1)).\(vips_version(2))"
    }
}
