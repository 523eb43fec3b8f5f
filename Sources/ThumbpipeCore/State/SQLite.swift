import CSQLite
import Foundation

/// A thin, throwing wrapper over one SQLite connection (the system libsqlite3).
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    let path: String
    /// Prepared statements by their SQL, compiled once and reused.
    private var statements: [String: OpaquePointer] = [:]

    /// SQLite's SQLITE_TRANSIENT: copy bound text and blobs.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Opens (or creates) a database file.
    /// - Throws: ``ThumbpipeError`` (73 when it cannot be created, 65 when it is not a database).
    init(path: String, readOnly: Bool = false) throws {
        self.path = path
        var flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        var name = path
        // Read without a write-ahead log to replay (a finished run's state), the
        // file is opened as immutable: no -wal or -shm is created beside it, so a
        // dry run writes nothing and works on a read-only output.
        if readOnly, (FileInfo(path: path + "-wal")?.size ?? 0) == 0 {
            var uri = Array("file:".utf8)
            for byte in path.utf8 {
                if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
                    uri += Array(String(format: "%%%02X", byte).utf8)
                } else {
                    uri.append(byte)
                }
            }
            name = String(decoding: uri + Array("?immutable=1".utf8), as: UTF8.self)
            flags |= SQLITE_OPEN_URI
        }
        if sqlite3_open_v2(name, &handle, flags | SQLITE_OPEN_NOMUTEX, nil) != SQLITE_OK {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            handle = nil
            throw ThumbpipeError(.cannotCreate, "\(path): cannot open state database: \(message)")
        }
        sqlite3_busy_timeout(handle, 5000)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(handle)
    }

    private func error(_ what: String) -> ThumbpipeError {
        let message = String(cString: sqlite3_errmsg(handle))
        let code = sqlite3_errcode(handle)
        let kind: ThumbpipeError.Kind =
            code == SQLITE_NOTADB || code == SQLITE_CORRUPT
            ? .dataError
            : code == SQLITE_FULL || code == SQLITE_IOERR ? .ioError : .cannotCreate
        // A damaged state has a way out that keeps the output folder.
        let hint = kind == .dataError ? "; the state is damaged: run again with --rebuild-state" : ""
        return ThumbpipeError(kind, "\(path): \(what): \(message)\(hint)")
    }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws {
        if sqlite3_exec(handle, sql, nil, nil, nil) != SQLITE_OK { throw error("cannot run '\(sql.prefix(40))'") }
    }

    /// A value to bind to a statement parameter.
    enum Value {
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob(Data)
        case null
    }

    /// Runs a statement with parameters, calling `row` for each result row.
    /// Statements are prepared once per connection and reused.
    func query(_ sql: String, _ parameters: [Value] = [], row: ((Row) throws -> Void)? = nil) throws {
        var statement = statements[sql]
        if statement == nil {
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
                throw error("cannot prepare '\(sql.prefix(40))'")
            }
            statements[sql] = statement
        }
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (i, value) in parameters.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .integer(let v): sqlite3_bind_int64(statement, index, v)
            case .real(let v): sqlite3_bind_double(statement, index, v)
            case .text(let v): sqlite3_bind_text(statement, index, v, -1, Self.transient)
            case .blob(let v):
                _ = v.withUnsafeBytes {
                    sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), Self.transient)
                }
            case .null: sqlite3_bind_null(statement, index)
            }
        }
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw error("cannot run '\(sql.prefix(40))'") }
            try row?(Row(statement: statement!))
        }
    }

    /// One result row.
    struct Row {
        let statement: OpaquePointer
        func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
        func real(_ column: Int32) -> Double? {
            sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : sqlite3_column_double(statement, column)
        }
        func text(_ column: Int32) -> String? {
            sqlite3_column_text(statement, column).map { String(cString: $0) }
        }
        func blob(_ column: Int32) -> Data? {
            guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
            return Data(bytes: bytes, count: count)
        }
    }
}
