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
    private let stopped = Mutex(false)

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

    private init(descriptor: Int32) {
        self.descriptor = descriptor
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
        guard bound == 0 else {
            close(descriptor)
            return nil
        }
        let watcher = InterfaceWatcher(descriptor: descriptor)
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
        while !stopped.withLock({ $0 }) {
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            // Wakes every second to see whether it was stopped.
            guard poll(&waiting, 1, 1000) > 0 else { continue }
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
            if received { changed() }
        }
        close(descriptor)
    }

    func stop() {
        stopped.withLock { $0 = true }
    }
}
