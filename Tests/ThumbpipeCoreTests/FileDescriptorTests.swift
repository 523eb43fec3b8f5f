import Foundation
import Testing
import ThumbpipeTestSupport

@testable import ThumbpipeCore

@Suite("The I/O layer: FileDescriptor, FileSystem, Errno")
struct FileDescriptorTests {
    @Test("A rename that must not replace: done when the name is free, EEXIST (and nothing touched) when it is not")
    func renameNoReplace() throws {
        let folder = TestPaths.temporaryFolder("rename")
        let a = folder + "/a", b = folder + "/b", c = folder + "/c"
        try FileSystem.write("A".utf8, to: a)
        try FileSystem.write("B".utf8, to: b)
        #expect(throws: Errno.exists) { try FileSystem.rename(a, to: b, replacing: false) }
        #expect(FileSystem.text(of: b) == "B", "the file at the name is left as it is")
        #expect(FileSystem.exists(a), "and the source stays for the caller")
        // A dangling symlink is something at the name too.
        #expect(symlink(folder + "/nowhere", c) == 0)
        #expect(throws: Errno.exists) { try FileSystem.rename(a, to: c, replacing: false) }
        try FileSystem.rename(a, to: folder + "/d", replacing: false)
        #expect(!FileSystem.exists(a))
        #expect(FileSystem.text(of: folder + "/d") == "A")
        try FileSystem.rename(folder + "/d", to: b)
        #expect(FileSystem.text(of: b) == "A", "replacing, as rename(2)")
    }

    @Test("Positioned writes and reads go through whole buffers; a closed descriptor throws EBADF")
    func positioned() throws {
        let path = TestPaths.temporaryFolder("pwrite") + "/f"
        let file = try FileDescriptor.open(path, O_RDWR | O_CREAT | O_EXCL)
        let bytes = [UInt8](repeating: 7, count: 1 << 20) + [1, 2, 3]
        try file.write(bytes, at: 10)
        var back = [UInt8](repeating: 0, count: bytes.count + 50)
        let n = try file.read(into: &back, at: 10)
        #expect(n == bytes.count, "short at the end of the file only")
        #expect(Array(back[..<n]) == bytes)
        #expect(try file.info().size == Int64(10 + bytes.count))
        try file.close()
        try file.close()  // a second close does nothing
        #expect(throws: Errno.badDescriptor) { try file.write([0, 0, 0, 0], at: 0) }
    }

    @Test("A descriptor closes itself when it goes, unless released")
    func ownership() throws {
        let path = TestPaths.temporaryFolder("own") + "/f"
        try FileSystem.write([1, 2, 3], to: path)
        var raw: Int32 = -1
        do {
            let file = try FileDescriptor.open(path, O_RDONLY)
            raw = file.rawValue
            #expect(FileDescriptor.isOpen(raw))
        }
        #expect(!FileDescriptor.isOpen(raw), "closed with its value")
        let kept = try FileDescriptor.open(path, O_RDONLY).release()
        #expect(FileDescriptor.isOpen(kept), "a released number is the caller's")
        try FileDescriptor(adopting: kept).close()
        #expect(!FileDescriptor.isOpen(kept))
        #expect(FileDescriptor(borrowing: 1).rawValue == 1)
    }

    @Test(
        "A file time past what 64 bits of nanoseconds hold (after 2262, before 1677) is clamped to the nearest end, never trapped on; a date string never traps either"
    )
    func fileTimesPastInt64() throws {
        #expect(FileInfo.nanoseconds(timespec(tv_sec: 1_700_000_000, tv_nsec: 5)) == 1_700_000_000_000_000_005)
        // ext4 holds times to 2446-05-10, which `touch -d @15032385535` gives any file.
        #expect(FileInfo.nanoseconds(timespec(tv_sec: 15_032_385_535, tv_nsec: 0)) == .max)
        #expect(FileInfo.nanoseconds(timespec(tv_sec: 9_223_372_036, tv_nsec: 999_999_999)) == .max)
        #expect(FileInfo.nanoseconds(timespec(tv_sec: -15_032_385_535, tv_nsec: 0)) == .min)
        var info = stat()
        info.st_mode = S_IFREG
        info.st_mtim = timespec(tv_sec: .max, tv_nsec: 999_999_999)
        let far = FileInfo(info)
        #expect(ISO8601Format.string(far.modificationDate).hasPrefix("2262-04-11T23:47:16"))
        for seconds in [1e308, -1e308, .infinity, .nan] {
            #expect(!ISO8601Format.string(Date(timeIntervalSince1970: seconds)).isEmpty, "\(seconds)")
        }
    }

    @Test("Errno: the C library's text, and the error a missing file throws")
    func errno() {
        #expect(Errno.noSpace.description == "No space left on device")
        #expect(throws: Errno.noEntry) { try FileDescriptor.open("/nonexistent/thumbpipe", O_RDONLY) }
        #expect(ThumbpipeError.describe(Errno.accessDenied) == "Permission denied")
    }

    @Test("A C function's message buffer: up to its first NUL, all of it without one, bad UTF-8 replaced")
    func cBuffer() {
        var buffer = [CChar](repeating: 0, count: 16)
        #expect(String(cBuffer: buffer).isEmpty)
        _ = "no entry".withCString { strncpy(&buffer, $0, buffer.count) }
        buffer[12] = 0x41  // after the NUL: not part of the message
        #expect(String(cBuffer: buffer) == "no entry")
        #expect(String(cBuffer: [0x61, 0x62, 0x63]) == "abc", "a buffer filled to its end")
        #expect(String(cBuffer: [0x61, CChar(bitPattern: 0xFF), 0]) == "a\u{FFFD}")
    }

    @Test("Folders: made with their parents, listed by name bytes, emptied through a descriptor")
    func folders() throws {
        let root = TestPaths.temporaryFolder("folders") + "/a/b/c"
        try FileSystem.createFolder(root, intermediate: true)
        try FileSystem.createFolder(root, intermediate: true)  // already there: no error
        #expect(throws: Errno.exists) { try FileSystem.createFolder(root) }
        try FileSystem.write([1], to: root + "/x")
        #expect(throws: Errno.exists) { try FileSystem.createFolder(root + "/x", intermediate: true) }
        // A name that is not UTF-8 is listed by its bytes and can be removed by them.
        let latin1: [UInt8] = Array("caf".utf8) + [0xE9]
        let folder = try FileDescriptor.open(root, O_RDONLY | O_DIRECTORY)
        try folder.open(latin1, O_WRONLY | O_CREAT).close()
        let names = try folder.names()
        #expect(names.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) } == [latin1, Array("x".utf8)])
        #expect(names.first { $0.bytes == latin1 }?.text == nil)
        #expect(try folder.info(of: latin1).kind == .regular)
        try folder.remove(latin1)
        #expect(FileSystem.textNames(in: root) == ["x"])
        #expect(throws: Errno(rawValue: ENOTEMPTY)) { try FileSystem.removeFolder(root) }
        try FileSystem.remove(root + "/x")
        try FileSystem.removeFolder(root)
        #expect(!FileSystem.exists(root))
        #expect(OutputFolder.empty(TestPaths.temporaryFolder("folders-empty")) == 0)
    }

    @Test("Whole files: bounded, a FIFO refused without blocking, a pipe read to its end")
    func contents() throws {
        let folder = TestPaths.temporaryFolder("contents")
        try FileSystem.write(Array(repeating: 9, count: 5000), to: folder + "/f")
        #expect(FileDescriptor.contents(ofRegularFile: folder + "/f", limit: 5000)?.count == 5000)
        #expect(FileDescriptor.contents(ofRegularFile: folder + "/f", limit: 4999) == nil)
        #expect(mkfifo(folder + "/fifo", 0o600) == 0)
        #expect(FileDescriptor.contents(ofRegularFile: folder + "/fifo", limit: 1 << 20) == nil)
        let (read, write) = try FileDescriptor.pipe()
        try write.write("through a pipe")
        try write.close()
        #expect(try read.readToEnd() == Array("through a pipe".utf8))
        #expect(try FileSystem.contents(of: folder + "/f").count == 5000)
        #expect(throws: Errno(rawValue: EFBIG)) { try FileSystem.contents(of: folder + "/f", limit: 10) }
    }
}
