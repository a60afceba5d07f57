import Foundation
import BenchmarkReport
import Testing

/// `HopTable`: reading the stamps of several processes into a continuation's hops.
@Suite("Hops of a continuation, from the stamps of every process it crosses")
struct HopTableTests {
    /// A continuation after quiet as the processes stamp it: each step `gap` microseconds after
    /// the one before, from `start` (µs); `skipping` leaves one step's stamp out.
    /// Each stamp on processor 0, except A's on `processorOfA`.
    static func continuation(start: Int, gaps: [Int], skipping: String? = nil, waited: Bool = false, processorOfA: Int = 0) -> [String] {
        let pids: [HopTable.Process: Int] = [.caller: 10, .a: 20, .b: 30]
        var at = start
        var lines: [String] = []
        for (step, gap) in zip(HopTable.afterQuiet, [0] + gaps) {
            at += gap
            guard step.label != skipping else { continue }
            let processor = step.process == .a ? processorOfA : 0
            lines.append("\(pids[step.process]!) \(at * 1000) \(processor) \(step.label)\(step.label.hasPrefix("tls") ? " 1401" : "")")
        }
        if waited { lines.append("20 \((start + 1) * 1000) \(processorOfA) fetch waited") }
        return lines
    }

    @Test("Each hop is the time from one step's stamp to the next; stamps of other processes, and in any order, change nothing")
    func hops() throws {
        let steps = HopTable.afterQuiet.count
        let first = Self.continuation(start: 1_000, gaps: Array(repeating: 100, count: steps - 1))
        let second = Self.continuation(start: 50_000, gaps: (1..<steps).map { $0 * 10 }, waited: true)
        // An early save's stamps on A in the middle, a stranger's process, and the lines shuffled.
        let noise = ["20 1250000 0 early save begins", "99 1300000 0 read call", "20 1300000 0 tls read 517", "not a stamp", "30 1300001 read call"]
        let table = HopTable(lines: (first + second + noise).shuffled(), a: 20, b: 30, caller: 10)
        #expect(table.found == 2 && table.measured == 2)
        #expect(table.fetchesWaited == 1)
        try #require(table.hops.count == steps - 1)
        // In nanoseconds, to compare exactly.
        let nanoseconds = { (values: [Double]) in values.map { Int(($0 * 1e6).rounded()) }.sorted() }
        for (index, hop) in table.hops.enumerated() {
            #expect(nanoseconds(hop.times) == [100_000, (index + 1) * 10_000].sorted(), "\(hop.name): \(hop.times)")
        }
        #expect(nanoseconds(table.totals) == [(steps - 1) * 100_000, (1..<steps).reduce(0, +) * 10_000].sorted())
    }

    @Test("A continuation with a step not stamped is found but not measured; a call never answered is not found, nor does it hide the next")
    func incomplete() {
        let gaps = Array(repeating: 100, count: HopTable.afterQuiet.count - 1)
        // A call whose answer never came, just before the first continuation.
        var lines = ["10 500000 0 call", "30 600000 0 read call"]
        lines += Self.continuation(start: 1_000, gaps: gaps, skipping: "proven")
        lines += Self.continuation(start: 90_000, gaps: gaps)
        // A last call whose answer never came.
        lines.append("10 200000000 0 call")
        let table = HopTable(lines: lines, a: 20, b: 30, caller: 10)
        #expect(table.found == 2)
        #expect(table.measured == 1)
        #expect(table.missing == ["A proven": 1])
        #expect(table.totals.map { Int(($0 * 1e6).rounded()) } == [gaps.count * 100_000])
    }

    @Test("A step is the first of its process and label after the step before: B's first read after A's flight, not a read before it")
    func causalOrder() {
        let gaps = Array(repeating: 100, count: HopTable.afterQuiet.count - 1)
        var lines = Self.continuation(start: 1_000, gaps: gaps)
        // B reads something on the link before A's flight: not the flight.
        lines.append("30 \((1_000 + 100 * 5 + 1) * 1000) 0 tls read 3")
        let table = HopTable(lines: lines, a: 20, b: 30, caller: 10)
        let flight = table.hops[HopTable.afterQuiet.firstIndex { $0.process == .b && $0.label == "tls read" }! - 1]
        #expect(flight.times.map { Int(($0 * 1e6).rounded()) } == [100_000], "\(flight.times)")
    }

    @Test("A hop whose two stamps were made on one processor is counted; a processor not known is never the same")
    func oneProcessor() throws {
        let steps = HopTable.afterQuiet
        let gaps = Array(repeating: 100, count: steps.count - 1)
        // A on processor 1, the others on 0; then everything on 0; then A's processor not known.
        let lines = Self.continuation(start: 1_000, gaps: gaps, processorOfA: 1) + Self.continuation(start: 90_000, gaps: gaps)
            + Self.continuation(start: 180_000, gaps: gaps, processorOfA: -1)
        let table = HopTable(lines: lines.shuffled(), a: 20, b: 30, caller: 10)
        #expect(table.measured == 3)
        for (index, hop) in table.hops.enumerated() {
            // The second continuation's hops are all on one processor. In the first, only a hop
            // from A to A or between two others; in the third, only a hop between two others.
            let (from, to) = (steps[index].process == .a, steps[index + 1].process == .a)
            let expected = 1 + (from == to ? 1 : 0) + (!from && !to ? 1 : 0)
            #expect(hop.sameProcessor == expected, "\(hop.name)")
        }
        // A line from before the processor was stamped is not read.
        #expect(HopTable(lines: ["10 1000 call", "10 2000 answered"], a: 20, b: 30, caller: 10).found == 0)
    }

    @Test("A continuation whose origin app saved on A's processor while the ClientHello waited is told apart, and only that one")
    func appAhead() throws {
        let steps = HopTable.afterQuiet
        let gaps = Array(repeating: 100, count: steps.count - 1)
        // B's ClientHello at step `hello`; A reads it 100 µs later.
        let hello = try #require(steps.firstIndex { $0.process == .b && $0.label == "tls write" })
        let helloAt = { (start: Int, gap: Int) in (start + gap * hello) * 1000 }
        // 1: the app saves on A's processor while the ClientHello waits.
        var lines = Self.continuation(start: 1_000, gaps: gaps, processorOfA: 1)
        lines.append("10 \(helloAt(1_000, 100) + 50_000) 1 saved")
        // 2: the app saves on the other processor meanwhile.
        lines += Self.continuation(start: 90_000, gaps: gaps, processorOfA: 1)
        lines.append("10 \(helloAt(90_000, 100) + 50_000) 0 saved")
        // 3: on A's processor, but just before B's ClientHello, and again just after A read it.
        lines += Self.continuation(start: 180_000, gaps: gaps.map { $0 * 2 })
        lines.append("10 \(helloAt(180_000, 200) - 1) 0 saved")
        lines.append("10 \(helloAt(180_000, 200) + 200_001) 0 saved")
        let table = HopTable(lines: lines.shuffled(), a: 20, b: 30, caller: 10)
        #expect(table.measured == 3)
        #expect(table.appAhead == [true, false, false])
        let medians = try #require(table.appAheadMedians)
        #expect(medians.aheadCount == 1 && medians.otherCount == 2)
        // In microseconds: the first took 100 µs a step, the third 200.
        let micro = { (value: Double) in Int((value * 1000).rounded()) }
        #expect(micro(medians.ahead) == gaps.count * 100)
        #expect(micro(medians.others) == micro(HopTable.percentile([Double(gaps.count) * 0.1, Double(gaps.count) * 0.2], 0.5)))
        // None ahead: no medians to compare.
        #expect(HopTable(lines: Self.continuation(start: 1_000, gaps: gaps), a: 20, b: 30, caller: 10).appAheadMedians == nil)
    }

    @Test("The table: a row per hop and the total, in milliseconds with two decimals, median then 10th–90th percentile")
    func markdown() {
        let gaps = Array(repeating: 1_234, count: HopTable.afterQuiet.count - 1)
        let table = HopTable(lines: Self.continuation(start: 1_000, gaps: gaps), a: 20, b: 30, caller: 10)
        let rows = table.markdown().split(separator: "\n")
        #expect(rows.count == 2 + HopTable.afterQuiet.count)
        #expect(rows[2] == "| the caller writes `continue`; B's agent reads it | 1.23 | 1.23–1.23 | 1 of 1 |")
        #expect(rows.last!.hasPrefix("| **total** | \(String(format: "%.2f", Double(gaps.count) * 1.234))"))
        #expect(HopTable.percentile([0.07], 0.5) == 0.07)
        // The nearest rank, as BenchmarkReport takes it: so the table's median is the report's.
        #expect(HopTable.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.1) == 2)
        #expect(HopTable.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9)
        #expect(HopTable.percentile([4, 1, 3, 2], 0.5) == 3)
        #expect(HopTable.percentile([], 0.5) == 0)
    }
}
