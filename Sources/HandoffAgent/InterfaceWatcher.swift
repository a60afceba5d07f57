import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Tells, through the kernel's routing netlink, when an interface or an address comes, goes
/// or changes, so that discovery follows at once rather than at its next look. Linux only;
/// elsewhere (or when the socket cannot be opened) `start` returns nil and discovery keeps
/// looking on its own every few seconds.
final class InterfaceWatcher: Sendable {
    private let descriptor: Int32
    /// A pipe whose write end `stop` closes: the thread sleeps on it and the netlink socket
    /// together, so that it wakes only for news or to stop.
    private let stopReader: Int32
    private let stopWriter: Mutex<Int32?>
    /// For tests: how often the thread woke, how often with news, and whether it ended.
    private let seen = Mutex((wakes: 0, news: 0, interrupted: 0, ended: false))
    var wakes: (all: Int, withNews: Int, interrupted: Int, ended: Bool) { seen.withLock { ($0.wakes, $0.news, $0.interrupted, $0.ended) } }

    /// `AF_NETLINK`, `NETLINK_ROUTE`, and the groups for links and IPv4 and IPv6 addresses
    /// (`RTMGRP_LINK`, `RTMGRP_IPV4_IFADDR`, `RTMGRP_IPV6_IFADDR`): Swift's Glibc does not show
    /// `<linux/rtnetlink.h>`.
    private static let netlinkFamily: Int32 = 16
    private static let routeProtocol: Int32 = 0
    private static let groups: UInt32 = 0x1 | 0x10 | 0x100

    /// `struct sockaddr_nl`.
    private struct NetlinkAddress {
        var family: UInt16 = UInt16(InterfaceWatcher.netlinkFamily)
        var pad: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32 = InterfaceWatcher.groups
    }

    private init(descriptor: Int32, stopReader: Int32, stopWriter: Int32) {
        self.descriptor = descriptor
        self.stopReader = stopReader
        self.stopWriter = Mutex(stopWriter)
    }

    /// Starts watching on a thread of its own; `changed` is called after each burst of news.
    static func start(_ changed: @escaping @Sendable () -> Void) -> InterfaceWatcher? {
        #if os(Linux)
        let descriptor = socket(netlinkFamily, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), routeProtocol)
        guard descriptor >= 0 else { return nil }
        // `struct sockaddr_nl` in storage big enough for any address, passed as a `sockaddr`.
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { bytes in
            withUnsafeBytes(of: NetlinkAddress()) { bytes.copyMemory(from: $0) }
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<NetlinkAddress>.size)) }
        }
        var pipeEnds: [Int32] = [-1, -1]
        guard bound == 0, pipe(&pipeEnds) == 0 else {
            close(descriptor)
            return nil
        }
        // Not inherited by the apps the agent starts.
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let watcher = InterfaceWatcher(descriptor: descriptor, stopReader: pipeEnds[0], stopWriter: pipeEnds[1])
        let thread = Thread { watcher.run(changed) }
        thread.name = "handoff-interfaces"
        thread.start()
        return watcher
        #else
        return nil
        #endif
    }

    private func run(_ changed: @Sendable () -> Void) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var waiting = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: stopReader, events: Int16(POLLIN), revents: 0)]
            // Sleeps until news comes or `stop` closes the pipe (which reads as its end).
            let ready = poll(&waiting, 2, -1)
            let interrupted = ready < 0 && errno == EINTR
            seen.withLock {
                $0.wakes += 1
                if interrupted { $0.interrupted += 1 }
            }
            guard ready > 0 else { continue }
            if waiting[1].revents != 0 { break }
            // Whatever the messages say, interfaces are looked at again: read them all, then tell
            // once. An overrun (news lost) is news too.
            var received = false
            while true {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 {
                    received = true
                } else {
                    if count < 0 && errno == ENOBUFS { received = true }
                    break
                }
            }
            if received {
                seen.withLock { $0.news += 1 }
                changed()
            }
        }
        close(descriptor)
        close(stopReader)
        seen.withLock { $0.ended = true }
    }

    /// Ends the thread; once is enough, more do nothing.
    func stop() {
        stopWriter.withLock { writer in
            guard let open = writer else { return }
            close(open)
            writer = nil
        }
    }
}
