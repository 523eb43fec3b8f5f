import CVips
import CVipsShim
import Foundation

/// The full-size image store: one baseline JPEG per item, named by its key with
/// no extension, as Homepwner's `BNRImageStore` keeps them.
public struct ImageStore: Sendable {
    /// Where the store files live (the output folder's layout; "" for an
    /// encoder that only encodes, as a worker's is).
    public let layout: OutputFolder.Layout
    /// The store settings (JPEG quality, orientation handling).
    public var settings: PipelineSettings.Store

    /// The folder the store files live in (the output folder).
    public var folder: String { layout.root }

    /// Creates a store in `output` (nil for one that only encodes).
    public init(output: OutputFolder?, settings: PipelineSettings.Store) {
        layout = output?.layout ?? OutputFolder.Layout(root: "")
        self.settings = settings
    }

    /// The path of the store file for `key`.
    public func path(forKey key: String) -> String { layout.store(key: key) }

    /// Encodes a decoded full-size image as a JPEG under a temporary name in the
    /// store's folder; the caller commits it with ``TemporaryFile/commit(to:sync:)``.
    func writeTemporary(_ decoded: DecodedImage) throws -> TemporaryFile {
        let file = try TemporaryFile(in: folder)
        do {
            try encode(decoded, to: file.descriptor, named: file.path)
            return file
        } catch {
            file.discard()
            throw error
        }
    }

    /// Encodes a decoded full-size image as a JPEG into the open file `descriptor`
    /// (a worker's sealed memory file, or a temporary in the store's folder).
    ///
    /// With `store.orientation` `rotate` (the default) the pixels are turned
    /// upright, so the file displays upright in any viewer; with `tag` they
    /// keep their stored orientation and only the EXIF orientation tag says how
    /// to show them. Unless `store.keepMetadata` is set, every metadata item
    /// (GPS, maker notes, embedded thumbnails, profiles) is dropped.
    /// - Throws: ``ItemFailure`` at `.store` for a decode or encode failure,
    ///   ``ThumbpipeError`` (74) when the bytes cannot be written.
    /// - Parameter name: the file's name in messages.
    func encode(_ decoded: DecodedImage, to descriptor: FileDescriptor, named name: String) throws {
        do {
            var image = decoded.image
            if settings.orientation == .rotate && image.orientation != 1 {
                // Turning needs the whole image at once: decode it to memory first.
                if !decoded.inMemory { image = try image.inMemory() }
                image = try image.derive("autorot") { CVipsShim_autorot($0, $1) }
            }
            let keep: Int32 = settings.keepMetadata ? 1 : 0
            image = try image.derive("copy") { CVipsShim_remove_metadata($0, $1, keep) }
            let encoder = image
            let status = CVipsShim_jpegsave_fd(
                encoder.pointer, descriptor.rawValue, Int32(settings.vipsQuality), settings.optimizeCoding ? 1 : 0)
            let writeErrno = errno
            if status != 0 {
                let error = Vips.takeError(operation: "jpegsave")
                // A failed write is the run's problem (exit 74), not the item's.
                if [ENOSPC, EFBIG, EDQUOT, EIO].contains(writeErrno) {
                    throw ThumbpipeError(.ioError, "\(name): write failed: \(ThumbpipeError.errnoText(writeErrno))")
                }
                if error.message.contains("write failed") {
                    throw ThumbpipeError(
                        .ioError, "\(name): write failed: disk full, file size limit or I/O error (\(error.message))")
                }
                throw ItemFailure(error, format: decoded.header.format, stage: .store)
            }
        } catch let error as VipsError {
            throw ItemFailure(error, format: decoded.header.format, stage: .store)
        }
    }

    /// Decodes the source at `path` in full and writes its store file for `key`
    /// atomically: the store step on its own, as the benchmark's floor runs it.
    /// - Throws: ``ItemFailure`` when the source cannot be decoded or encoded,
    ///   ``ThumbpipeError`` (73/74) when the file cannot be written.
    public func write(source path: String, forKey key: String, limits: PipelineSettings.Limits) throws {
        let decode = Decode(limits: limits)
        let source = try SourceBytes(path: path, limit: limits.maxFileBytes)
        let decoded = try decode.fullSize(source, header: try decode.header(of: source))
        try writeTemporary(decoded).commit(to: self.path(forKey: key))
    }

    /// Deletes the store file for `key`, as `deleteImageForKey:` does; a missing file is fine.
    public func delete(forKey key: String) {
        try? FileSystem.remove(path(forKey: key))
    }

    /// Carries out what an item's ledger decided for its store file, and says
    /// what came of it (``ItemLedger/StoreEffect``, ``ItemLedger/StoreFact``).
    /// - Parameters:
    ///   - source: the item's photo (a carried store file is the photo itself).
    ///   - bytes: the store file the job made, checked by the parent.
    ///   - claim: notes the name before anything is placed at it.
    func carryOut(
        _ effect: ItemLedger.StoreEffect, key: String, source: String?, bytes: Data?, claim: (String) -> Void
    ) throws -> ItemLedger.StoreFact {
        let target = path(forKey: key)
        switch effect {
        case .none, .discardWritten:
            return .done
        case .placeMoved(let from):
            // The photo's store file under its new name: linked, or copied where links cannot be.
            claim(key)
            _ = try Merge.place(path(forKey: from), at: target)
            return .done
        case .commitWritten(let replacing):
            claim(key)
            // The parent writes every byte it commits: the ones it checked.
            let file = try TemporaryFile(in: folder)
            do {
                try (bytes ?? Data()).withUnsafeBytes { try file.write($0) }
                try file.closeForCommit()
            } catch {
                file.discard()
                throw error
            }
            let placed = try TemporaryFile.commitClosed(file.path, to: target, replacing: replacing)
            return placed ? .done : .appeared(path: target)
        case .placeCarried:
            claim(key)
            _ = try Merge.place(source ?? "", at: target)
            return .placed(hash: ContentHash.file(target), sourceStamp: source.flatMap { FileStamp(path: $0) })
        }
    }
}
