import NIOCore
import NIOPosix

/// A UDP socket that joins a multicast group on one interface and sends there only: what
/// beacons and DNS-SD both use, each with its own group, port and hop limit.
enum MulticastSocket {
    /// Opens it. `bindHost` is the group itself (only its datagrams arrive) or the wildcard
    /// (unicast to the port arrives too); address reuse lets other programs share the port.
    /// Datagrams from other interfaces are dropped by `handler`, which gets packet info. With
    /// `coalescing`, reads go through a `ReadCoalescer` of that window first.
    static func open(
        _ path: MulticastPath, device: NIONetworkDevice, group: SocketAddress, bindHost: String, hops: Int, unicastHops: Int? = nil,
        coalescing: (window: TimeAmount, counts: ReadCounts)? = nil, eventLoopGroup: any EventLoopGroup, handler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> any Channel {
        var device = device
        // Loopback does not advertise multicast, but carries it; the tests run on it.
        device.multicastSupported = true
        let v6 = path.family == .v6
        var bootstrap = DatagramBootstrap(group: eventLoopGroup)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            // Which interface each datagram arrived on: a wildcard socket hears every interface's.
            .channelOption(.receivePacketInfo, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let coalescing { try channel.pipeline.syncOperations.addHandler(ReadCoalescer(window: coalescing.window, counts: coalescing.counts)) }
                    try channel.pipeline.syncOperations.addHandler(handler())
                }
            }
        if v6 {
            bootstrap = bootstrap.channelOption(.socket(SocketOptionLevel(IPPROTO_IPV6), SocketOptionName(IPV6_V6ONLY)), value: 1)
        }
        if coalescing != nil {
            // What the coalescer counts as a full batch: one wake reads at most this many.
            bootstrap = bootstrap.channelOption(.maxMessagesPerRead, value: UInt(ReadCoalescer.batch))
        }
        let channel = try await bootstrap.bind(host: bindHost, port: group.port ?? 0).get()
        guard let multicast = channel as? any MulticastChannel, let options = channel as? any SocketOptionProvider else {
            try? await channel.close()
            throw DiscoveryError.notMulticast(path.interface)
        }
        do {
            // Only what arrives for this socket's own memberships, not every group on the host
            // (IP_MULTICAST_ALL 49, IPV6_MULTICAST_ALL 29).
            try await options.unsafeSetSocketOption(
                level: NIOBSDSocket.OptionLevel(rawValue: v6 ? CInt(IPPROTO_IPV6) : CInt(IPPROTO_IP)),
                name: NIOBSDSocket.Option(rawValue: v6 ? 29 : 49), value: CInt(0)
            ).get()
            try await multicast.joinGroup(group, device: device).get()
            // Send only through this interface, and let other sockets on this host hear it.
            if v6 {
                try await options.setIPv6MulticastIF(CUnsignedInt(device.interfaceIndex)).get()
                try await options.setIPv6MulticastHops(CInt(hops)).get()
                try await options.setIPv6MulticastLoop(1).get()
                if let unicastHops {
                    try await options.unsafeSetSocketOption(level: .init(rawValue: CInt(IPPROTO_IPV6)), name: .init(rawValue: IPV6_UNICAST_HOPS), value: CInt(unicastHops)).get()
                }
            } else {
                guard case .v4(let local)? = device.address else { throw DiscoveryError.noSuchInterface(path.interface) }
                try await options.setIPv4MulticastInterface(index: device.interfaceIndex, address: local.address.sin_addr)
                try await options.setIPMulticastTTL(CUnsignedChar(hops)).get()
                try await options.setIPMulticastLoop(1).get()
                if let unicastHops {
                    try await options.unsafeSetSocketOption(level: .init(rawValue: CInt(IPPROTO_IP)), name: .init(rawValue: IP_TTL), value: CInt(unicastHops)).get()
                }
            }
        } catch {
            try? await channel.close()
            throw error
        }
        return channel
    }
}

extension SocketOptionProvider {
    /// Sends multicast out of the interface with this index (`ip_mreqn`): by index, since two
    /// interfaces may share an address, where `IP_MULTICAST_IF` by address alone would pick one.
    func setIPv4MulticastInterface(index: Int, address: in_addr) async throws {
        let request = ip_mreqn(imr_multiaddr: in_addr(s_addr: 0), imr_address: address, imr_ifindex: CInt(index))
        try await unsafeSetSocketOption(level: .init(rawValue: CInt(IPPROTO_IP)), name: .init(rawValue: IP_MULTICAST_IF), value: request).get()
    }
}
