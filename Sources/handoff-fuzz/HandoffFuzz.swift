import Foundation
import HandoffFuzzing

#if HANDOFF_LIBFUZZER
// Built by Scripts/fuzz.sh with `-sanitize=fuzzer,address -DHANDOFF_LIBFUZZER`: main hands
// over to libFuzzer's driver, which runs the target HANDOFF_FUZZ_TARGET names.
import CFuzzerDriver

nonisolated(unsafe) private var selected: FuzzTarget = .beacon

@_cdecl("handoff_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    let name = ProcessInfo.processInfo.environment["HANDOFF_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("handoff-fuzz: set HANDOFF_FUZZ_TARGET to one of: \(names) (it is '\(name)')\n".utf8))
        return 2
    }
    selected = target
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        selected.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }
}

#else
import ArgumentParser

/// Without libFuzzer: writes the seed corpus, replays inputs (a crash file, say), and runs a
/// target over its corpus and mutations of it, for machines where libFuzzer is not at hand.
@main
struct HandoffFuzz: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff-fuzz",
        abstract: "Handoff's fuzz targets, without libFuzzer (Scripts/fuzz.sh runs them with it).",
        subcommands: [Targets.self, Seeds.self, Replay.self, Mutate.self, ForgeBeacons.self]
    )
}

extension FuzzTarget: ExpressibleByArgument {}

struct ForgeBeacons: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forge-beacons",
        abstract: "Offers forged beacons (random, and valid ones with 1 to 3 bits flipped) to the beacon opener and the replay guard (S3); fails if any opens.")

    @Option(help: "How many beacons to forge.")
    var count = 10_000_000

    func validate() throws {
        guard count > 0 else { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        let outcome = ForgedBeacons.run(count: count)
        print("forged beacons: \(outcome.offered) offered, \(outcome.opened) opened, \(outcome.guardEntries) replay guard entries after, \(String(format: "%.1f", outcome.seconds)) s")
        if outcome.opened != 0 || outcome.guardEntries != 0 { throw ExitCode.failure }
    }
}

struct Targets: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "targets", abstract: "Lists the targets.")

    func run() {
        for target in FuzzTarget.allCases { print(target.rawValue) }
    }
}

struct Seeds: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Writes each target's seeds into DIRECTORY/TARGET/ (files that exist are left alone).")

    @Argument(help: "The corpus directory, Fuzz/Corpus in the repository.")
    var directory: String

    func run() throws {
        let root = URL(fileURLWithPath: directory)
        var written = 0
        for target in FuzzTarget.allCases {
            let folder = root.appendingPathComponent(target.rawValue)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for seed in FuzzSeeds.seeds(for: target) {
                let file = folder.appendingPathComponent("seed-\(seed.name)")
                guard !FileManager.default.fileExists(atPath: file.path) else { continue }
                try Data(seed.bytes).write(to: file, options: .atomic)
                written += 1
            }
        }
        print("wrote \(written) seed files under \(root.path)")
    }
}

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Runs a target on each file given (a crash file, or a corpus directory).")

    @Argument(help: "The target: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")).")
    var target: FuzzTarget

    @Argument(help: "Files or directories of inputs.")
    var inputs: [String]

    func run() throws {
        let files = try FuzzCorpus.files(in: inputs)
        for file in files {
            print("\(target.rawValue): \(file.path)")
            target.run(try FuzzCorpus.read(file))
        }
        print("\(target.rawValue): \(files.count) inputs ran without a fault")
    }
}

struct Mutate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs a target over a corpus and random mutations of it, without coverage guidance.")

    @Argument(help: "The target.")
    var target: FuzzTarget

    @Argument(help: "Corpus files or directories (default: the target's built-in seeds).")
    var inputs: [String] = []

    @Option(help: "How many mutated inputs to run.")
    var runs: Int = 100_000

    @Option(help: "The random generator's seed, to repeat a run.")
    var seed: UInt64 = 1

    @Option(help: "Writes each input to this file before running it: after a fault, it holds the input that caused it.")
    var keepLast: String?

    func validate() throws {
        guard runs >= 0 else { throw ValidationError("--runs must be 0 or more, not \(runs)") }
    }

    func run() throws {
        var corpus = try FuzzCorpus.files(in: inputs).map(FuzzCorpus.read)
        if corpus.isEmpty { corpus = FuzzSeeds.seeds(for: target).map(\.bytes) }
        if corpus.isEmpty { corpus = [[]] }
        let started = ContinuousClock.now
        let last = keepLast.map { URL(fileURLWithPath: $0) }
        let executions = FuzzCorpus.mutate(target, corpus: corpus, runs: runs, seed: seed) { input in
            if let last { try? Data(input).write(to: last) }
        }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        print("\(target.rawValue): \(executions) executions in \(String(format: "%.1f", seconds)) s, no fault")
    }
}
#endif
