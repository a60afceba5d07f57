import Foundation
import HandoffAgent
import HandoffFuzzing
import HandoffWire
import Testing

/// The CI run of the fuzz targets: every target over its committed corpus (seeds and the
/// inputs of every fault found, kept as regression tests) and mutations of it. The long runs
/// with libFuzzer's coverage guidance are `Scripts/fuzz.sh`.
@Suite("Fuzz targets, short run", .serialized)
struct FuzzCorpusTests {
    /// Runs CPU-bound `work` on a thread of its own, not the test runner's shared pool, so that
    /// the suites running beside it keep their threads.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus").standardized

    static func inputs(_ target: FuzzTarget) throws -> [[UInt8]] {
        try FuzzCorpus.files(in: [corpus.appendingPathComponent(target.rawValue).path]).map(FuzzCorpus.read)
    }

    @Test("S9: every decoder of outside bytes takes its corpus and 20,000 mutations of it without a fault", arguments: FuzzTarget.allCases)
    func shortRun(target: FuzzTarget) async throws {
        let corpus = try Self.inputs(target)
        #expect(!corpus.isEmpty, "Fuzz/Corpus/\(target.rawValue) holds no inputs")
        let executions = try await Self.onThread { FuzzCorpus.mutate(target, corpus: corpus, runs: 20_000, seed: 0x5EED) }
        #expect(executions == corpus.count + 20_000)
    }

    @Test("S3: 100,000 forged beacons (random, and valid ones with 1 to 3 bits flipped): none opens, and the replay guard learns nothing")
    func forgedBeacons() async throws {
        // The bounded run; Scripts/fuzz.sh offers 10^7 (docs/security.md, Fuzzing).
        let outcome = try await Self.onThread { ForgedBeacons.run(count: 100_000) }
        #expect(outcome.offered == 100_000)
        #expect(outcome.opened == 0)
        #expect(outcome.guardEntries == 0)
    }

    @Test("S3: the forged-beacon run counts a beacon that opens (the run above can fail)")
    func forgedBeaconsCanFail() {
        // No bit flipped: every other beacon offered is the valid one, which opens, and the
        // replay guard then tracks its sender.
        let outcome = ForgedBeacons.run(count: 10, bitsFlipped: 0...0)
        #expect(outcome.opened == 5)
        #expect(outcome.guardEntries == 1)
    }

    @Test("The committed corpus holds every built-in seed, as the encoders write it today")
    func seedsCommitted() throws {
        for target in FuzzTarget.allCases {
            let folder = Self.corpus.appendingPathComponent(target.rawValue)
            for seed in FuzzSeeds.seeds(for: target) {
                let file = folder.appendingPathComponent("seed-\(seed.name)")
                #expect(FileManager.default.fileExists(atPath: file.path), "missing \(file.path); run handoff-fuzz seeds Fuzz/Corpus")
            }
        }
    }

    @Test("The seeds reach past the first checks: sealed beacons open, signed association files parse, link frames decode")
    func seedsAreValid() throws {
        let beacons = try Self.inputs(.beacon).filter { $0.count == Beacon.size }
        #expect(!beacons.isEmpty)
        for beacon in beacons { #expect(Beacon.open(beacon, with: [FuzzTarget.beaconKey]) != nil) }
        let signed = try Self.inputs(.signedAssociationFile)
        #expect(signed.count >= 2)
        for file in signed {
            let parsed = try SignedAssociationFile.parse(file)
            #expect(try SiteAssociationFile(json: parsed.content).activityContinuationApps == ["EXAMPLETEAM.com.example.notes"])
        }
    }
}
