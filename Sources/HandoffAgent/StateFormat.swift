import Foundation
import HandoffLocalAPI

/// The layout version of the state folder, so that an agent of one version never misreads, or
/// overwrites, what another wrote.
///
/// `format.json` holds the version (`{"format": 2, "writtenBy": "0.3.0"}`). A folder without it
/// that holds a device identity or an account was written before the format had a number:
/// version 1. When an agent starts:
/// - a fresh folder gets the current version;
/// - an older one is upgraded in place, one step at a time; the files the steps touch are
///   first copied to `.upgrade-backup/`, put back if a step fails (the folder is then as it
///   was, and the agent does not start), and removed once the new version is written. An
///   upgrade a crash interrupted is put back from that copy at the next start, and run again;
/// - a newer one stops the agent with a message that says so; nothing in it is changed.
package enum StateFormat {
    /// The version this agent writes.
    package static let current = 2
    package static let fileName = "format.json"
    /// Where the files an upgrade touches are kept until it succeeds.
    package static let backupFolder = ".upgrade-backup"

    struct Stamp: Codable {
        var format: Int
        var writtenBy: String
    }

    /// One upgrade step, from `from` to `from + 1`: it may rewrite the files it names in
    /// `touches` (top-level file names), which are backed up before any step runs.
    package struct Migration: Sendable {
        package var from: Int
        package var touches: [String]
        package var run: @Sendable (StateStore) throws(StateError) -> Void

        package init(from: Int, touches: [String], run: @escaping @Sendable (StateStore) throws(StateError) -> Void) {
            self.from = from
            self.touches = touches
            self.run = run
        }
    }

    /// The steps from each older version.
    package static let migrations: [Migration] = [
        // 1 → 2: the folder gets its version. Every file the agent keeps must read with this
        // agent first: one that does not stops the upgrade, and the folder stays version 1,
        // as it was, for the agent that wrote it.
        Migration(
            from: 1, touches: [DeviceIdentity.fileName, AccountState.fileName, AccountState.changesFileName, Agent.removalFileName]
        ) { store throws(StateError) in
            _ = try DeviceIdentity.load(from: store)
            _ = try store.load(AccountState.self, from: AccountState.fileName)
            _ = try store.load([Agent.RecordedChange].self, from: AccountState.changesFileName)
            _ = try store.load(LocalRemoval.self, from: Agent.removalFileName)
        },
    ]

    /// Reads the folder's version, upgrades an older one, refuses a newer one; returns what it
    /// did, for the log (nothing when the folder was already current).
    @discardableResult
    package static func prepare(
        _ store: StateStore, current: Int = current, migrations: [Migration] = migrations, writtenBy: String = handoffVersion
    ) throws(StateError) -> String? {
        let fileManager = FileManager.default
        let backup = store.url(backupFolder)
        var recovered = false
        if fileManager.fileExists(atPath: backup.path) {
            let stamped = try version(of: store)
            if stamped == current {
                // The new version was written; only the copy was left.
                try? fileManager.removeItem(at: backup)
            } else {
                try restore(from: backup, into: store)
                recovered = true
            }
        }

        guard let found = try version(of: store) else {
            try stamp(store, current, writtenBy: writtenBy)
            return nil
        }
        guard found <= current else {
            throw .newerFormat(path: store.directory.path, found: found, supported: current)
        }
        guard found < current else { return recovered ? "an interrupted upgrade of the state folder was undone" : nil }

        let steps = (found..<current).map { version in migrations.first { $0.from == version } }
        guard steps.allSatisfy({ $0 != nil }) else {
            throw .upgradeFailed(path: store.directory.path, from: found, to: current, reason: "this agent has no way to upgrade from format \(found)")
        }
        // The stamp too: a failed step must leave the version as it was.
        let touched = Set(steps.flatMap { $0!.touches } + [fileName]).sorted()
        do {
            try fileManager.createDirectory(at: backup, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            var record: [String] = []
            for name in touched {
                if fileManager.fileExists(atPath: store.url(name).path) {
                    try fileManager.copyItem(at: store.url(name), to: backup.appendingPathComponent(name))
                    record.append("kept \(name)")
                } else {
                    record.append("absent \(name)")
                }
            }
            // Written last: a copy without its record is incomplete, and nothing was changed yet.
            try Data(record.joined(separator: "\n").utf8).write(to: backup.appendingPathComponent(recordName))
            AppRegistry.flush(backup)
        } catch {
            try? fileManager.removeItem(at: backup)
            throw .upgradeFailed(path: store.directory.path, from: found, to: current, reason: "could not copy its files aside first: \(error.localizedDescription)")
        }
        do throws(StateError) {
            for step in steps { try step!.run(store) }
            try stamp(store, current, writtenBy: writtenBy)
        } catch {
            try? restore(from: backup, into: store)
            throw .upgradeFailed(path: store.directory.path, from: found, to: current, reason: "\(error); the folder was put back as it was")
        }
        try? fileManager.removeItem(at: backup)
        return "the state folder was upgraded from format \(found) to \(current)"
    }

    /// The folder's version: its stamp, else 1 for a folder an agent used before versions, else nil.
    static func version(of store: StateStore) throws(StateError) -> Int? {
        if let stamp = try store.load(Stamp.self, from: fileName) { return stamp.format }
        let used = [DeviceIdentity.fileName, AccountState.fileName].contains { FileManager.default.fileExists(atPath: store.url($0).path) }
        return used ? 1 : nil
    }

    private static func stamp(_ store: StateStore, _ version: Int, writtenBy: String) throws(StateError) {
        try store.save(Stamp(format: version, writtenBy: writtenBy), to: fileName)
    }

    /// Names, in the backup folder, the files it holds and those that did not exist.
    static let recordName = ".record"

    /// Puts the files back as the record says (those that did not exist are removed), then
    /// removes the copy. A copy without its record was never completed, and nothing had changed.
    private static func restore(from backup: URL, into store: StateStore) throws(StateError) {
        let fileManager = FileManager.default
        if let record = try? String(contentsOf: backup.appendingPathComponent(recordName), encoding: .utf8) {
            for line in record.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[1].contains("/"), !parts[1].hasPrefix(".") else { continue }
                let name = parts[1]
                if parts[0] == "kept" {
                    guard let data = try? Data(contentsOf: backup.appendingPathComponent(name)) else {
                        throw .unreadable(path: backup.appendingPathComponent(name).path, reason: "the copy an interrupted upgrade kept cannot be read")
                    }
                    try store.write(name, data)
                } else if fileManager.fileExists(atPath: store.url(name).path) {
                    try? fileManager.removeItem(at: store.url(name))
                }
            }
        }
        try? fileManager.removeItem(at: backup)
    }
}
