import Foundation
import HandoffLocalAPI
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// What answers at a device's link port.
enum Reachability: Equatable, Sendable {
    /// TCP connects (before the link is tried).
    case open
    /// A member of this account, by name.
    case member(String)
    /// Something answers, but it is not a member, or does not accept this device.
    case stranger
    /// The port takes connections, but nothing speaks Handoff's link there in time.
    case silent
    /// The connection was refused: the host is there, nothing listens on the port.
    case refused
    /// No answer at all within the time: a firewall on the way drops the port, or the host is gone.
    case timedOut
    /// No route to the host.
    case unreachable
    /// The name does not resolve.
    case unresolved

    func finding(_ target: String) -> String {
        switch self {
        case .open, .member: return "\(target) answers"
        case .stranger: return "something answers at \(target), but it is not a device of this account, or it does not accept this one"
        case .silent: return "\(target) takes connections, but no Handoff link comes up there in time: another program may have the port, or the device is overloaded"
        case .refused: return "\(target) refuses the connection: the host is there, but nothing listens on that port (handoffd not running, or on another port)"
        case .timedOut: return "nothing answers at \(target) at all: a firewall on the way drops the port, or the host is off"
        case .unreachable: return "there is no route to \(target)"
        case .unresolved: return "the name in \(target) does not resolve"
        }
    }

    func advice(linkPort: Int) -> String? {
        switch self {
        case .open, .member: return nil
        case .stranger: return "check that both are in the same account ('handoff devices' on each); a device removed from the account is refused"
        case .silent: return "check what listens on port \(linkPort) there ('ss -ltnp')"
        case .refused: return "start handoffd there, and check its --listen"
        case .timedOut: return "allow TCP port \(linkPort) in on that host's firewall (and UDP \(linkPort) for static peers' beacons)"
        case .unreachable: return "check the network between the two (routes, VPN)"
        case .unresolved: return "check the name, or give the address"
        }
    }
}
