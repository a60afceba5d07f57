// Why a request to the agent failed: shared by the app library, the agent and the `handoff`
// front, which links no Foundation.

/// Why a request failed: a kind a program can switch on, Foundation's error code where the
/// failure is a continuation's (4608–4611, 3072), and a sentence for the person.
public struct LocalError: Codable, Sendable, Hashable, Error, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable, Hashable {
        /// The message was not understood: bad JSON, a missing field, an unknown type.
        case badRequest
        /// The client may not do this (for example an unverified process claiming an app).
        case notAllowed
        /// The device, activity, app or invitation named does not exist (or no longer does).
        case notFound
        /// The device has no account yet, or already has one.
        case account
        /// A continuation failed; `code` says how.
        case continuation
        /// Something on this device failed (a file, a socket); the message says what.
        case failed
        /// A kind this client does not know, from a newer agent.
        case unknown

        public init(from decoder: any Decoder) throws {
            self = Kind(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .unknown
        }
    }

    public var kind: Kind
    public var code: Int?
    public var message: String

    public init(_ kind: Kind, code: Int? = nil, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    public var description: String {
        code.map { "\(message) (error \($0))" } ?? message
    }
}
