import Foundation

/// How long this process has run, counted from when the kernel started it
/// (`/proc/self/stat`'s start time against `CLOCK_BOOTTIME`), so the time the
/// dynamic loader spends mapping libvips and its libraries counts too: what a
/// user timing the command sees, not only what `main` does.
public enum ProcessClock {
    /// Seconds since this process started; nil when /proc cannot say.
    public static func secondsSinceStart() -> Double? {
        guard let stat = FileSystem.text(of: "/proc/self/stat"),
            // The command name (field 2) is in parentheses and may hold spaces: count after its end.
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Field 22 (starttime, clock ticks since boot) is the 20th after the name.
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        let perSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        var now = timespec()
        guard perSecond > 0, clock_gettime(CLOCK_BOOTTIME, &now) == 0 else { return nil }
        let uptime = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        return max(0, uptime - ticks / perSecond)
    }
}
