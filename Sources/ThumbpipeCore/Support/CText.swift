extension String {
    /// The message a C function wrote into `buffer`: its bytes up to the first
    /// NUL (all of them when it wrote none), as UTF-8, invalid bytes replaced.
    init(cBuffer buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
