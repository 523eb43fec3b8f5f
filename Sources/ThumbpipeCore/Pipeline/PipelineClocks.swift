import CVips
import CVipsShim

/// Where a streaming decode's time goes. libvips computes lazily: the store's
/// encoder pulls strips, and decoding and colour conversion happen inside that
/// pull. Two pass-through timers (in the C shim) add up the time spent below
/// them, so the report can say how much was decoding, how much colour, and how
/// much the encoder itself, instead of calling it all "store".
final class PipelineClocks {
    /// Nanoseconds spent producing decoded pixels.
    let decoding = UnsafeMutablePointer<Int64>.allocate(capacity: 1)
    /// Nanoseconds spent producing sRGB pixels (decoding included).
    let colouring = UnsafeMutablePointer<Int64>.allocate(capacity: 1)

    init() {
        decoding.initialize(to: 0)
        colouring.initialize(to: 0)
    }

    deinit {
        decoding.deallocate()
        colouring.deallocate()
    }

    /// `image`, timed into the counter at `clock`; this object must outlive it.
    func time(_ image: VImage, _ clock: KeyPath<PipelineClocks, UnsafeMutablePointer<Int64>>, format: String)
        throws(ItemFailure) -> VImage
    {
        let counter = self[keyPath: clock]
        do {
            return try image.derive("timer") { CVipsShim_timer($0, $1, counter) }
        } catch let error as VipsError {
            throw Decode.failure(error, format: format, stage: .decode)
        } catch {
            throw ItemFailure(.decode, "\(error)")
        }
    }

    /// Nanoseconds of colour conversion alone.
    var colourNanoseconds: Int64 { max(0, colouring.pointee - decoding.pointee) }

    /// The split of a span that contained the whole pull: decode, then colour.
    var parts: [(Stage, Int64)] { [(.decode, decoding.pointee), (.colour, colourNanoseconds)] }
}
