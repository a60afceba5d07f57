import Crypto
import Foundation
import HandoffWire
import Testing

@testable import HandoffAgent

@Suite("handoffd's settings")
struct ConfigurationTests {
    let environment = ["HOME": "/home/ada", "XDG_RUNTIME_DIR": "/run/user/1000"]

    @Test("With nothing given, state and socket follow the XDG directories")
    func defaults() throws {
        let configuration = try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: environment)
        #expect(configuration.stateDirectory.path == "/home/ada/.local/state/handoff")
        #expect(configuration.socketPath == "/run/user/1000/handoff/agent.sock")
        #expect(configuration.listen == HostPort(host: "::", port: 47_170))
        #expect(configuration.interfaces == nil)
        let xdg = try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"])
        #expect(xdg.stateDirectory.path == "/s/handoff")
        #expect(xdg.socketPath.hasPrefix("/tmp/handoff-"))
    }

    @Test("--system-activities takes media, documents, both or off, from a flag or the file's key; anything else is refused naming where it came from")
    func systemActivities() throws {
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: environment).systemActivities == ["media", "documents"])
        let file = try ConfigurationFile(text: "system-activities = documents\n", name: "handoffd.conf")
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: file, environment: environment).systemActivities == ["documents"])
        var flags = AgentSettings()
        for (given, expected) in [("off", Set<String>()), ("media", ["media"]), ("media,documents", ["media", "documents"]), ("documents, media", ["media", "documents"])] {
            flags.systemActivities = given
            #expect(try AgentConfiguration.resolve(flags: flags, file: file, environment: environment).systemActivities == expected, "\(given)")
        }
        for bad in ["", "music", "media,,documents", "on", "documents,off"] {
            flags.systemActivities = bad
            #expect(throws: ConfigurationError.self, "\(bad)") { try AgentConfiguration.resolve(flags: flags, file: nil, environment: environment) }
        }
        let badFile = try ConfigurationFile(text: "system-activities = all\n", name: "handoffd.conf")
        #expect {
            try AgentConfiguration.resolve(flags: AgentSettings(), file: badFile, environment: environment)
        } throws: { error in
            "\(error)".contains("system-activities") && "\(error)".contains("media, documents, both")
        }
    }

    @Test("The file's keys are the flags' names, and flags win over the file")
    func fileAndFlags() throws {
        let file = try ConfigurationFile(
            text: """
                # my laptop
                name = laptop
                listen = 10.0.0.2:47170
                interface = wlan0
                interface = wg0
                peer = [fd00::2]:47170
                save-deadline = 250ms
                link-idle = 2m
                maximum-payload = 4096
                default-browser = org.example.browser
                """, name: "handoffd.conf")
        var flags = AgentSettings()
        flags.name = "desk"
        let configuration = try AgentConfiguration.resolve(flags: flags, file: file, environment: environment)
        #expect(configuration.name == "desk")
        #expect(configuration.listen == HostPort(host: "10.0.0.2", port: 47_170))
        #expect(configuration.interfaces == ["wlan0", "wg0"])
        #expect(configuration.staticPeers == [HostPort(host: "fd00::2", port: 47_170)])
        #expect(configuration.saveDeadline == .milliseconds(250))
        #expect(configuration.linkIdle == .seconds(120))
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: environment).linkIdle == .seconds(3600))
        #expect(configuration.maximumPayload == 4096)
        #expect(configuration.defaultBrowser == "org.example.browser")
        #expect(configuration.idleRelease == .seconds(15))
        flags.idleRelease = "off"
        #expect(try AgentConfiguration.resolve(flags: flags, file: file, environment: environment).idleRelease == nil)
        flags.idleRelease = "2m"
        #expect(try AgentConfiguration.resolve(flags: flags, file: file, environment: environment).idleRelease == .seconds(120))
        flags.idleRelease = nil

        flags.interfaces = ["none"]
        #expect(try AgentConfiguration.resolve(flags: flags, file: file, environment: environment).interfaces == [])
    }

    @Test("A bad line in the file is named by file and line")
    func badFile() {
        let cases: [(String, String)] = [
            ("name laptop", "handoffd.conf:1: expected 'key = value'"),
            ("colour = blue", "handoffd.conf:1: unknown key 'colour'"),
            ("name = a\nname = b", "handoffd.conf:2: 'name' is given twice"),
            ("listen =", "handoffd.conf:1: 'listen' has no value"),
        ]
        for (text, expected) in cases {
            #expect(throws: ConfigurationError.self) { try ConfigurationFile(text: text, name: "handoffd.conf") }
            do {
                _ = try ConfigurationFile(text: text, name: "handoffd.conf")
            } catch {
                #expect(error.message.hasPrefix(expected), "\(error.message)")
            }
        }
    }

    @Test("A bad value names the flag, or the file, line and key it came from")
    func badValues() throws {
        var flags = AgentSettings()
        flags.listen = "laptop"
        #expect(message(flags, nil).hasPrefix("--listen: 'laptop' is not HOST:PORT"))
        flags = AgentSettings()
        flags.peers = ["10.0.0.3:99999"]
        #expect(message(flags, nil).hasPrefix("--peer: '10.0.0.3:99999' has no port"))
        flags = AgentSettings()
        flags.interfaces = ["none", "eth0"]
        #expect(message(flags, nil).contains("'none' (no multicast) cannot be combined"))
        let file = try ConfigurationFile(text: "\nfetch-deadline = soon", name: "/etc/handoffd.conf")
        #expect(message(AgentSettings(), file).hasPrefix("/etc/handoffd.conf:2 (fetch-deadline): 'soon' is not a duration"))
        flags = AgentSettings()
        flags.maximumPayload = "9999999"
        #expect(message(flags, nil).hasPrefix("--maximum-payload:"))
        flags = AgentSettings()
        flags.defaultBrowser = "org/example browser"
        #expect(message(flags, nil).hasPrefix("--default-browser: 'org/example browser' is not a bundle identifier"))
        flags = AgentSettings()
        flags.idleRelease = "200ms"
        #expect(message(flags, nil).hasPrefix("--idle-release: give at least 1s, or 'off'"))
        flags.idleRelease = "later"
        #expect(message(flags, nil).hasPrefix("--idle-release: 'later' is not a duration"))
        flags = AgentSettings()
        flags.linkIdle = "100ms"
        #expect(message(flags, nil).hasPrefix("--link-idle: give from 1s to 24h"))
    }

    @Test("Host and port: names, IPv4, bracketed IPv6")
    func hostPort() throws {
        #expect(try HostPort(parsing: "desk.lan:47170") == HostPort(host: "desk.lan", port: 47_170))
        #expect(try HostPort(parsing: "[::1]:1") == HostPort(host: "::1", port: 1))
        #expect(HostPort(host: "::1", port: 1).description == "[::1]:1")
        #expect(throws: ConfigurationError.self) { try HostPort(parsing: "::1:1") }
        #expect(throws: ConfigurationError.self) { try HostPort(parsing: ":80") }
    }

    func message(_ flags: AgentSettings, _ file: ConfigurationFile?) -> String {
        do {
            _ = try AgentConfiguration.resolve(flags: flags, file: file, fileName: "/etc/handoffd.conf", environment: environment)
            return "no error"
        } catch {
            return error.message
        }
    }
}

@Suite("Invitation codes")
struct InvitationTests {
    @Test("A code carries the address, port, fingerprint and secret, and reads back")
    func roundTrip() throws {
        let identity = try DeviceIdentity.generate(name: "laptop")
        for kind in [Invitation.Kind.interactive, .token] {
            for host in ["192.168.1.20", "laptop.local"] {
                let invitation = Invitation.make(kind, host: host, port: 47_171, fingerprint: identity.fingerprint)
                let read = try Invitation(parsing: invitation.code.lowercased())
                #expect(read == invitation)
                #expect(read.matches(fingerprint: identity.fingerprint))
            }
        }
        // 24 characters with an IPv4 address and the default port, 28 with another port.
        let short = Invitation.make(.interactive, host: "192.168.1.20", port: 47_171, fingerprint: identity.fingerprint)
        #expect(short.code.count == 24 + 5, "\(short.code)")
        #expect(Invitation.make(.interactive, host: "192.168.1.20", port: 50_001, fingerprint: identity.fingerprint).code.count == 28 + 6)
        #expect(short.secret.count == 5 && short.fingerprint.count == 4)
        #expect(Invitation.make(.token, host: "h", port: 1, fingerprint: identity.fingerprint).secret.count == 32)
    }

    @Test("S6: A typed code's pin is keyed by its secret: the listener's fingerprint alone, or another secret, gives no matching pin")
    func keyedPin() throws {
        let listener = try DeviceIdentity.generate(name: "listener").showingOwnCertificates()
        let fingerprint = DeviceIdentity.fingerprint(ofCertificate: listener.links.current().certificateDER)
        let forger = try DeviceIdentity.generate(name: "forger")
        let invitation = Invitation.make(.interactive, host: "10.0.0.1", port: 47_171, fingerprint: fingerprint)
        let read = try Invitation(parsing: invitation.code)
        #expect(read.matches(fingerprint: fingerprint))
        #expect(!read.matches(fingerprint: forger.fingerprint))
        // The pin is not the fingerprint's first bytes (which anyone who connects learns) ...
        #expect(read.fingerprint != Array(Invitation.bytes(fromHex: fingerprint).prefix(4)))
        // ... and depends on the secret: with a secret one bit off, the same listener does not match.
        var other = read
        other.secret[4] ^= 1
        #expect(!other.matches(fingerprint: fingerprint))
        // Codes for one listener share no pin.
        let pins = Set((0..<64).map { _ in Invitation.make(.interactive, host: "10.0.0.1", port: 47_171, fingerprint: fingerprint).fingerprint })
        #expect(pins.count == 64)
    }

    @Test("A code from an earlier version (80-bit fingerprint prefix and secret) is still read and pins by prefix")
    func earlierCode() throws {
        let identity = try DeviceIdentity.generate(name: "laptop")
        let fingerprint = Invitation.bytes(fromHex: identity.fingerprint)
        let secret = [UInt8](repeating: 7, count: 10)
        var bytes: [UInt8] = [1, 4, 192, 168, 1, 20, 0xB8, 0x43] + fingerprint.prefix(10) + secret
        bytes += Array(SHA256.hash(data: bytes).prefix(2))
        let read = try Invitation(parsing: Base32.encode(bytes))
        #expect(read.kind == .interactive && read.host == "192.168.1.20" && read.port == 47_171 && read.secret == secret)
        #expect(read.matches(fingerprint: identity.fingerprint))
        #expect(!read.matches(fingerprint: try DeviceIdentity.generate(name: "other").fingerprint))
    }

    @Test("A code's first byte tells a typed code (this version's and earlier ones') from a token, before the code is read whole")
    func kindFromTheStart() throws {
        let identity = try DeviceIdentity.generate(name: "laptop")
        for host in ["192.168.1.20", "laptop.local"] {
            for port in [47_171, 50_001] {
                let typed = Invitation.make(.interactive, host: host, port: port, fingerprint: identity.fingerprint).code
                let token = Invitation.make(.token, host: host, port: port, fingerprint: identity.fingerprint).code
                #expect(InvitationCodeKind(code: typed) == .typed && InvitationCodeKind(code: typed.lowercased()) == .typed, "\(typed)")
                #expect(InvitationCodeKind(code: token) == .token && InvitationCodeKind(code: " " + token.lowercased()) == .token, "\(token)")
            }
        }
        let earlier: [UInt8] = [1, 4, 192, 168, 1, 20]
        #expect(InvitationCodeKind(code: Base32.encode(earlier)) == .typed)
        // A first byte this version does not know is kept as secret as a token.
        #expect(InvitationCodeKind(code: Base32.encode([9, 4, 1])) == .token)
        #expect(InvitationCodeKind(code: "-") == nil && InvitationCodeKind(code: "!!!!") == nil)
    }

    @Test("Every one-character typo in a typed code, at every position, is told apart from a wrong code")
    func everyTypo() throws {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for (host, port) in [("192.168.1.20", 47_171), ("10.0.0.1", 50_001), ("desk.local", 47_171)] {
            let invitation = Invitation.make(.interactive, host: host, port: port, fingerprint: String(repeating: "ab", count: 32))
            let characters = Array(invitation.code.filter { $0 != "-" })
            // The last character also carries spare bits, which decode to nothing.
            let spare = (characters.count * 5) % 8
            var missed: [String] = []
            for position in characters.indices {
                for replacement in alphabet where replacement != characters[position] {
                    var typed = characters
                    typed[position] = replacement
                    let text = String(typed)
                    if position == characters.count - 1, Base32.decode(text) == Base32.decode(String(characters)) { continue }
                    do {
                        let read = try Invitation(parsing: text)
                        missed.append("\(text) read as \(read.host):\(read.port)")
                    } catch {
                        if !error.message.contains("typo") { missed.append("\(text): \(error.message)") }
                    }
                }
            }
            #expect(missed.isEmpty, "\(missed.count) typos not caught (\(spare) spare bits): \(missed.prefix(3))")
        }
    }

    @Test("A mistyped code is told apart from a wrong one")
    func typo() throws {
        let invitation = Invitation.make(.interactive, host: "10.0.0.1", port: 1, fingerprint: String(repeating: "ab", count: 32))
        var characters = Array(invitation.code)
        characters[2] = characters[2] == "7" ? "8" : "7"
        #expect(throws: PairingError("the invitation code has a typo (its checksum does not match); copy it again")) {
            try Invitation(parsing: String(characters))
        }
        #expect(throws: PairingError.self) { try Invitation(parsing: "hello") }
    }

    @Test("The proof binds the secret to the joining device's certificate and name; both sides compute one verification number")
    func proof() throws {
        let invitation = Invitation.make(.interactive, host: "10.0.0.1", port: 1, fingerprint: String(repeating: "5e", count: 32))
        let certificate = try DeviceIdentity.generate(name: "desk").certificateDER
        let proof = invitation.proof(certificate: certificate, name: "desk")
        #expect(invitation.isValid(proof: proof, certificate: certificate, name: "desk"))
        #expect(!invitation.isValid(proof: proof, certificate: certificate, name: "intruder"))
        let other = try DeviceIdentity.generate(name: "desk").certificateDER
        #expect(!invitation.isValid(proof: proof, certificate: other, name: "desk"))
        var wrongSecret = invitation
        wrongSecret.secret[0] ^= 1
        #expect(!wrongSecret.isValid(proof: proof, certificate: certificate, name: "desk"))

        let number = invitation.verificationNumber(certificate: certificate)
        #expect(number.count == 7 && number.contains(" "))
        #expect(try Invitation(parsing: invitation.code).verificationNumber(certificate: certificate) == number)
    }

    @Test("A signed account change is taken only from a member, newer, and untampered")
    func signedChanges() throws {
        let alpha = try DeviceIdentity.generate(name: "alpha")
        let stranger = try DeviceIdentity.generate(name: "stranger")
        let current = AccountState(
            name: "home", members: [AccountState.Member(id: alpha.id, name: "alpha", certificate: Data(alpha.certificateDER))],
            beaconKeys: [Data(repeating: 1, count: 32)], revision: 3)
        var next = current
        next.revision = 4
        next.members.append(AccountState.Member(id: UUID(), name: "beta"))
        let signed = try SignedAccount(next, by: alpha)
        let verified = try signed.verified(against: current)
        #expect(verified.revision == 4)
        #expect(verified.members.map(\.name) == ["alpha", "beta"])

        #expect(throws: PairingError.self) { try SignedAccount(next, by: stranger).verified(against: current) }
        var tampered = signed
        tampered.state[tampered.state.count / 2] ^= 1
        #expect(throws: PairingError.self) { try tampered.verified(against: current) }
        var stale = current
        stale.revision = 2
        #expect(throws: PairingError.self) { try SignedAccount(stale, by: alpha).verified(against: current) }
    }
}
