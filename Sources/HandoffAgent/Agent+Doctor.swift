import Foundation
import HandoffCore
import HandoffLocalAPI
import HandoffWire
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// `handoff doctor`: why a device is not seen, or cannot be reached, in plain words.
extension Agent {
    /// Looks, in order, at the account, each interface, whether beacons leave and come back,
    /// the other members (heard? answering on their link port?), beacons of other accounts,
    /// the clocks, and the static peers.
    /// What each web site asked about for web-to-app continuation said: the apps its
    /// association file approves, or why it approves none.
    func webAssociationChecks() async -> [LocalCheck] {
        guard let web = siteAssociations as? WebSiteAssociations else { return [] }
        return await web.outcomes.map { outcome in
            switch outcome.result {
            case .success(let read):
                let apps = read.file.activityContinuationApps
                var finding = apps.isEmpty ? "its association file approves no app for continuing its pages" : "its association file approves \(apps.sorted().joined(separator: ", "))"
                if !read.file.problems.isEmpty { finding += "; left out: " + read.file.problems.joined(separator: "; ") }
                return LocalCheck(
                    area: "web-association", subject: outcome.site, status: read.file.problems.isEmpty ? .ok : .warning, finding: finding,
                    advice: read.file.problems.isEmpty ? nil : "fix those entries of the site's file; 'handoff doctor --site \(outcome.site)' shows the whole file")
            case .failure(let error):
                return LocalCheck(
                    area: "web-association", subject: outcome.site, status: .warning,
                    finding: "its association file could not be used: \(error.message)",
                    advice: "its pages open in the browser instead of an app; the site must serve the file over HTTPS with a certificate this device trusts (add a private certificate authority with --association-ca)")
            }
        }
    }

    /// `handoff doctor --site`: the site's file fetched now, and what it lets each app do there:
    /// every app it names, and every app installed here that claims the site.
    func siteAssociationReport(host given: String, url: String?) async -> LocalReply {
        guard let web = siteAssociations as? WebSiteAssociations else {
            return .failure(LocalError(.failed, "this agent does not fetch web sites' association files"))
        }
        var host = given.lowercased()
        var port = 443
        if let colon = host.lastIndex(of: ":"), let number = Int(host[host.index(after: colon)...]), (1...65_535).contains(number) {
            port = number
            host = String(host[..<colon])
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }) else {
            return .failure(LocalError(.badRequest, "'\(given)' is not a host name such as example.com (or example.com:8443)"))
        }
        var address: URL?
        if let url {
            guard let parsed = URL(string: url), parsed.scheme == "https", parsed.host?.lowercased() == host else {
                return .failure(LocalError(.badRequest, "'\(url)' is not an https address on \(host)"))
            }
            address = parsed
        }
        let outcome = await web.refresh(host: host, port: port)
        var report = LocalSiteAssociation(site: outcome.site)
        let file: SiteAssociationFile
        switch outcome.result {
        case .failure(let error):
            report.error = error.message
            file = SiteAssociationFile(activityContinuationApps: [])
        case .success(let read):
            report.source = "https://\(outcome.site)\(read.path)"
            report.signed = read.signed
            report.problems = read.file.problems
            file = read.file
        }
        let installedHere = Dictionary(
            installed.all.compactMap { app in app.manifest.applicationIdentifier.map { ($0, app.manifest) } }, uniquingKeysWith: { first, _ in first })
        func claims(_ manifest: AppManifest?) -> [AssociatedDomain] {
            manifest?.associatedDomains.filter { $0.matches(host: host) } ?? []
        }
        var identifiers: [String] = []
        func add(_ identifier: String) { if !identifiers.contains(identifier) { identifiers.append(identifier) } }
        (file.activityContinuation?.apps ?? []).forEach(add)
        (file.appLinks?.details.flatMap(\.appIDs) ?? []).forEach(add)
        (file.webCredentials?.apps ?? []).forEach(add)
        (file.appClips?.apps ?? []).forEach(add)
        installedHere.keys.sorted().filter { !claims(installedHere[$0]).isEmpty }.forEach(add)

        report.apps = identifiers.map { identifier in
            let manifest = installedHere[identifier]
            let claimed = claims(manifest)
            let listed = file.activityContinuation?.apps.contains(identifier) ?? false
            let details = file.appLinks?.details.filter { $0.appIDs.contains(identifier) } ?? []
            return LocalSiteApp(
                applicationIdentifier: identifier, installed: manifest != nil,
                claims: claimed.map { "\($0.service):\($0.includesSubdomains ? "*." : "")\($0.host)" },
                activityContinuation: listed, continuesPages: listed && claimed.contains { $0.service == "activitycontinuation" },
                webCredentials: file.webCredentials?.apps.contains(identifier) ?? false, appClip: file.appClips?.apps.contains(identifier) ?? false,
                appLinks: details.flatMap(Self.describe),
                opensURL: address.map { address in details.contains { $0.opens(address, defaults: file.appLinks?.defaults ?? AppLinks.Defaults()) } })
        }
        var reply = LocalReply()
        reply.siteAssociation = report
        return reply
    }

    /// An applinks entry's patterns in words: `/products/* ?ref=?*`, `not /checkout/*`.
    static func describe(_ detail: AppLinkDetail) -> [String] {
        if let components = detail.components {
            return components.map { component in
                var parts: [String] = [component.path ?? "any path"]
                switch component.query {
                case .whole(let pattern)?: parts.append("?\(pattern)")
                case .items(let items)?: parts.append("?" + items.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&"))
                case nil: break
                }
                if let fragment = component.fragment { parts.append("#\(fragment)") }
                if component.caseSensitive == false { parts.append("(any case)") }
                if component.percentsEncoded == false { parts.append("(decoded)") }
                return (component.exclude ? "not " : "") + parts.joined(separator: " ")
            }
        }
        return (detail.paths ?? []).map { $0.hasPrefix("NOT ") ? "not " + $0.dropFirst(4) : $0 }
    }

    /// Forgets what web sites' association files said (a test changes a site's file).
    func forgetSiteAssociations() async {
        await (siteAssociations as? WebSiteAssociations)?.forget()
    }

    func doctor() async -> [LocalCheck] {
        var checks: [LocalCheck] = []
        guard let account else {
            if let removal {
                checks.append(LocalCheck(
                    area: "account", subject: removal.account, status: .problem,
                    finding: "this device was removed from the account '\(removal.account)' by '\(removal.by)', so it announces nothing and hears no one",
                    advice: "to join it again, make a code on one of its devices with 'handoff device invite', then 'handoff join CODE' here"))
            } else {
                checks.append(LocalCheck(
                    area: "account", status: .problem, finding: "this device is in no account, so it announces nothing and hears no one",
                    advice: "make one with 'handoff account create --name NAME', or join one with 'handoff join CODE' (from 'handoff device invite' on a device of the account)"))
            }
            return checks
        }
        let nearby = await discovery?.nearby ?? []
        let others = account.members.filter { $0.id != identity.id }
        let heard = others.filter { member in nearby.contains { $0.sender == member.id } }
        if others.isEmpty {
            checks.append(LocalCheck(
                area: "account", subject: account.name, status: .warning, finding: "this device is the only one in the account '\(account.name)'",
                advice: "add another with 'handoff device invite' here and 'handoff join CODE' there"))
        } else {
            checks.append(LocalCheck(
                area: "account", subject: account.name, status: heard.isEmpty ? .warning : .ok,
                finding: "the account '\(account.name)' has \(account.members.count) devices; \(heard.count) of the \(others.count) others heard nearby"))
        }
        checks += await interfaceChecks()
        checks += await serviceDiscoveryChecks(nearby: nearby)
        for member in others {
            checks.append(await peerCheck(member.name, heard: nearby.first { $0.sender == member.id }))
        }
        checks += await foreignChecks()
        checks += await clockChecks()
        checks += await webAssociationChecks()
        for peer in configuration.staticPeers {
            checks.append(await staticPeerCheck(peer, nearby: nearby))
        }
        checks += clipboardChecks()
        checks += systemActivityChecks()
        return checks
    }

    /// The clipboard: on or off, whether a session service gives it the desktop's clipboard,
    /// and what the desktop's session lets it do (docs/clipboard.md).
    func clipboardChecks(environment: [String: String] = ProcessInfo.processInfo.environment) -> [LocalCheck] {
        guard configuration.clipboard else {
            return [LocalCheck(
                area: "clipboard", status: .ok,
                finding: "the clipboard is off on this device (--clipboard off): nothing copied here is offered, and the account's copies are not pasted here")]
        }
        var checks: [LocalCheck] = []
        let current = localClipboard().map { " Now: copied on '\($0.deviceName)', \($0.types.map(\.name).joined(separator: ", "))." } ?? ""
        if clipboardWatchers.isEmpty {
            checks.append(LocalCheck(
                area: "clipboard", status: .warning,
                finding: "no session service watches the clipboard: what apps here copy is not offered, and the account's copies paste here only with 'handoff paste'.\(current)",
                advice: "run handoff-session in your graphical session (docs/clipboard.md, Running the service)"))
        }
        for watcher in clipboardWatchers.values.sorted(by: { ($0.session ?? "") < ($1.session ?? "") }) {
            checks.append(LocalCheck(
                area: "clipboard", subject: watcher.session, status: .ok,
                finding: "a session service watches the clipboard\(watcher.session.map { " (\($0))" } ?? "").\(current)"))
        }
        let desktop = (environment["XDG_CURRENT_DESKTOP"] ?? "").lowercased()
        let wayland = environment["WAYLAND_DISPLAY"] != nil || environment["XDG_SESSION_TYPE"] == "wayland"
        if wayland, desktop.contains("gnome"), !clipboardWatchers.values.contains(where: { $0.session?.hasPrefix("Wayland") == true }) {
            checks.append(LocalCheck(
                area: "clipboard", subject: "wayland", status: .warning,
                finding: "this is a GNOME Wayland session: GNOME offers no data-control protocol, so handoff-session cannot watch Wayland apps' copies; it uses XWayland's clipboard, which GNOME keeps in step with Wayland apps' for the most part",
                advice: "'handoff copy' and 'handoff paste' work anywhere (wl-paste | handoff copy; handoff paste | wl-copy)"))
        }
        return checks
    }

    /// DNS-SD: whether this device's service is published, and each Handoff service found.
    func serviceDiscoveryChecks(nearby: [NearbyDevice]) async -> [LocalCheck] {
        guard let discovery, let state = await discovery.serviceDiscoveryState else { return [] }
        var checks = [LocalCheck(
            area: "dns-sd", subject: state.instance, status: state.announced ? .ok : .warning,
            finding: state.announced
                ? "this device publishes _handoff._tcp as '\(state.instance)', a random name that changes at least every \(Int(configuration.nameRotation.seconds / 60)) minutes"
                : "this device is still probing for its DNS-SD name '\(state.instance)'",
            advice: state.statistics.conflicts > 3 ? "\(state.statistics.conflicts) name conflicts so far: another host on the network answers for every name" : nil)]
        for service in state.services {
            let member = nearby.first { device in service.addresses.contains(device.address) }
            checks.append(LocalCheck(
                area: "dns-sd-service", subject: service.instance, status: .ok,
                finding: "'\(service.instance)' on \(service.interface) at \(service.addresses.joined(separator: ", ")) port \(service.port)"
                    + (member == nil ? ": no beacon of this account comes from there (another account's device, or one whose beacons do not arrive; it gets beacons by unicast)" : ": a device of this account")))
        }
        return checks
    }

    /// Each interface: up, with an address, and whether a beacon sent now comes back on it.
    func interfaceChecks() async -> [LocalCheck] {
        guard let discovery, network.beaconBus == nil else { return [] }
        let interfaces = await discovery.interfaces
        if interfaces.isEmpty {
            let peers = configuration.staticPeers.isEmpty
            return [LocalCheck(
                area: "interface", status: peers ? .problem : .ok,
                finding: peers ? "beacons go out on no interface and to no static peer" : "no multicast interface: beacons go to the static peers only",
                advice: peers ? "name an interface with --interface, or static peers with --peer" : nil)]
        }
        // The loop test: multicast comes back to the sending host; a beacon that does not was
        // dropped on its way out or in.
        let before = await discovery.ownBeaconsHeard
        await discovery.announceNow()
        let sending = interfaces.filter { $0.ipv4 != nil || $0.ipv6 }.map(\.name)
        let after = await discovery.awaitOwnBeacons(on: sending, since: before, limit: .milliseconds(800))
        var checks: [LocalCheck] = []
        for interface in interfaces {
            guard interface.isUp else {
                checks.append(LocalCheck(
                    area: "interface", subject: interface.name, status: .problem, finding: "'\(interface.name)' is down or not there",
                    advice: "bring it up ('ip link set \(interface.name) up'), or leave it out of --interface; it is used as soon as it is up"))
                continue
            }
            var families: [String] = []
            if let ipv4 = interface.ipv4 { families.append("IPv4 \(ipv4)") }
            if interface.ipv6 { families.append("IPv6") }
            guard !families.isEmpty else {
                checks.append(LocalCheck(
                    area: "interface", subject: interface.name, status: .problem, finding: "'\(interface.name)' is up but has no address beacons can go out from",
                    advice: "give it an address (DHCP, or 'ip address add'), or check 'ip -brief address'"))
                continue
            }
            let cameBack = (after[interface.name] ?? 0) > (before[interface.name] ?? 0)
            if cameBack {
                checks.append(LocalCheck(
                    area: "interface", subject: interface.name, status: .ok,
                    finding: "'\(interface.name)' is up (\(families.joined(separator: ", "))); a beacon sent now came back"))
            } else {
                checks.append(LocalCheck(
                    area: "interface", subject: interface.name, status: .problem,
                    finding: "'\(interface.name)' is up (\(families.joined(separator: ", "))), but a beacon sent now did not come back: something drops UDP port \(configuration.discoveryPort) here, most likely a firewall",
                    advice: "allow UDP port \(configuration.discoveryPort) in ('nft list ruleset' or 'iptables -L' shows the rules), or use static peers (--peer), whose beacons arrive on the link port \(linkPort)"))
            }
        }
        return checks
    }

    /// A member: heard or not, and if heard, whether its link port answers.
    func peerCheck(_ name: String, heard: NearbyDevice?) async -> LocalCheck {
        guard let heard else {
            if let member = account?.members.first(where: { $0.name == name }), let joined = joinedUnheard[member.id] {
                return LocalCheck(
                    area: "peer", subject: name, status: .problem,
                    finding: "'\(name)' joined \(max(0, Int(-joined.since.timeIntervalSinceNow))) s ago through this device and has not been heard since",
                    advice: Self.unheardSinceJoining(name))
            }
            return LocalCheck(
                area: "peer", subject: name, status: .warning, finding: "'\(name)' is not heard: it is off or asleep, its handoffd is not running, it is on another network, or its beacons do not get here",
                advice: "run 'handoff doctor' on '\(name)' too; across networks or a VPN, name each other with --peer HOST:PORT")
        }
        let target = "\(heard.address):\(heard.linkPort)"
        switch await reachability(host: heard.address, port: Int(heard.linkPort)) {
        case .member(let device) where device == name:
            return LocalCheck(area: "peer", subject: name, status: .ok, finding: "'\(name)' is heard, and answers at \(target)")
        case .member(let device):
            return LocalCheck(
                area: "peer", subject: name, status: .warning, finding: "'\(name)' is heard from \(heard.address), but '\(device)' answers at \(target)",
                advice: "two devices share an address; check the network's address plan")
        case let other:
            return LocalCheck(area: "peer", subject: name, status: .problem, finding: "'\(name)' is heard, but \(other.finding(target))", advice: other.advice(linkPort: Int(heard.linkPort)))
        }
    }

    /// A static peer: whether a member answers there, and whether its beacons arrive, which
    /// a link that opens does not prove (they travel over UDP, the link over TCP).
    func staticPeerCheck(_ peer: HostPort, nearby: [NearbyDevice]) async -> LocalCheck {
        switch await reachability(host: peer.host, port: peer.port) {
        case .member(let device):
            let member = account?.members.first { $0.name == device }
            guard let heard = nearby.first(where: { $0.sender == member?.id }) else {
                return LocalCheck(
                    area: "static-peer", subject: peer.description, status: .problem,
                    finding: "'\(device)' answers at \(peer) and accepts this device, but no beacon of it arrives here: this device lists neither it nor its activities",
                    advice: "beacons to static peers travel over UDP to each device's link port: let UDP port \(linkPort) in here and UDP port \(peer.port) in on '\(device)', on both firewalls and the VPN; then run 'handoff doctor' on '\(device)'")
            }
            return LocalCheck(
                area: "static-peer", subject: peer.description, status: .ok,
                finding: "'\(device)' answers at \(peer) and accepts this device, and its beacons arrive (the last \(max(0, Int(-heard.lastHeard.timeIntervalSinceNow))) s ago)")
        case let other:
            return LocalCheck(
                area: "static-peer", subject: peer.description, status: .problem, finding: other.finding(peer.description),
                advice: other.advice(linkPort: peer.port))
        }
    }

    /// Beacons that do not open with the account's keys, in the last 10 minutes.
    func foreignChecks() async -> [LocalCheck] {
        let recent = (await discovery?.unopenedFrom ?? [:]).filter { $0.value.last.timeIntervalSinceNow > -600 }
        guard !recent.isEmpty else {
            return [LocalCheck(area: "other-accounts", status: .ok, finding: "no beacons of another account heard")]
        }
        let addresses = recent.keys.sorted()
        return [LocalCheck(
            area: "other-accounts", status: .warning,
            finding: "beacons from \(addresses.joined(separator: ", ")) do not open with this account's keys: the device there is in another Handoff account (same network, different account)",
            advice: "if it is yours, put it in this account: 'handoff device invite' here, then 'handoff join CODE' there")]
    }

    /// How far the others' clocks are from this one: beacons more than 30 s off are refused.
    func clockChecks() async -> [LocalCheck] {
        let offsets = await discovery?.clockOffsets ?? [:]
        let refused = await discovery?.statistics.outsideWindow ?? 0
        guard let worst = offsets.max(by: { abs($0.value) < abs($1.value) }) else {
            guard refused > 0 else { return [] }
            return [LocalCheck(
                area: "clock", status: .problem,
                finding: "\(refused) beacons of this account were refused as more than 30 s from this device's clock: a device's clock is off (or old beacons are being sent again)",
                advice: "turn on time synchronisation on every device ('timedatectl set-ntp true')")]
        }
        let name = memberName(worst.key)
        let seconds = abs(worst.value)
        let described = String(format: "%.1f", seconds)
        if seconds > 30 {
            return [LocalCheck(
                area: "clock", subject: name, status: .problem, finding: "the clock of '\(name)' is \(described) s off this one's: its beacons are refused as too old or from the future",
                advice: "turn on time synchronisation on both ('timedatectl set-ntp true')")]
        }
        if seconds > 5 {
            return [LocalCheck(
                area: "clock", subject: name, status: .warning, finding: "the clock of '\(name)' is \(described) s off this one's; beacons are refused past 30 s",
                advice: "turn on time synchronisation ('timedatectl set-ntp true')")]
        }
        return [LocalCheck(area: "clock", status: .ok, finding: "the others' clocks are within \(described) s of this one's")]
    }

    /// Whether a link can be opened to `host:port`: first plain TCP, to tell a firewall that
    /// drops the port from a device that is down, then a link, to tell a member from a stranger.
    func reachability(host: String, port: Int) async -> Reachability {
        if network.beaconBus == nil {
            let tcp = await Self.connect(host: host, port: port, timeout: .seconds(2), group: eventLoopGroup)
            if tcp != .open { return tcp }
        }
        do {
            let link = try await network.open(host: host, port: port, identity: identity, pins: { [pins] in pins.value }, deadline: .seconds(3))
            link.close()
            return .member(memberName(link.device))
        } catch {
            if error.message.contains("cannot be reached") { return .refused }
            // The port takes connections, but the link did not come up: a handshake refused
            // (not a member, or removed), or something that is not handoffd there.
            if error.message.contains("did not answer") || error.message.contains("timed out") { return .silent }
            return .stranger
        }
    }

    /// A plain TCP connection to `host:port`, closed at once.
    static func connect(host: String, port: Int, timeout: Duration, group: any EventLoopGroup) async -> Reachability {
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.milliseconds(Int64(timeout.seconds * 1000)))
                .connect(host: host, port: port).get()
            try? await channel.close()
            return .open
        } catch let error as NIOConnectionError {
            if error.dnsAAAAError != nil && error.dnsAError != nil && error.connectionErrors.isEmpty {
                return .unresolved
            }
            let errnos = error.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            if errnos.contains(ECONNREFUSED) { return .refused }
            if errnos.contains(EHOSTUNREACH) || errnos.contains(ENETUNREACH) { return .unreachable }
            return .timedOut
        } catch let error as ChannelError {
            if case .connectTimeout = error { return .timedOut }
            return .unreachable
        } catch let error as IOError {
            if error.errnoCode == ECONNREFUSED { return .refused }
            return .unreachable
        } catch {
            return .unreachable
        }
    }
}
