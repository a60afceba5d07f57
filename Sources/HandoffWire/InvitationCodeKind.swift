/// What an invitation code says of itself by its first byte (docs/wire-protocol.md, Pairing):
/// a code a person types, whose join waits until a person compares a verification number on
/// both screens and confirms; or a token for scripts, whose join needs nobody.
///
/// A program that takes a code from its user reads this before the code goes anywhere else: a
/// token joins on its own, so it must never travel where other users of the machine can read
/// it, such as a command line (docs/security.md, S6).
package enum InvitationCodeKind: Sendable, Hashable {
    /// A typed code: the keyed layout (first byte `0x3_`), or the prefix layout of earlier
    /// versions with kind 1.
    case typed
    /// A token (prefix layout, kind 2), and any first byte this version does not know: what
    /// is not known to need a person's confirmation is kept as secret as a token.
    case token

    /// The kind of `code`, forgiving case, spaces and dashes as codes are read; nil when it
    /// does not start with base32 at all.
    package init?(code: String) {
        let start = String(code.filter { $0 != "-" && !$0.isWhitespace }.prefix(2))
        guard start.count == 2, let first = Base32.decode(start)?.first else { return nil }
        self = first & 0xF0 == 0x30 || first == 1 ? .typed : .token
    }
}
