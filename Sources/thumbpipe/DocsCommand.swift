import Foundation
import ThumbpipeCore

/// `thumbpipe __docs FILE…` (what `make docs` runs): rewrites, in each file,
/// the regions generated from `run`'s option table (``RunOptionDocs``). Not a
/// command for users; the test that compares the files says to run it.
enum DocsCommand {
    static func main(_ files: [String]) -> Int32 {
        for file in files {
            do {
                let text = String(decoding: try FileSystem.contents(of: file), as: UTF8.self)
                let spliced = RunOptionDocs.spliced(text)
                if spliced != text {
                    try TemporaryFile.write(Data(spliced.utf8), to: file)
                    writeAll(2, "thumbpipe: \(file): regenerated\n")
                }
            } catch {
                writeAll(2, "thumbpipe: \(file): \(error)\n")
                return 74
            }
        }
        return 0
    }
}
