import CJpegPlanes
import CThumbKernels
import Foundation

extension JpegPlaneStore {
    /// The `jpeg-planes` fuzz target (``FuzzTarget``): transcode and tap on any bytes,
    /// the orientation (1–8) and optimised coding chosen by the input's length; a store
    /// it makes must be well formed and decode again.
    /// - Returns: nil, or what property broke.
    static func fuzz(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard bytes.count > 1, let size = FuzzTarget.frameSize(bytes) else { return nil }
        guard size.width > 0, size.height > 0, size.width * size.height <= 4 << 20 else { return nil }
        let orientation = Int32(bytes.count % 8) + 1
        // Every other input's tap fed the blocks' sums (its factor then a multiple of 16).
        let means = bytes.count / 64 % 2 == 1
        let tap = try? AspectFillScale(width: 16, height: 16).tap(
            width: size.width, height: size.height, bands: 3, factor: means ? 16 : 2, orientation: Int(orientation))
        var job = CJpegPlanesJob(
            width: Int32(size.width), height: Int32(size.height), orientation: orientation, quality: 50,
            optimize_coding: Int32(bytes.count / 8 % 2), tap: tap?.pointer,
            // Every other input through the converting path (decoded to RGB, converted, encoded).
            shaper: bytes.count / 16 % 2 == 1 ? fuzzShaper : nil, blocks: Int32(bytes.count / 32 % 2),
            tap_means: means ? 1 : 0, hold_turned: Int32(bytes.count / 128 % 2))
        var result = CJpegPlanesResult()
        var error = [CChar](repeating: 0, count: 256)
        let status = CJpegPlanes_transcode(
            bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, &job, &result, &error, error.count)
        defer { CJpegPlanes_free_buffer(result.jpeg) }
        guard status == 0, let jpeg = result.jpeg else { return nil }
        // The store it made is a well-formed baseline JPEG, upright, that decodes again on the planes.
        let store = UnsafeRawBufferPointer(start: jpeg, count: Int(result.size))
        let upright = orientation >= 5 ? (size.height, size.width) : (size.width, size.height)
        if let problem = StoreCheck.problem(store, width: upright.0, height: upright.1, metadata: false) {
            return "the plane store \(problem)"
        }
        var again = CJpegPlanesJob(
            width: Int32(upright.0), height: Int32(upright.1), orientation: 1, quality: 0, optimize_coding: 0, tap: nil,
            shaper: nil, blocks: 0, tap_means: 0, hold_turned: 0)
        var decoded = CJpegPlanesResult()
        let status2 = CJpegPlanes_transcode(
            store.bindMemory(to: UInt8.self).baseAddress, store.count, &again, &decoded, &error, error.count)
        CJpegPlanes_free_buffer(decoded.jpeg)
        return status2 == 0
            ? nil
            : "the plane store does not decode: \(String(cBuffer: error))"
    }

}

/// A converting path's tables for the fuzzer: a gamma-2.2 curve, a matrix that
/// mixes the channels, and a linear encode, so every table entry is exercised.
nonisolated(unsafe) private let fuzzShaper: OpaquePointer? = {
    let linear = (0..<3).flatMap { _ in (0..<256).map { Float(pow(Double($0) / 255, 2.2)) } }
    let matrix: [Float] = [0.9, 0.2, -0.1, 0.05, 1.0, -0.05, -0.02, 0.1, 0.92]
    let steps = Int(CTHUMBKERNELS_SHAPER_STEPS)
    let encode = (0..<steps).map { UInt8((Double($0) / Double(steps - 1) * 255).rounded()) }
    return CThumbKernels_shaper_new(linear, matrix, encode)
}()
