import Foundation
import Testing

@testable import ThumbpipeCore

@Suite("The POSIX layer")
struct FileDescriptorTests {
    @Test("A rename that must not replace: done when the name is free, EEXIST (and nothing touched) when it is not")
    func renameNoReplace() throws {
        let folder = TestFolder.make("rename")
        let a = folder + "/a", b = folder + "/b", c = folder + "/c"
        try Data("A".utf8).write(to: URL(fileURLWithPath: a))
        try Data("B".utf8).write(to: URL(fileURLWithPath: b))
        #expect(FileDescriptor.rename(a, to: b, replacing: false) == EEXIST)
        #expect(try String(contentsOfFile: b, encoding: .utf8) == "B", "the file at the name is left as it is")
        #expect(FileManager.default.fileExists(atPath: a), "and the source stays for the caller")
        // A dangling symlink is something at the name too.
        try FileManager.default.createSymbolicLink(atPath: c, withDestinationPath: folder + "/nowhere")
        #expect(FileDescriptor.rename(a, to: c, replacing: false) == EEXIST)
        #expect(FileDescriptor.rename(a, to: folder + "/d", replacing: false) == nil)
        #expect(!FileManager.default.fileExists(atPath: a))
        #expect(try String(contentsOfFile: folder + "/d", encoding: .utf8) == "A")
        #expect(FileDescriptor.rename(folder + "/d", to: b) == nil, "replacing, as rename(2)")
        #expect(try String(contentsOfFile: b, encoding: .utf8) == "A")
    }

    @Test("Positioned writes and reads go through whole buffers")
    func positioned() throws {
        let path = TestFolder.make("pwrite") + "/f"
        let fd = try #require(FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL))
        defer { close(fd) }
        let bytes = [UInt8](repeating: 7, count: 1 << 20) + [1, 2, 3]
        #expect(bytes.withUnsafeBytes { FileDescriptor.writeAll(fd, $0, at: 10) } == nil)
        var back = [UInt8](repeating: 0, count: bytes.count + 50)
        let n = back.withUnsafeMutableBytes { FileDescriptor.readFully(fd, into: $0, at: 10) }
        #expect(n == bytes.count, "short at the end of the file only")
        #expect(Array(back[..<n]) == bytes)
        #expect([UInt8](repeating: 0, count: 4).withUnsafeBytes { FileDescriptor.writeAll(-1, $0, at: 0) } == EBADF)
    }
}

/// A fresh folder under the temporary folder.
enum TestFolder {
    static func make(_ label: String) -> String {
        let path = NSTemporaryDirectory() + "thumbpipe-\(label)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
