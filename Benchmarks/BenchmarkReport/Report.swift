// What every benchmark here shares: the machine it ran on, one clock, runs repeated until
// their medians agree, memory read the way the kernel accounts it, and targets that fail the
// run.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, whatever its
/// network namespace.
public func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

public func milliseconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e6 }

/// The CPU time `pid` has used so far, in nanoseconds: the process's CPU clock, which keeps
/// the time of its threads that have ended (a sum over the threads alive now does not, and
/// could go back between two readings). Nil when it cannot be read (no such process).
public func cpuTime(of pid: pid_t) -> UInt64? {
    var clock = clockid_t()
    var time = timespec()
    guard clock_getcpuclockid(pid, &clock) == 0, clock_gettime(clock, &time) == 0 else { return nil }
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// From `start` to `end` (nanoseconds) in milliseconds, negative if `end` is the earlier: for
/// readings whose order nothing promises (a stamp of another process, such as the app on B's;
/// a reading that could not be made, 0), where an unsigned subtraction would trap.
public func signedMilliseconds(from start: UInt64, to end: UInt64) -> Double {
    (Double(end) - Double(start)) / 1e6
}

/// The value at `p` (0...1) of `values`, nearest rank; NaN for none.
public func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

// MARK: The machine

/// One line naming the machine: processor, cores, memory, kernel, and its load when asked.
public func machineDescription() -> String {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
        .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown processor"
    let cores = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
    let memoryKB = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
        .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) } ?? 0
    var names = utsname()
    uname(&names)
    let kernel = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    let machine = withUnsafeBytes(of: &names.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    return "\(model), \(cores) cores online, \(memoryKB / 1024 / 1024) GiB, Linux \(kernel) \(machine), load \(loadAverage())"
}

/// The one-minute load average, as /proc/loadavg says.
public func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").first.map(String.init) ?? "?"
}

// MARK: Runs

/// The samples of several measures over repeated runs. A run gives each measure its samples;
/// runs repeat until every measure's run medians agree within `spreadLimit` (range over median),
/// at least `minimum` and at most `maximum` times.
public struct Runs {
    public var names: [String]
    public var samples: [String: [[Double]]] = [:]
    public var spreadLimit = 0.10

    public init(_ names: [String]) { self.names = names }

    public var count: Int { samples.values.map(\.count).max() ?? 0 }

    public mutating func add(_ run: [String: [Double]]) {
        for name in names { samples[name, default: []].append(run[name] ?? []) }
    }

    /// The medians of each run of `name`.
    public func medians(_ name: String) -> [Double] { (samples[name] ?? []).map { BenchmarkReport.percentile($0, 0.5) } }

    /// The range of `name`'s run medians over their median.
    public func spread(_ name: String) -> Double {
        let medians = medians(name)
        guard let low = medians.min(), let high = medians.max() else { return .nan }
        return (high - low) / BenchmarkReport.percentile(medians, 0.5)
    }

    public func agree(minimum: Int) -> Bool {
        count >= minimum && names.allSatisfy { spread($0) < spreadLimit }
    }

    /// Every sample of `name`, all runs together.
    public func pooled(_ name: String) -> [Double] { (samples[name] ?? []).flatMap { $0 } }

    /// A percentile over all runs' samples.
    public func percentile(_ name: String, _ p: Double) -> Double { BenchmarkReport.percentile(pooled(name), p) }

    /// The runs, one row each, for the report.
    public func table(unit: String = "ms") -> String {
        var lines = ["| run | " + names.map { "\($0) p50 / p99" }.joined(separator: " | ") + " |"]
        lines.append("| --- |" + String(repeating: " --- |", count: names.count))
        for run in 0..<count {
            let cells = names.map { name -> String in
                let values = samples[name]?[run] ?? []
                return String(format: "%.3f / %.3f %@", BenchmarkReport.percentile(values, 0.5), BenchmarkReport.percentile(values, 0.99), unit)
            }
            lines.append("| \(run + 1) | " + cells.joined(separator: " | ") + " |")
        }
        lines.append("| spread of the medians | " + names.map { String(format: "%.1f %%", spread($0) * 100) }.joined(separator: " | ") + " |")
        return lines.joined(separator: "\n")
    }

    /// What to say of the runs' agreement.
    public func agreement(minimum: Int) -> String {
        let spreads = names.map { "\($0) \(String(format: "%.1f", spread($0) * 100)) %" }.joined(separator: ", ")
        return agree(minimum: minimum)
            ? "\(count) runs; their medians agree within \(Int(spreadLimit * 100)) % (\(spreads))."
            : "\(count) runs; their medians did NOT agree within \(Int(spreadLimit * 100)) % (\(spreads)): the figures below are less certain than they look."
    }
}

/// Runs `body` until its measures' run medians agree (see `Runs`), printing each run to
/// standard error as it ends.
public func repeatRuns(
    _ names: [String], minimum: Int = 3, maximum: Int = 8, _ body: (Int) async throws -> [String: [Double]]
) async rethrows -> Runs {
    var runs = Runs(names)
    while runs.count < maximum && !runs.agree(minimum: minimum) {
        let run = try await body(runs.count + 1)
        runs.add(run)
        let line = names.map { "\($0) p50 \(String(format: "%.3f", BenchmarkReport.percentile(run[$0] ?? [], 0.5)))" }.joined(separator: ", ")
        FileHandle.standardError.write(Data("run \(runs.count): \(line)\n".utf8))
    }
    return runs
}

// MARK: Memory

/// A process's memory as the kernel accounts it (kB): resident, proportional (shared pages
/// divided among the processes mapping them) and unique (pages no other process maps).
public struct MemorySample {
    public var rss: Int
    public var pss: Int
    public var uss: Int
}

public func memory(of pid: Int32) -> MemorySample? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return nil }
    var fields: [Substring: Int] = [:]
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true)
        if parts.count >= 2, parts[0].hasSuffix(":"), let value = Int(parts[1]) { fields[parts[0].dropLast()] = value }
    }
    guard let rss = fields["Rss"], let pss = fields["Pss"] else { return nil }
    return MemorySample(rss: rss, pss: pss, uss: (fields["Private_Clean"] ?? 0) + (fields["Private_Dirty"] ?? 0))
}

/// The CPU time a process has used, in seconds (`cpuTime`); 0 when it cannot be read.
public func cpuSeconds(of pid: Int32) -> Double {
    Double(cpuTime(of: pid) ?? 0) / 1e9
}

/// A process's memory sampled every `interval` for `duration`: the median and maximum of each
/// measure, and the CPU it used meanwhile.
public struct MemoryWindow {
    public var samples: [MemorySample]
    public var seconds: Double
    public var cpuPercent: Double

    public static func watch(_ pid: Int32, for duration: Duration, every interval: Duration = .seconds(1)) async throws -> MemoryWindow {
        let start = now()
        let cpuBefore = cpuSeconds(of: pid)
        var samples: [MemorySample] = []
        let clock = ContinuousClock()
        let end = clock.now + duration
        while clock.now < end {
            if let sample = memory(of: pid) { samples.append(sample) }
            try await Task.sleep(for: interval)
        }
        let seconds = Double(now() - start) / 1e9
        return MemoryWindow(samples: samples, seconds: seconds, cpuPercent: (cpuSeconds(of: pid) - cpuBefore) / seconds * 100)
    }

    public func median(_ measure: KeyPath<MemorySample, Int>) -> Double { BenchmarkReport.percentile(samples.map { Double($0[keyPath: measure]) / 1024 }, 0.5) }
    public func maximum(_ measure: KeyPath<MemorySample, Int>) -> Double { Double(samples.map { $0[keyPath: measure] }.max() ?? 0) / 1024 }
}

// MARK: Targets

/// The targets a benchmark checks; any missed one fails the run.
public final class Targets {
    public init() {}

    public private(set) var rows: [(what: String, met: Bool, detail: String)] = []

    public func check(_ what: String, _ met: Bool, _ detail: String) {
        rows.append((what, met, detail))
    }

    public var table: String {
        var lines = ["| target | result | |", "| --- | --- | --- |"]
        for row in rows { lines.append("| \(row.what) | \(row.detail) | \(row.met ? "met" : "**MISSED**") |") }
        return lines.joined(separator: "\n")
    }

    /// The process's exit status: 1 if a target was missed, else 0.
    public var status: Int32 { rows.allSatisfy(\.met) ? 0 : 1 }

    /// The last line of the report.
    public var verdict: String {
        let missed = rows.filter { !$0.met }
        if missed.isEmpty { return "All \(rows.count) targets met." }
        return "\(missed.count) of \(rows.count) targets missed: \(missed.map(\.what).joined(separator: "; "))."
    }

    /// Prints the verdict and ends the process with `status`.
    public func finish() -> Never {
        print("\n" + verdict)
        exit(status)
    }
}

public func format(_ value: Double, _ decimals: Int = 2) -> String { String(format: "%.\(decimals)f", value) }
