import Foundation
import HandoffAgent
import NIOCore
import NIOPosix
import Testing

/// The Debian package starts an agent for every user of a machine, and each tries the default
/// link port first: the second must not stop (and be restarted by systemd, again and again).
@Suite("The link port")
struct LinkPortTests {
    @Test("The default port held by another user's agent gives way to a port the system chooses, for TCP and for UDP; a port the person chose stops the agent, naming it")
    func defaultPortGivesWay() async throws {
        let harness = try AgentHarness()
        let first = try await harness.start("first")
        let taken = try #require(await first.agent?.linkPort)
        // Another user's agent, on the port the first holds (TCP and UDP), as the default.
        let second = try await harness.start("second") {
            $0.listen = HostPort(host: "127.0.0.1", port: taken)
            $0.listenFallsBack = true
        }
        let given = try #require(await second.agent?.linkPort)
        #expect(given != taken && given != 0)

        // TCP free, UDP held by another program: the same.
        let udp = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let udpPort = try #require(udp.localAddress?.port)
        let third = try await harness.start("third") {
            $0.listen = HostPort(host: "127.0.0.1", port: udpPort)
            $0.listenFallsBack = true
        }
        let other = try #require(await third.agent?.linkPort)
        #expect(other != udpPort && other != 0)

        // A port given with --listen is the person's: a clash stops the agent and says so.
        var chosen = harness.configuration("fourth")
        chosen.listen = HostPort(host: "127.0.0.1", port: taken)
        let fourth = try Agent(configuration: chosen)
        await #expect {
            try await fourth.start()
        } throws: { error in
            "\(error)".contains("cannot listen for links on 127.0.0.1:\(taken)") && "\(error)".contains("choose another --listen")
        }
        await fourth.stop()
        try await udp.close()
        await harness.stop()
    }

    @Test("handoffd's own default gives way; a port from --listen or the configuration file does not")
    func settingsChooseFallback() throws {
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: ["HOME": "/h"]).listenFallsBack)
        var flags = AgentSettings()
        flags.listen = "[::]:47170"
        #expect(try !AgentConfiguration.resolve(flags: flags, file: nil, environment: ["HOME": "/h"]).listenFallsBack)
        let file = try ConfigurationFile(text: "listen = [::]:47170\n", name: "h.conf")
        #expect(try !AgentConfiguration.resolve(flags: AgentSettings(), file: file, environment: ["HOME": "/h"]).listenFallsBack)
    }
}
