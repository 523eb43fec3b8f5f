import CThumbKernels
import CVips

/// Where a streaming decode's time goes. libvips computes lazily: the store's
/// encoder pulls strips, and decoding and colour conversion happen inside that
/// pull. Two pass-through timers (CThumbKernels) add up the time spent below
/// them, so the report can say how much was decoding, how much colour, and how
/// much the encoder itself, instead of calling it all "store".
final class PipelineClocks {
    /// Nanoseconds spent producing decoded pixels.
    private let decoding = CThumbKernels_clock_new()!
    /// Nanoseconds spent producing sRGB pixels (decoding included).
    private let colouring = CThumbKernels_clock_new()!

    /// The two clocks a pipeline has.
    enum Clock { case decoding, colouring }

    deinit {
        CThumbKernels_clock_unref(decoding)
        CThumbKernels_clock_unref(colouring)
    }

    /// `image`, timed into `clock` (the image holds the clock as long as it lives).
    func time(_ image: VImage, _ clock: Clock, format: String) throws(ItemFailure) -> VImage {
        let counter = clock == .decoding ? decoding : colouring
        do {
            return try image.derive("timer") { CThumbKernels_timer($0, $1, counter) }
        } catch {
            throw ItemFailure(error, format: format, stage: .decode)
        }
    }

    private var decodingNanoseconds: Int64 { CThumbKernels_clock_nanoseconds(decoding) }

    /// Nanoseconds of colour conversion alone.
    var colourNanoseconds: Int64 { max(0, CThumbKernels_clock_nanoseconds(colouring) - decodingNanoseconds) }

    /// The split of a span that contained the whole pull: decode, then colour.
    var parts: [(Stage, Int64)] { [(.decode, decodingNanoseconds), (.colour, colourNanoseconds)] }
}
