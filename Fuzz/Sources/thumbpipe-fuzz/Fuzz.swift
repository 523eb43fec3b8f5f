// thumbpipe's fuzz targets as one program: built by `make fuzz` with
// `-sanitize=fuzzer,address -DFUZZING`, it is a libFuzzer target, one copy per
// target (`fuzz-jsonl`, `fuzz-archive`…, named by FuzzTarget); built plainly (as
// `swift build` does), it is the replay program: `thumbpipe-fuzz TARGET FILE…`
// runs files through a target and says which broke it, as libvips's
// standalone fuzz driver does for CI.
import Foundation
import ThumbpipeCore

/// The target this copy of the program fuzzes: THUMBPIPE_FUZZ_TARGET, or the
/// program's own name after `fuzz-`.
private func chosenTarget() -> FuzzTarget? {
    if let name = ProcessInfo.processInfo.environment["THUMBPIPE_FUZZ_TARGET"] { return FuzzTarget(rawValue: name) }
    guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
    let name = URL(fileURLWithPath: exe).lastPathComponent
    return name.hasPrefix("fuzz-") ? FuzzTarget(rawValue: String(name.dropFirst(5))) : nil
}

#if FUZZING
    import CFuzzDriver

    nonisolated(unsafe) private var target = FuzzTarget.jsonl

    private func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        if let finding = target.run(UnsafeRawBufferPointer(start: data, count: size)) {
            FileHandle.standardError.write(Data("thumbpipe-fuzz: \(target.rawValue): \(finding)\n".utf8))
            abort()
        }
        return 0
    }

    @main
    struct Fuzz {
        static func main() {
            guard let chosen = chosenTarget() else {
                FileHandle.standardError.write(Data("thumbpipe-fuzz: no target (THUMBPIPE_FUZZ_TARGET)\n".utf8))
                exit(64)
            }
            target = chosen
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv) { fuzzOne($0, $1) })
        }
    }
#else
    @main
    struct Replay {
        static func main() {
            var arguments = Array(CommandLine.arguments.dropFirst())
            guard let first = arguments.first, let target = FuzzTarget(rawValue: first) else {
                let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
                FileHandle.standardError.write(Data("usage: thumbpipe-fuzz TARGET FILE... (targets: \(names))\n".utf8))
                exit(64)
            }
            arguments.removeFirst()
            var findings = 0
            for path in arguments {
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                if let finding = data.withUnsafeBytes({ target.run($0) }) {
                    print("\(path): \(finding)")
                    findings += 1
                }
            }
            print("replay: \(target.rawValue): \(arguments.count) inputs, \(findings) findings")
            exit(findings == 0 ? 0 : 1)
        }
    }
#endif
