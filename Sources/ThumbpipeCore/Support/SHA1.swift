import CVips

/// SHA-1, used only where a format asks for it: name-based UUIDs (RFC 4122 v5).
/// GLib's `GChecksum` computes it (GLib comes with libvips).
enum SHA1 {
    /// The 20-byte digest of `bytes`.
    static func hash<S: Sequence>(_ bytes: S) -> [UInt8] where S.Element == UInt8 {
        GLibDigest.of(bytes, G_CHECKSUM_SHA1, length: 20)
    }
}

/// MD5, used only where a format asks for it: an IPTC block's digest (Photoshop's
/// resource 0x0425, which the MWG guidelines compare).
enum MD5 {
    /// The 16-byte digest of `bytes`.
    static func hash<S: Sequence>(_ bytes: S) -> [UInt8] where S.Element == UInt8 {
        GLibDigest.of(bytes, G_CHECKSUM_MD5, length: 16)
    }
}

/// The one place GLib's `GChecksum` is called.
private enum GLibDigest {
    static func of<S: Sequence>(_ bytes: S, _ type: GChecksumType, length: Int) -> [UInt8]
    where S.Element == UInt8 {
        let data = Array(bytes)
        guard let checksum = g_checksum_new(type) else { preconditionFailure("GLib has no checksum \(type)") }
        defer { g_checksum_free(checksum) }
        data.withUnsafeBufferPointer { g_checksum_update(checksum, $0.baseAddress, gssize($0.count)) }
        var digest = [UInt8](repeating: 0, count: length)
        var written = gsize(digest.count)
        g_checksum_get_digest(checksum, &digest, &written)
        precondition(written == length, "a digest of \(length) bytes")
        return digest
    }
}

/// Name-based UUIDs (RFC 4122 version 5).
enum NameBasedUUID {
    /// The namespace thumbpipe's default item keys live in (RFC 4122's URL namespace).
    static let namespace: [UInt8] = [
        0x6B, 0xA7, 0xB8, 0x11, 0x9D, 0xAD, 0x11, 0xD1, 0x80, 0xB4, 0x00, 0xC0, 0x4F, 0xD4, 0x30, 0xC8,
    ]

    /// The upper-case v5 UUID of `name` in ``namespace``.
    static func make(_ name: String) -> String {
        var digest = Array(SHA1.hash(namespace + Array(name.utf8)).prefix(16))
        digest[6] = (digest[6] & 0x0F) | 0x50
        digest[8] = (digest[8] & 0x3F) | 0x80
        let hex = digest.map { String($0, radix: 16, uppercase: true).leftPadded(to: 2) }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(
                hex[
                    hex.index(
                        hex.startIndex, offsetBy: range.lowerBound)..<hex.index(
                            hex.startIndex, offsetBy: range.upperBound)])
        }
        return parts.joined(separator: "-")
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
