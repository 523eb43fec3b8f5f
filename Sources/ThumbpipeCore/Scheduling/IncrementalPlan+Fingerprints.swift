import Foundation

/// The fingerprints a plan compares records with: what shapes each output.
extension IncrementalPlan {
    /// The fingerprint of what shapes a thumbnail: every setting that shapes it
    /// (``SettingDescription/shapes``) and the versions of the code that makes it
    /// (``OutputVersions``).
    public static func thumbnailFingerprint(_ settings: PipelineSettings, versions: OutputVersions = .current)
        -> String
    {
        Fingerprint.make(
            settings: "thumbnail|\(settings.fingerprintText(of: .thumbnail))",
            code: "thumbnail v\(versions.thumbnail)|\(versions.codeSuffix)")
    }

    /// The fingerprint of the archive a run of `manifest` writes: every field of
    /// every item in order, the manifest's time (the date of items without a
    /// photo) and the settings that shape items. With every item unchanged, an
    /// equal fingerprint means the archive on disk is already the one to write.
    public static func archiveFingerprint(_ manifest: Manifest, _ settings: PipelineSettings) -> String {
        var hash = ContentHash.Streaming()
        func add(_ text: String) {
            var bytes = Array(text.utf8)
            bytes.append(0)
            bytes.withUnsafeBytes { hash.update($0) }
        }
        add(thumbnailFingerprint(settings))
        add(storeFingerprint(settings))
        add(settings.fingerprintText(of: .archive))
        add(String(manifest.modificationDate.timeIntervalSince1970))
        // The packed items: every field of every item, in order.
        manifest.items.withPackedBytes { hash.update($0) }
        return String(hash.finish(), radix: 16)
    }

    /// The fingerprint a failed item is recorded with: what shapes its thumbnail
    /// and every limit that can make it fail. A failure is kept while the source
    /// and these stay the same.
    public static func failureFingerprint(_ settings: PipelineSettings) -> String {
        ContentHash.hex("failure|\(thumbnailFingerprint(settings))|\(settings.fingerprintText(of: .failure))")
    }

    /// The fingerprint of what shapes a store file: every setting that shapes it
    /// and the versions of the code that makes it (``OutputVersions``).
    public static func storeFingerprint(_ settings: PipelineSettings, versions: OutputVersions = .current) -> String {
        Fingerprint.make(
            settings: "store|\(settings.fingerprintText(of: .store))",
            code: "store v\(versions.store)|\(versions.codeSuffix)")
    }
}
