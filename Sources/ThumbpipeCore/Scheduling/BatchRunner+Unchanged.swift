import Foundation

extension BatchRunner {
    /// When nothing changed (every item unchanged, none removed, the same items
    /// in the same order with the same fields, and the archive on disk the one
    /// the last run wrote, byte for byte), a run writes nothing but its report: no worker, no
    /// archive. Failures of the source are replayed from the state.
    func runUnchanged(
        started: UInt64, startTime: Date, archivePath: String, fingerprint: String?,
        writeReport: (RunResult) throws -> Void
    ) throws -> RunResult? {
        guard let plan, let state, let fingerprint, plan.nothingChanged,
            try state.meta("archiveFingerprint") == fingerprint, let stamp = FileStamp(path: archivePath),
            try state.meta("archiveStamp") == "\(stamp.size):\(stamp.modified)",
            // Its bytes too: an archive edited in place with its size and time kept is written anew.
            let recorded = try state.meta("archiveHash"), ContentHash.file(archivePath) == recorded
        else { return nil }
        var failures: [FailureRecord] = []
        var failedAt: [Int: FailureRecord] = [:]
        for position in plan.keptFailures {
            let item = manifest.items[position]
            guard let failure = try state.record(forKey: item.itemKey)?.failure else { continue }
            var record = FailureRecord(
                line: item.line, itemKey: item.itemKey, itemName: item.itemName, source: item.image ?? "",
                stage: failure.stage, message: failure.message)
            record.known = true
            failures.append(record)
            failedAt[position] = record
            hooks.onFailure?(record)
        }
        // --log has one line per item, on a night with nothing to do too.
        if let onItem = hooks.onItem {
            for position in manifest.items.indices {
                let item = manifest.items[position]
                if let failure = failedAt[position] {
                    onItem(
                        ItemLogEntry(item, action: .failed, reason: "\(failure.stage.rawValue): \(failure.message)"))
                } else {
                    onItem(
                        ItemLogEntry(
                            item, action: .unchanged, reason: item.imagePath == nil ? "no image" : "unchanged"))
                }
            }
        }
        let withoutImage = manifest.items.count - manifest.items.withImageCount
        let succeeded = manifest.items.withImageCount - failures.count
        hooks.onProgress?(manifest.items.count)
        var result = RunResult(
            total: manifest.items.count, succeeded: succeeded, withoutImage: withoutImage, failures: failures,
            seconds: Double(Spans.now - started) / 1e9, sourceBytes: 0)
        result.classes = plan.counts
        result.changeKinds = plan.changeKinds
        result.duplicates =
            (try state.meta("duplicates")).flatMap {
                try? JSONDecoder().decode([[DuplicateItem]].self, from: Data($0.utf8))
            } ?? []
        result.timeSavedSeconds = plan.savedSeconds
        result.startTime = startTime
        result.parentPeakRSSBytes = ProcessMemory.peakResidentBytes()
        result.peakRSSBytes = result.parentPeakRSSBytes
        try writeReport(result)
        result.seconds = Double(Spans.now - started) / 1e9
        return result
    }
}
