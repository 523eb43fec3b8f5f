import Foundation

/// systemd's journal as a service's stderr: `JOURNAL_STREAM` is `DEVICE:INODE` of
/// the stream it connected, and a line that starts `<N>` is logged at syslog
/// priority N (sd-daemon(3)), so `journalctl -p warning` finds the failed items.
public enum JournalStream {
    /// Whether `value` (the variable's) names the stream standard error is: the
    /// variable is inherited, so a program whose stderr was redirected elsewhere
    /// must not prefix what it writes there.
    public static func isStandardError(_ value: String?) -> Bool {
        guard let value, let info = try? FileDescriptor.standardError.info() else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        return info.device == device && info.inode == inode
    }

    /// `text` with every line prefixed by `<priority>`.
    public static func prefixed(_ text: String, priority: Int) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { "<\(priority)>" + $0 }.joined(
            separator: "\n")
    }
}
