import Foundation

/// The incremental-run state in `OUT/.thumbpipe/state.sqlite` (SQLite, WAL):
/// one row per item with its source and settings fingerprints, the hashes of
/// what was written, and its thumbnail, so unchanged items need no decoding.
/// Rows are committed as items finish, so a killed run resumes where it stopped.
// @unchecked: every use of the database and the batch counters is under `lock`.
public final class RunState: @unchecked Sendable {
    /// The schema version this thumbpipe reads and writes.
    /// 2 added `missing_since` (a source missing while its outputs are kept); 3
    /// stores a failure structured (`failure_stage`, `failure` its message, and
    /// `failure_fingerprint`, which schema 2 kept in `thumbnail_fingerprint`), and
    /// the item's name and a hash of its fields (`item_name`, `fields_hash`); 4
    /// the source's identity (`source_inode`, `source_changed`); 5 the photo's
    /// own title and its sidecars' stamp (`title`, `sidecars`); 6 the hash of its
    /// image data without its metadata (`image_hash`, ``ImageDataHash``).
    /// An older state is upgraded in place when opened for writing, and read as it
    /// is when opened read-only (a dry run).
    public static let schemaVersion: Int64 = 6
    private let database: SQLiteDatabase
    private let lock = NSLock()
    /// The schema of the rows as they are on disk (older only when opened read-only).
    private let rowSchema: Int64

    /// Opens (creating when writable) the state of an output folder.
    /// - Throws: ``ThumbpipeError``: 65 for a state file from a newer thumbpipe or one that
    ///   is not a database, 73 when it cannot be created.
    public init(output: OutputFolder, readOnly: Bool = false) throws {
        database = try SQLiteDatabase(path: output.layout.state, readOnly: readOnly)
        var version: Int64 = 0
        try database.query("PRAGMA user_version") { version = $0.integer(0) }
        if version > Self.schemaVersion {
            throw ThumbpipeError(
                .dataError,
                "\(database.path): written by a newer thumbpipe (state schema \(version); this one reads \(Self.schemaVersion)); run that version, or use a new output folder"
            )
        }
        // Written, an older state is upgraded below; read, it is read as it is.
        rowSchema = readOnly && version > 0 ? version : Self.schemaVersion
        guard !readOnly else { return }
        try database.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        if version == 0 {
            try database.execute(
                """
                CREATE TABLE IF NOT EXISTS items (
                    item_key TEXT PRIMARY KEY,
                    source_path TEXT NOT NULL,
                    source_size INTEGER NOT NULL,
                    source_modified INTEGER NOT NULL,
                    source_hash TEXT NOT NULL,
                    thumbnail_fingerprint TEXT NOT NULL,
                    store_fingerprint TEXT NOT NULL,
                    date_created REAL,
                    store_size INTEGER NOT NULL,
                    store_modified INTEGER NOT NULL,
                    store_hash TEXT NOT NULL,
                    failure TEXT,
                    seconds REAL NOT NULL,
                    thumbnail BLOB,
                    missing_since REAL,
                    failure_stage TEXT,
                    failure_fingerprint TEXT NOT NULL DEFAULT '',
                    item_name TEXT NOT NULL DEFAULT '',
                    fields_hash INTEGER NOT NULL DEFAULT 0,
                    source_inode INTEGER NOT NULL DEFAULT 0,
                    source_changed INTEGER NOT NULL DEFAULT 0,
                    title TEXT,
                    sidecars TEXT,
                    image_hash TEXT
                );
                PRAGMA user_version = \(Self.schemaVersion);
                """)
        } else if version < Self.schemaVersion {
            try database.execute(Self.upgrade(from: version))
        }
        // Facts about the run as a whole (the archive it wrote); readers that do not know it ignore it.
        try database.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        // IMMEDIATE: the write lock is taken (waiting up to the busy timeout) when
        // the transaction begins, not on its first write after reads, where another
        // process's lock would fail it at once.
        try database.execute("BEGIN IMMEDIATE")
    }

    /// The statements that bring rows of schema `version` to ``schemaVersion``, in one
    /// transaction: a killed upgrade leaves the old state as it was.
    static func upgrade(from version: Int64) -> String {
        var steps = ["BEGIN IMMEDIATE;"]
        if version < 2 { steps.append("ALTER TABLE items ADD COLUMN missing_since REAL;") }
        if version < 3 {
            // `stage: message` split into its parts (a stage not known is a decode
            // failure, as schema 2 read it); the failure's fingerprint moves out of
            // the thumbnail's.
            steps.append(
                """
                ALTER TABLE items ADD COLUMN failure_stage TEXT;
                ALTER TABLE items ADD COLUMN failure_fingerprint TEXT NOT NULL DEFAULT '';
                ALTER TABLE items ADD COLUMN item_name TEXT NOT NULL DEFAULT '';
                ALTER TABLE items ADD COLUMN fields_hash INTEGER NOT NULL DEFAULT 0;
                UPDATE items SET
                    failure_stage = CASE WHEN instr(failure, ':') > 1
                        AND substr(failure, 1, instr(failure, ':') - 1) IN (\(FailureStage.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")))
                        THEN substr(failure, 1, instr(failure, ':') - 1) ELSE 'decode' END,
                    failure = CASE WHEN instr(failure, ':') > 1
                        AND substr(failure, 1, instr(failure, ':') - 1) IN (\(FailureStage.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")))
                        THEN trim(substr(failure, instr(failure, ':') + 1)) ELSE failure END,
                    failure_fingerprint = thumbnail_fingerprint,
                    thumbnail_fingerprint = ''
                WHERE failure IS NOT NULL;
                """)
        }
        if version < 4 {
            // Unknown (0) until an item is recorded again: its identity is not compared till then.
            steps.append(
                """
                ALTER TABLE items ADD COLUMN source_inode INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE items ADD COLUMN source_changed INTEGER NOT NULL DEFAULT 0;
                """)
        }
        if version < 5 {
            // Unknown (NULL) until an item is read again: it keeps the name it had till then.
            steps.append("ALTER TABLE items ADD COLUMN title TEXT; ALTER TABLE items ADD COLUMN sidecars TEXT;")
        }
        if version < 6 {
            // Unknown (NULL) until an item is read again: an edit of its photo till then redoes it.
            steps.append("ALTER TABLE items ADD COLUMN image_hash TEXT;")
        }
        steps.append("PRAGMA user_version = \(schemaVersion); COMMIT;")
        return steps.joined(separator: "\n")
    }

    /// A run-wide fact, e.g. the fingerprint of the archive last written.
    public func meta(_ key: String) throws -> String? {
        var value: String?
        try lock.withLock {
            try database.query("SELECT value FROM meta WHERE key = ?", [.text(key)]) { value = $0.text(0) }
        }
        return value
    }

    /// Records a run-wide fact (committed with the next commit).
    public func setMeta(_ key: String, _ value: String) throws {
        try lock.withLock {
            try database.query("INSERT OR REPLACE INTO meta VALUES (?, ?)", [.text(key), .text(value)])
        }
    }

    deinit { try? commit() }

    /// The record of `key`, without its thumbnail.
    public func record(forKey key: String) throws -> ItemRecord? {
        var result: ItemRecord?
        try lock.withLock {
            try database.query(
                """
                SELECT item_key, source_path, source_size, source_modified, source_hash, thumbnail_fingerprint,
                       store_fingerprint, date_created, store_size, store_modified, store_hash, failure, seconds,
                       \(rowSchema >= 2 ? "missing_since" : "NULL"),
                       \(rowSchema >= 3 ? "failure_stage, failure_fingerprint, item_name, fields_hash" : "NULL, NULL, '', 0"),
                       \(rowSchema >= 4 ? "source_inode, source_changed" : "0, 0"),
                       \(rowSchema >= 5 ? "title, sidecars" : "NULL, NULL"),
                       \(rowSchema >= 6 ? "image_hash" : "NULL")
                FROM items WHERE item_key = ?
                """, [.text(key)]
            ) { row in
                var record = ItemRecord(
                    itemKey: row.text(0) ?? key, sourcePath: row.text(1) ?? "", sourceSize: row.integer(2),
                    sourceModified: row.integer(3), sourceHash: row.text(4) ?? "",
                    thumbnailFingerprint: row.text(5) ?? "", storeFingerprint: row.text(6) ?? "",
                    dateCreated: row.real(7), storeSize: row.integer(8), storeModified: row.integer(9),
                    storeHash: row.text(10) ?? "", failure: nil, seconds: row.real(12) ?? 0,
                    missingSince: row.real(13), failureFingerprint: row.text(15) ?? "", itemName: row.text(16) ?? "",
                    fieldsHash: UInt64(bitPattern: row.integer(17)))
                record.sourceInode = UInt64(bitPattern: row.integer(18))
                record.sourceChanged = row.integer(19)
                record.title = row.text(20)
                record.sidecarStamp = row.text(21)
                record.imageHash = row.text(22)
                if let message = row.text(11) {
                    if self.rowSchema >= 3 {
                        record.failure = ItemFailure(FailureStage(rawValue: row.text(14) ?? "") ?? .decode, message)
                    } else {
                        // Schema 1 and 2, read as they are: `stage: message`, and the
                        // failure's fingerprint where the thumbnail's is.
                        record.failure = ItemFailure(legacy: message)
                        record.failureFingerprint = record.thumbnailFingerprint
                        record.thumbnailFingerprint = ""
                    }
                }
                result = record
            }
        }
        if let problem = result?.timeProblem {
            throw ThumbpipeError(
                .dataError,
                "\(database.path): item '\(key)': \(problem); the state is damaged: run again with --rebuild-state")
        }
        return result
    }

    /// The thumbnail recorded for `key`.
    public func thumbnail(forKey key: String) throws -> Data? {
        var result: Data?
        try lock.withLock {
            try database.query("SELECT thumbnail FROM items WHERE item_key = ?", [.text(key)]) { result = $0.blob(0) }
        }
        return result
    }

    /// Every recorded item, in one sequential scan (without its thumbnail).
    public func forEachKey(_ body: (RecordedKey) throws -> Void) throws {
        let fields = rowSchema >= 3 ? "fields_hash" : "0"
        try withoutActuallyEscaping(body) { body in
            try lock.withLock {
                try database.query("SELECT item_key, source_path != '', \(fields) FROM items") { row in
                    if let key = row.text(0) {
                        try body(
                            RecordedKey(
                                itemKey: key, hadSource: row.integer(1) != 0,
                                fieldsHash: UInt64(bitPattern: row.integer(2))))
                    }
                }
            }
        }
    }

    /// The items that share a photo (the same content hash), in groups of at
    /// least two: each group its items' keys and names, at most `limit` groups
    /// and `itemLimit` items in all (a collection of copies stays a short list).
    public func duplicates(limit: Int = 100, itemLimit: Int = duplicateItemLimit) throws -> [[DuplicateItem]] {
        guard rowSchema >= 3 else { return [] }
        var groups: [String: [DuplicateItem]] = [:]
        var order: [String] = []
        try lock.withLock {
            try database.query(
                """
                SELECT source_hash, item_key, item_name FROM items WHERE source_hash IN (
                    SELECT source_hash FROM items WHERE source_hash != '' AND failure IS NULL
                    GROUP BY source_hash HAVING COUNT(*) > 1 LIMIT \(limit))
                ORDER BY source_hash, item_key LIMIT \(itemLimit)
                """
            ) { row in
                let hash = row.text(0) ?? ""
                if groups[hash] == nil { order.append(hash) }
                groups[hash, default: []].append(DuplicateItem(itemKey: row.text(1) ?? "", itemName: row.text(2) ?? ""))
            }
        }
        return order.compactMap { groups[$0] }
    }

    /// The most items ``duplicates(limit:itemLimit:)`` lists by default.
    public static let duplicateItemLimit = 1000

    /// Saves are committed in batches: every ``batchItems`` items or ``batchSeconds``,
    /// whichever comes first. What is committed is done; a killed run redoes at most
    /// the last batch (its store files are known by the claims journal meanwhile).
    public static let batchItems = 1000
    public static let batchSeconds = 0.25
    private var pending = 0
    private var lastCommit = Spans.now

    /// Records (replaces) an item; committed with its batch.
    /// (In WAL mode with synchronous=NORMAL a commit costs no fsync; the WAL is
    /// synced at checkpoints.)
    public func save(_ record: ItemRecord, thumbnail: Data?) throws {
        try lock.withLock {
            try database.query(
                """
                INSERT OR REPLACE INTO items (
                    item_key, source_path, source_size, source_modified, source_hash, thumbnail_fingerprint,
                    store_fingerprint, date_created, store_size, store_modified, store_hash, failure, seconds,
                    thumbnail, missing_since, failure_stage, failure_fingerprint, item_name, fields_hash,
                    source_inode, source_changed, title, sidecars, image_hash
                ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(record.itemKey), .text(record.sourcePath), .integer(record.sourceSize),
                    .integer(record.sourceModified), .text(record.sourceHash), .text(record.thumbnailFingerprint),
                    .text(record.storeFingerprint), record.dateCreated.map { .real($0) } ?? .null,
                    .integer(record.storeSize), .integer(record.storeModified), .text(record.storeHash),
                    record.failure.map { .text($0.message) } ?? .null, .real(record.seconds),
                    thumbnail.map { .blob($0) } ?? .null, record.missingSince.map { .real($0) } ?? .null,
                    record.failure.map { .text($0.stage.rawValue) } ?? .null, .text(record.failureFingerprint),
                    .text(record.itemName), .integer(Int64(bitPattern: record.fieldsHash)),
                    .integer(Int64(bitPattern: record.sourceInode)), .integer(record.sourceChanged),
                    record.title.map { .text($0) } ?? .null, record.sidecarStamp.map { .text($0) } ?? .null,
                    record.imageHash.map { .text($0) } ?? .null,
                ])
            pending += 1
            if pending >= Self.batchItems || Double(Spans.now - lastCommit) / 1e9 >= Self.batchSeconds {
                try commitLocked()
            }
        }
    }

    /// Forgets items.
    public func remove(keys: [String]) throws {
        try lock.withLock {
            for key in keys { try database.query("DELETE FROM items WHERE item_key = ?", [.text(key)]) }
        }
    }

    /// Commits what was saved so far.
    public func commit() throws {
        try lock.withLock { try commitLocked() }
    }

    private func commitLocked() throws {
        try database.execute("COMMIT; BEGIN IMMEDIATE")
        pending = 0
        lastCommit = Spans.now
    }
}
