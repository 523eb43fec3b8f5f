/// A run stopped by SIGINT or SIGTERM; nothing partial was left.
public struct RunCancelled: Error, Sendable {
    /// The signal that stopped it.
    public var signal: Int32
    /// 128 + the signal, as shells report it (130 for SIGINT, 143 for SIGTERM).
    public var exitStatus: Int32 { 128 + signal }
}
