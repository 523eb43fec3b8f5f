import CSystem
import Foundation

/// Process-wide allocator settings for batch image work.
public enum Allocator {

    /// Tunes glibc's malloc for many large, short-lived image buffers on a few
    /// threads; call it before any thread starts. Measured in Benchmarks/
    /// (76 photos, `--jobs 2`): by default every thread that touches libvips
    /// gets its own arena and freed buffers stay mapped (peak RSS 752 MB); two
    /// arenas and buffers over 128 KB served by mmap, so they go back to the
    /// system when freed, bring it to 330 MB for the same CPU time, better than
    /// jemalloc (405 MB). A fixed mmap threshold also fixes the trim threshold
    /// at 128 KB, so every image's frees gave the heaps' tops back to the system
    /// and the next image faulted them in again: 4 MB of top padding kept per
    /// heap takes a 40-photo run from 170–176 k page faults to 129–133 k and
    /// its system time from 1.40–1.51 s to 1.19–1.28 s (three runs each, peak
    /// PSS within the runs' noise). `MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`
    /// or `MALLOC_TOP_PAD_` in the environment take precedence.
    public static func configureForBatchWork() {
        let environment = ProcessInfo.processInfo.environment
        if environment["MALLOC_ARENA_MAX"] == nil { _ = CSystem_set_arena_max(2) }
        if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = CSystem_set_mmap_threshold(128 * 1024) }
        if environment["MALLOC_TOP_PAD_"] == nil { _ = CSystem_set_top_pad(4 << 20) }
    }
}
