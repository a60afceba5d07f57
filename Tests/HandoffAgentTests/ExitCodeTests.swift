import HandoffLocalAPI
import Testing

@testable import handoff

/// The exit code each kind of error gives, including the one the process tests cannot reach
/// with a single agent (5, a continuation that failed).
@Suite("handoff's exit codes")
struct ExitCodeTests {
    @Test("Each kind of error maps to docs/agent.md's code: 3, 4, 5, 6, 7, else 1")
    func mapping() {
        #expect(Exit.code(for: LocalError(.notFound, "no Handoff agent is running at /tmp/x.sock")) == 3)
        #expect(Exit.code(for: LocalError(.notFound, "activity 1 is not offered by any device nearby")) == 4)
        #expect(Exit.code(for: LocalError(.continuation, code: 4609, "the device cannot be reached")) == 5)
        #expect(Exit.code(for: LocalError(.notAllowed, "this device cannot remove itself")) == 6)
        #expect(Exit.code(for: LocalError(.account, "no account yet")) == 7)
        #expect(Exit.code(for: LocalError(.failed, "anything else")) == 1)
    }
}
