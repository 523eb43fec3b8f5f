extension String {
    /// The message a C function wrote into `buffer`: its bytes up to the first
    /// NUL (all of them when it wrote none), as UTF-8, invalid bytes replaced.
    init(cBuffer buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension String {
    /// A library's message with its numbers of two digits or more as N: the report
    /// groups items by their reasons, so a collection of damaged files makes a few
    /// groups ("cu_qp_delta N is outside the valid range [-N, N]"), not one a file.
    var numbersAsN: String { replacing(/\b[0-9]{2,}\b/, with: "N") }
}
