import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// Why a link could not be set up.
package enum LinkError: Error, Sendable, CustomStringConvertible {
    case badIdentity(String)
    /// The link ended (closed, or failed with `reason`) after `answers` answers had come.
    case ended(answers: Int, reason: String)

    package var description: String {
        switch self {
        case .badIdentity(let why): return "this device's identity cannot be used for TLS: \(why)"
        case .ended(let answers, let reason): return "the link ended after \(answers) answers: \(reason)"
        }
    }
}
