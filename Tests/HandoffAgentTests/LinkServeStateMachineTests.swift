import Foundation
import HandoffWire
import Testing

@testable import HandoffAgent

/// `LinkServeStateMachine`: the answering side of a link, per transition, with no sockets.
@Suite struct LinkServeStateMachineTests {
    typealias Machine = LinkServeStateMachine<String>

    let request = LinkMessage.fetch(request: 1, activityID: UUID()).frame
    let hello = LinkMessage.hello(version: LinkMessage.version, device: UUID()).frame
    let streamFrame = LinkMessage.streamData(stream: 1, bytes: [1]).frame

    func names(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .identify: "identify"
            case .answerFirst(_, let peer): "answerFirst \(peer)"
            case .dispatch(let frame, let peer): "dispatch \(frame.kind) \(peer)"
            case .stream: "stream"
            case .read: "read"
            case .close: "close"
            case .finish(let streams): "finish\(streams ? " streams" : "")"
            }
        }
    }

    let everyone: (String) -> Bool = { _ in true }

    @Test func theFirstFrameIsAnsweredBeforeAnyOther() {
        var machine = Machine()
        #expect(names(machine.read(hello, accepts: everyone)) == ["identify"])
        #expect(names(machine.read(request, accepts: everyone)).isEmpty, "queued while the peer is identified")
        #expect(names(machine.readWanted()).isEmpty, "no read while starting")
        #expect(names(machine.identified("peer", accepts: everyone, helloAnswered: false)) == ["answerFirst peer"])
        #expect(names(machine.read(streamFrame, accepts: everyone)).isEmpty, "still queued until the first answer is written")
        let serving = machine.firstAnswered("peer", accepts: everyone)
        #expect(names(serving) == ["dispatch \(request.kind) peer", "stream", "read"], "the queue in order, then the held read")
    }

    @Test func aHelloThisSideAnsweredInItsGreetingIsNotAnsweredAgain() {
        var machine = Machine()
        _ = machine.read(hello, accepts: everyone)
        _ = machine.read(request, accepts: everyone)
        #expect(names(machine.identified("peer", accepts: everyone, helloAnswered: true)) == ["dispatch \(request.kind) peer"])
        // A first frame that is not a hello is answered even then.
        var other = Machine()
        _ = other.read(request, accepts: everyone)
        #expect(names(other.identified("peer", accepts: everyone, helloAnswered: true)) == ["answerFirst peer"])
    }

    @Test func aPeerNotAcceptedIsCutOff() {
        var machine = Machine()
        _ = machine.read(request, accepts: everyone)
        #expect(names(machine.identified(nil, accepts: everyone, helloAnswered: false)) == ["finish", "close"])
        #expect(names(machine.read(request, accepts: everyone)).isEmpty)

        var refused = Machine()
        _ = refused.read(request, accepts: everyone)
        #expect(names(refused.identified("stranger", accepts: { $0 != "stranger" }, helloAnswered: false)) == ["finish", "close"])

        // Accepted at first, removed later: cut off at its next frame, streams ended.
        var removed = Machine()
        _ = removed.read(hello, accepts: everyone)
        _ = removed.identified("member", accepts: everyone, helloAnswered: true)
        #expect(names(removed.read(request, accepts: { _ in false })) == ["finish streams", "close"])
        #expect(names(removed.ended()).isEmpty, "ended once")
    }

    /// Past the limit, requests wait their turn and the link is not read until the backlog
    /// empties: the oldest goes first, each as an answer is written.
    @Test func atMostTheLimitUnderWay() {
        var machine = Machine()
        _ = machine.read(hello, accepts: everyone)
        _ = machine.identified("peer", accepts: everyone, helloAnswered: true)
        let limit = Machine.maximumInFlight
        var dispatched = 0
        for number in 1...(limit + 3) {
            let frame = LinkMessage.fetch(request: UInt64(number), activityID: UUID()).frame
            dispatched += names(machine.read(frame, accepts: everyone)).count
        }
        #expect(dispatched == limit)
        #expect(machine.backlog.count == 3)
        #expect(names(machine.readWanted()).isEmpty, "reads held at the limit")
        // Stream frames are never held behind requests.
        #expect(names(machine.read(streamFrame, accepts: everyone)) == ["stream"])
        var order: [UInt64] = []
        for _ in 0..<3 {
            for case .dispatch(let frame, _) in machine.answered(accepts: everyone) {
                if case .fetch(let number, _)? = try? LinkMessage(frame: frame) { order.append(number) }
            }
        }
        #expect(order == [UInt64(limit + 1), UInt64(limit + 2), UInt64(limit + 3)])
        #expect(names(machine.answered(accepts: everyone)) == ["read"], "the held read goes once there is room and no backlog")
        #expect(names(machine.readWanted()) == ["read"])
    }

    @Test func aBacklogEntryOfAPeerRemovedMeanwhileIsNotAnswered() {
        var machine = Machine()
        _ = machine.read(hello, accepts: everyone)
        _ = machine.identified("peer", accepts: everyone, helloAnswered: true)
        for _ in 0...Machine.maximumInFlight { _ = machine.read(request, accepts: everyone) }
        #expect(machine.backlog.count == 1)
        #expect(names(machine.answered(accepts: { _ in false })) == ["finish streams", "close"])
        #expect(machine.backlog.isEmpty)
    }
}
