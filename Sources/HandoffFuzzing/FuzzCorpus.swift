import Foundation

/// Reading a corpus from disk and running mutations of it: shared by `handoff-fuzz` and the
/// test suite's short run.
public enum FuzzCorpus {
    /// The largest input read from a corpus: larger files are a mistake, not a test.
    public static let maximumInput = 1 << 20

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The regular files among `paths`, and those directly inside the directories among them,
    /// sorted by path so that a run is repeatable.
    public static func files(in paths: [String]) throws(Failure) -> [URL] {
        var files: [URL] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw Failure(description: "\(path): no such file or directory")
            }
            guard isDirectory.boolValue else {
                files.append(URL(fileURLWithPath: path))
                continue
            }
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: path)
            } catch {
                throw Failure(description: "\(path): cannot list the directory: \(error.localizedDescription)")
            }
            for name in names.sorted() where !name.hasPrefix(".") {
                files.append(URL(fileURLWithPath: path).appendingPathComponent(name))
            }
        }
        return files
    }

    public static func read(_ file: URL) throws(Failure) -> [UInt8] {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw Failure(description: "\(file.path): cannot read: \(error.localizedDescription)")
        }
        guard data.count <= maximumInput else {
            throw Failure(description: "\(file.path): \(data.count) bytes, over the limit of \(maximumInput) for a fuzz input")
        }
        return Array(data)
    }

    /// Runs `target` on every input of `corpus`, then on `runs` mutations of them; returns the
    /// number of executions. `willRun` sees each input first (to keep the one that faults).
    @discardableResult
    public static func mutate(
        _ target: FuzzTarget, corpus: [[UInt8]], runs: Int, seed: UInt64, willRun: (([UInt8]) -> Void)? = nil
    ) -> Int {
        for input in corpus {
            willRun?(input)
            target.run(input)
        }
        guard !corpus.isEmpty else { return 0 }
        var mutator = FuzzMutator(seed: seed)
        var pool = corpus
        for index in 0..<runs {
            let base = pool[Int(mutator.next() % UInt64(pool.count))]
            let other = pool[Int(mutator.next() % UInt64(pool.count))]
            let input = mutator.mutate(base, other: other)
            willRun?(input)
            target.run(input)
            // Keep some mutants as bases, so that mutations stack; the pool stays small.
            if index % 64 == 0 {
                if pool.count < corpus.count + 64 { pool.append(input) } else { pool[corpus.count + Int(mutator.next() % 64)] = input }
            }
        }
        return corpus.count + runs
    }
}
