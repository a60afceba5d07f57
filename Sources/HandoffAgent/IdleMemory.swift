import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How the agent's allocator treats memory freed while it works.
///
/// A continuation stream moves its bytes in chunks of up to 512 KiB, several in flight at once.
/// glibc's defaults serve such a chunk with `mmap` until the first one is freed, then from the
/// heap, but give the heap's free top back to the kernel whenever it exceeds twice the largest
/// chunk freed so far (1 MiB): with a window of chunks in flight, nearly every chunk took
/// fresh pages, which the kernel zeroes and faults in one by one (in `streams.sh`, page faults
/// and zeroing were about a tenth of each agent's CPU). While it works the agent keeps up to
/// 16 MiB of freed memory for reuse and serves allocations under 4 MiB from the heap; after
/// `--idle-release` with nothing to do, `IdleMemory.release()` gives it all back.
package enum AllocatorPolicy {
    /// The largest allocation served from the heap, and how much free memory the heap's top
    /// may hold before it is given back.
    package static let heapLimit = 4 << 20
    package static let keptFree = 16 << 20

    /// Sets glibc's thresholds for this process (`mallopt`, looked up at run time: Swift's
    /// Glibc module does not show it). Returns whether both were set.
    @discardableResult
    package static func keepWorkingMemory() -> Bool {
        #if os(Linux)
        guard let symbol = dlsym(nil, "mallopt") else { return false }
        typealias Set = @convention(c) (Int32, Int32) -> Int32
        let mallopt = unsafeBitCast(symbol, to: Set.self)
        // M_MMAP_THRESHOLD is -3, M_TRIM_THRESHOLD -1 (malloc.h).
        return mallopt(-3, Int32(heapLimit)) == 1 && mallopt(-1, Int32(keptFree)) == 1
        #else
        return false
        #endif
    }
}

/// What an agent gives back after a while with nothing to do: the free memory its allocator
/// holds (`malloc_trim`), and its mappings of code pages it ran while starting or working.
/// Code pages are clean copies of the executable's file: dropping them from the process costs
/// a minor fault (no disk read while the file is cached) the next time that code runs, and
/// keeps the resident size of an idle agent to what idling uses.
enum IdleMemory {
    /// What was given back, in kB of resident memory (before minus after).
    struct Released: Sendable {
        var residentBefore: Int
        var residentAfter: Int
        /// The files whose code mappings were dropped, by name (`handoffd`, `libc.so.6`).
        var code: [String] = []
    }

    static func release() -> Released {
        let before = residentKB()
        var code: [String] = []
        #if os(Linux)
        trimAllocator()
        // A debugger's breakpoints are private changes to code pages: leave them alone.
        if !isTraced() {
            for (mapping, file) in codeMappings() {
                let range = droppable(mapping, hotEnd: hotCodeEnd)
                if range.isEmpty { continue }
                if madvise(UnsafeMutableRawPointer(bitPattern: range.lowerBound), Int(range.upperBound - range.lowerBound), MADV_DONTNEED) == 0 {
                    code.append(file)
                }
            }
        }
        #endif
        return Released(residentBefore: before, residentAfter: residentKB(), code: code)
    }

    /// Where the agent's hot code ends: what `Scripts/handoffd-hot.ld` puts at the head (code
    /// no symbol names, the standard library's large sections, BoringSSL's assembly), then the
    /// functions it runs idle, on a warm continuation and on a continuation that opens a link,
    /// in that order (`Scripts/handoffd.order`, which names `handoff_hot_code_end` after them).
    /// Their pages stay mapped through a release: dropped, the first continuation after quiet
    /// faulted about a hundred of them back, 64 KB at a time, on its way (issue 15).
    static let hotCodeEnd = UInt(bitPattern: unsafeBitCast(handoffHotCodeEnd as @convention(c) () -> Void, to: Int.self))

    /// The hot code can only be at the head of the executable's code: a marker further in
    /// means the order was not used (a build without it), and nothing is kept.
    static let hotCodeLimit: UInt = 8 << 20

    /// What of a code mapping is given back: all of it, but for the head of the one holding the
    /// hot code, up to `hotEnd` (rounded up to a page), when that lies within `hotCodeLimit`.
    static func droppable(_ mapping: Range<UInt>, hotEnd: UInt, page: UInt = 4096) -> Range<UInt> {
        guard mapping.contains(hotEnd), hotEnd - mapping.lowerBound <= hotCodeLimit else { return mapping }
        let kept = min((hotEnd + page - 1) / page * page, mapping.upperBound)
        return kept..<mapping.upperBound
    }

    /// The process's resident memory, in kB (`VmRSS`).
    static func residentKB() -> Int {
        status("VmRSS:") ?? 0
    }

    private static func status(_ key: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key) }) else { return nil }
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
    }

    private static func isTraced() -> Bool {
        (status("TracerPid:") ?? 0) != 0
    }

    /// This process's code mappings that can be dropped (`codeMappings(in:)` of its smaps).
    private static func codeMappings() -> [(Range<UInt>, String)] {
        // Read to the end: `String(contentsOfFile:)` stops after the first page of a /proc file.
        guard let data = FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile() else { return [] }
        return codeMappings(in: String(decoding: data, as: UTF8.self))
    }

    /// The executable and libraries' code: mappings that are readable, executable, private,
    /// backed by a file, and with no page written privately (no `Anonymous` pages, the copies
    /// that text relocations, hot patches or probes leave, and none swapped out, which such a
    /// copy would be). What is dropped from those comes back from the file as it was. A dirty
    /// page is not a sign of a copy: a file written moments ago (an upgrade, a build) has dirty
    /// pages in the page cache until they reach the disk, and smaps counts them dirty in every
    /// mapping of it. Each with its file's name.
    static func codeMappings(in smaps: String) -> [(Range<UInt>, String)] {
        var ranges: [(Range<UInt>, String)] = []
        var candidate: (Range<UInt>, String)?
        var clean = true
        func close() {
            if let candidate, clean { ranges.append(candidate) }
            candidate = nil
        }
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.contains("-"), fields.count >= 5, !first.hasSuffix(":") {
                close()
                clean = true
                guard fields.count >= 6, fields[1] == "r-xp", fields[5].hasPrefix("/") else { continue }
                let bounds = first.split(separator: "-")
                guard bounds.count == 2, let low = UInt(bounds[0], radix: 16), let high = UInt(bounds[1], radix: 16), low < high else { continue }
                let path = fields[5...].joined(separator: " ")
                candidate = (low..<high, String(path.split(separator: "/").last ?? Substring(path)))
            } else if candidate != nil, first == "Anonymous:" || first == "Swap:" {
                if fields.count >= 2, fields[1] != "0" { clean = false }
            }
        }
        close()
        return ranges
    }

    /// glibc's `malloc_trim(0)`, looked up at run time (Swift's Glibc module does not show it).
    private static func trimAllocator() {
        #if os(Linux)
        guard let symbol = dlsym(nil, "malloc_trim") else { return }
        typealias Trim = @convention(c) (Int) -> Int32
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
        #endif
    }
}

/// Marks the end of the agent's hot code (`IdleMemory.hotCodeEnd`): listed in
/// `Scripts/handoffd.order` after the functions an agent runs idle and continuing, so the
/// linker puts it right after them. It does nothing.
@_cdecl("handoff_hot_code_end")
@inline(never)
func handoffHotCodeEnd() {}
