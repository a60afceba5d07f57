/// Where continuations spent their time, hop by hop, from what HandoffAgent's `HopTrace`
/// stamped in the caller, both agents and the apps (`Benchmarks/hops.sh`).
///
/// Each continuation is the stamps from the first step's (a caller's `call`) to the last's (its
/// `answered`). Its hops are the steps of `steps`, in order: each is the first stamp of that
/// process and label (a prefix: `tls read` matches `tls read 1401`) at or after the step before,
/// so that a hop is what one step waited for the one before. Every step in `afterQuiet` is
/// caused by the one before it, and each stamp that another process's next step waits for is
/// made before the write that wakes it: so B's TLS flight, not its handshake's end (NIOSSL
/// writes the Finished before it says the handshake is done), and A's answer, not B's check of
/// A's proof (A's proof may leave before the answer, when the fetch waits for the app).
/// A continuation missing a step is counted, not measured.
///
/// Each stamp also names the processor its thread ran on. A hop whose two stamps are of two
/// processes on one processor is a wake-up Linux placed beside the process that woke it
/// (`sameProcessor`); and `appAhead` marks the continuations in which the origin app's save ran
/// on A's processor while A had the ClientHello to read (after B wrote it, before A read it). A
/// processor not known (-1) is never the same as another.
package struct HopTable: Sendable {
    package enum Process: String, Sendable {
        case caller
        case a = "A"
        case b = "B"
    }

    package struct Step: Sendable {
        package let process: Process
        package let label: String
        /// What the time since the step before is spent on.
        package let hop: String

        package init(_ process: Process, _ label: String, _ hop: String) {
            self.process = process
            self.label = label
            self.hop = hop
        }
    }

    /// A continuation after the link went quiet: the caller asks B's agent, whose new link to A
    /// opens (TCP, TLS 1.3, the membership proofs) with the fetch inside B's proof, answered by
    /// A from its app's early save.
    package static let afterQuiet: [Step] = [
        Step(.caller, "call", ""),
        Step(.b, "read call", "the caller writes `continue`; B's agent reads it"),
        Step(.b, "continuation begins", "B decodes it and starts the continuation"),
        Step(.b, "link begins", "B picks the device and the app, begins the link"),
        Step(.b, "connect called", "B makes the connection (TLS context, handlers, socket, `connect`)"),
        Step(.b, "tls write", "B's connection is made, its ClientHello written"),
        Step(.a, "tls read", "A wakes, accepts, reads the ClientHello"),
        Step(.a, "tls write", "A makes its flight (key share, certificate, signature)"),
        Step(.b, "tls read", "B wakes and reads A's flight"),
        Step(.b, "tls write", "B verifies A's flight, makes its own (certificate, signature, Finished)"),
        Step(.a, "handshake done", "A wakes, reads B's flight, finishes the handshake"),
        Step(.a, "proven", "A reads B's proof (its hello and the fetch inside), opens it, makes its own"),
        Step(.a, "answered fetch", "A answers the fetch (an early save, or the app)"),
        Step(.b, "answer read", "B wakes, reads A's proof and checks it, reads the answer"),
        Step(.b, "delivered", "B checks the userInfo, sends it to the app"),
        Step(.b, "replied", "B answers the caller"),
        Step(.caller, "answered", "the caller wakes, reads the answer, its task resumes"),
    ]

    /// A continuation after quiet on the link kept open: B's fetch goes out on it at once, and A
    /// asks its app (in the caller's process, as the benchmark's origin app is) to save.
    package static let keptAfterQuiet: [Step] = [
        Step(.caller, "call", ""),
        Step(.b, "read call", "the caller writes `continue`; B's agent reads it"),
        Step(.b, "continuation begins", "B decodes it and starts the continuation"),
        Step(.b, "tls write", "B picks the device and the app, writes the fetch on the link"),
        Step(.a, "tls read", "A wakes and reads the fetch"),
        Step(.caller, "save asked", "A checks it, asks the origin app to save; the app wakes and reads it"),
        Step(.caller, "saved", "the origin app saves (3 KB userInfo encoded) and answers"),
        Step(.a, "read call", "A wakes and reads the save"),
        Step(.a, "tls write", "A checks it and writes the answer on the link"),
        Step(.b, "tls read", "B wakes and reads the answer"),
        Step(.b, "delivered", "B checks the userInfo, sends it to the app"),
        Step(.b, "replied", "B answers the caller"),
        Step(.caller, "answered", "the caller wakes, reads the answer, its task resumes"),
    ]

    /// The bare exchange after the same quiet (the benchmark's baseline): a client (B) opens a
    /// TLS 1.3 connection to a server (A), both showing certificates, sends 3 KB, and has them
    /// back.
    package static let bareAfterQuiet: [Step] = [
        Step(.b, "call", ""),
        Step(.b, "tls write", "the client makes the connection, its ClientHello written"),
        Step(.a, "tls read", "the server wakes, accepts, reads the ClientHello"),
        Step(.a, "tls write", "the server makes its flight (key share, certificate, signature)"),
        Step(.b, "tls read", "the client wakes and reads the server's flight"),
        Step(.b, "tls write", "the client verifies it, makes its own (certificate, signature, Finished)"),
        Step(.a, "answered", "the server wakes, finishes the handshake, reads the request, answers"),
        Step(.b, "answered", "the client wakes, reads the answer"),
    ]

    package struct Hop: Sendable {
        package let name: String
        /// Milliseconds, one per continuation measured.
        package let times: [Double]
        /// In how many of them the hop's two stamps were made on one processor.
        package let sameProcessor: Int
    }

    package let hops: [Hop]
    /// From the first step to the last, per continuation measured (ms).
    package let totals: [Double]
    /// Continuations found (a `call` followed by an `answered`).
    package let found: Int
    /// Of those measured, how many had A's fetch wait for the app (no early save ready).
    package let fetchesWaited: Int
    /// For the continuations found but not measured, the first step not stamped, and how often.
    package let missing: [String: Int]
    /// Per continuation measured (in the order of `totals`): whether the origin app (the
    /// caller's process) stamped `saved` on A's processor between B's ClientHello and A's
    /// reading of it, so that A read it only after the app's save.
    package let appAhead: [Bool]

    /// Reads `lines` (`<pid> <ns> <processor> <label>`); `a`, `b` and `caller` are the
    /// processes' ids (the apps run in the caller's process, as the benchmark's do).
    package init(lines: some Sequence<some StringProtocol>, a: Int32, b: Int32, caller: Int32, steps: [Step] = afterQuiet) {
        precondition(steps.count >= 2 && steps[0].process == steps[steps.count - 1].process, "a window opens and closes in one process")
        var stamps: [(time: Int, process: Process, processor: Int, label: Substring)] = []
        for line in lines {
            let fields = line.split(separator: " ", maxSplits: 3)
            guard fields.count == 4, let pid = Int32(fields[0]), let time = Int(fields[1]), let processor = Int(fields[2]) else { continue }
            let process: Process
            switch pid {
            case a: process = .a
            case b: process = .b
            case caller: process = .caller
            default: continue
            }
            stamps.append((time, process, processor, Substring(fields[3])))
        }
        stamps.sort { $0.time < $1.time }

        var times = Array(repeating: [Double](), count: max(steps.count - 1, 0))
        var same = Array(repeating: 0, count: max(steps.count - 1, 0))
        var totals: [Double] = []
        var appAhead: [Bool] = []
        // B's ClientHello and A's reading of it, where the steps have them.
        let clientHello = steps.firstIndex { $0.process == .b && $0.label == "tls write" }
        let clientHelloRead = clientHello.map { $0 + 1 }.flatMap { steps.indices.contains($0) && steps[$0].process == .a ? $0 : nil }
        var found = 0
        var waited = 0
        var missing: [String: Int] = [:]
        var index = 0
        while index < stamps.count {
            guard let first = steps.first, stamps[index].process == first.process, stamps[index].label == first.label else {
                index += 1
                continue
            }
            // The continuation's window: to its first step's process's next last step (the
            // caller's `answered`), or its next first step.
            let last = steps[steps.count - 1]
            var end = index + 1
            while end < stamps.count, !(stamps[end].process == last.process && (stamps[end].label == last.label || stamps[end].label == first.label)) { end += 1 }
            guard end < stamps.count, stamps[end].label == last.label else {
                index = end
                continue
            }
            found += 1
            let window = stamps[index...end]
            // Where each step's stamp is in `stamps`.
            var positions = [index]
            for step in steps.dropFirst() {
                guard let next = window[(positions[positions.count - 1] + 1)...].firstIndex(where: { $0.process == step.process && $0.label.hasPrefix(step.label) }) else {
                    missing["\(step.process.rawValue) \(step.label)", default: 0] += 1
                    break
                }
                positions.append(next)
            }
            if positions.count == steps.count {
                for hop in 1..<positions.count {
                    let (from, to) = (stamps[positions[hop - 1]], stamps[positions[hop]])
                    times[hop - 1].append(Double(to.time - from.time) / 1e6)
                    if from.processor >= 0, from.processor == to.processor { same[hop - 1] += 1 }
                }
                totals.append(Double(stamps[positions[positions.count - 1]].time - stamps[index].time) / 1e6)
                if let clientHello, let clientHelloRead {
                    let (written, read) = (stamps[positions[clientHello]], stamps[positions[clientHelloRead]])
                    appAhead.append(window.contains {
                        $0.process == .caller && $0.label == "saved" && $0.time > written.time && $0.time < read.time && read.processor >= 0
                            && $0.processor == read.processor
                    })
                } else {
                    appAhead.append(false)
                }
                if window.contains(where: { $0.process == .a && $0.label == "fetch waited" }) { waited += 1 }
            }
            index = end + 1
        }
        hops = zip(steps.dropFirst(), zip(times, same)).map { Hop(name: $0.hop, times: $1.0, sameProcessor: $1.1) }
        self.totals = totals
        self.appAhead = appAhead
        self.found = found
        fetchesWaited = waited
        self.missing = missing
    }

    /// Continuations with every step stamped.
    package var measured: Int { totals.count }

    /// `percentile`, the reports' nearest rank, with 0 for none (a table row stays printable).
    package static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        values.isEmpty ? 0 : BenchmarkReport.percentile(values, fraction)
    }

    /// A Markdown table: each hop's median and 10th–90th percentiles, and in how many of the
    /// continuations its two stamps were on one processor; then the total.
    package func markdown() -> String {
        func cell(_ values: [Double]) -> String {
            let format = { (value: Double) in String(Int((value * 100).rounded())).paddedCents }
            return "| \(format(Self.percentile(values, 0.5))) | \(format(Self.percentile(values, 0.1)))–\(format(Self.percentile(values, 0.9))) |"
        }
        var lines = ["| hop | ms | 10th–90th percentile | one processor |", "| --- | --- | --- | --- |"]
        for hop in hops { lines.append("| \(hop.name) \(cell(hop.times)) \(hop.sameProcessor) of \(hop.times.count) |") }
        lines.append("| **total** \(cell(totals)) |")
        return lines.joined(separator: "\n")
    }

    /// The totals' medians (ms) of the continuations in which the origin app's save ran on A's
    /// processor ahead of the ClientHello, and of the others, with how many of each; nil when
    /// either kind has none.
    package var appAheadMedians: (ahead: Double, aheadCount: Int, others: Double, otherCount: Int)? {
        let ahead = zip(totals, appAhead).filter { $0.1 }.map(\.0)
        let others = zip(totals, appAhead).filter { !$0.1 }.map(\.0)
        guard !ahead.isEmpty, !others.isEmpty else { return nil }
        return (Self.percentile(ahead, 0.5), ahead.count, Self.percentile(others, 0.5), others.count)
    }
}

extension String {
    /// Hundredths as a decimal: "123" → "1.23", "7" → "0.07".
    fileprivate var paddedCents: String {
        let digits = count < 3 ? String(repeating: "0", count: 3 - count) + self : self
        return "\(digits.dropLast(2)).\(digits.suffix(2))"
    }
}
