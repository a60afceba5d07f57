// Encodes and decodes a typical 3 KB userInfo with Handoff's encoding, and, in the same run,
// with PropertyListSerialization (binary: what Apple's Handoff uses, and the only Foundation
// codec that keeps the same types) and JSONSerialization (Foundation's fastest, which loses
// types) as the baselines. Prints Markdown tables; exits 1 if a target is missed. Run it with
// Benchmarks/userinfo.sh (a release build).
import BenchmarkReport
import Foundation
import Handoff

/// A userInfo like the ones the seeds describe, about 3 KB: a map region, an editor's state,
/// a short list of recent items, nested settings. JSON-compatible so that all three codecs
/// carry exactly the same data.
func typicalUserInfo() -> [AnyHashable: Any] {
    var recent: [Any] = []
    for i in 0..<12 {
        recent.append([
            "id": 10_000 + i,
            "name": "Store number \(i) on Market Street",
            "latitude": 37.7749 + Double(i) / 1000,
            "longitude": -122.4194 - Double(i) / 1000,
            "favorite": i % 3 == 0,
            "tags": ["retail", "open-late", "parking"],
        ] as [String: Any])
    }
    return [
        "activity-version": 2,
        "region.center.latitude": 37.7749,
        "region.center.longitude": -122.4194,
        "region.span.latitude": 0.05,
        "region.span.longitude": 0.05,
        "shape-type": "rounded-rectangle",
        "document": "Quarterly plan.shapes",
        "selection": [3, 5, 8, 13, 21],
        "draft": String(repeating: "Continue where you left off. ", count: 20),
        "recent": recent,
        "settings": ["zoom": 1.25, "grid": true, "units": "mm", "layers": ["base": true, "notes": false]] as [String: Any],
    ]
}

/// Adds what JSON cannot carry but a property list can: a date and bytes.
func plistUserInfo() -> [AnyHashable: Any] {
    var info = typicalUserInfo()
    info["modified"] = Date(timeIntervalSinceReferenceDate: 780_000_000.125)
    info["thumbnail"] = Data((0..<256).map { UInt8($0) })
    return info
}

struct Codec {
    var name: String
    var encode: ([AnyHashable: Any]) throws -> Data
    var decode: (Data) throws -> Any
}

let ours = Codec(
    name: "Handoff (UserInfoCoding)",
    encode: { try UserInfoCoding.encode($0) },
    decode: { try UserInfoCoding.decodeUserInfo($0) })
let plist = Codec(
    name: "PropertyListSerialization binary",
    encode: { try PropertyListSerialization.data(fromPropertyList: $0, format: .binary, options: 0) },
    decode: { try PropertyListSerialization.propertyList(from: $0, options: [], format: nil) })
let json = Codec(
    name: "JSONSerialization",
    encode: { try JSONSerialization.data(withJSONObject: $0) },
    decode: { try JSONSerialization.jsonObject(with: $0) })

let iterations = Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "") ?? 2_000
let rounds = 15

/// Microseconds per operation for one round of `iterations` operations.
func round(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    for _ in 0..<iterations { try body() }
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return seconds / Double(iterations) * 1e6
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

struct Row {
    var codec: String
    var data: String
    var encodeMicros: Double
    var decodeMicros: Double
    var size: Int
    /// Median over rounds of (plist time / this codec's time), each round measuring both
    /// back to back, so that the machine's slow moments cancel out of the ratio.
    var encodeSpeedup: Double
    var decodeSpeedup: Double
    /// The range of the rounds' times over their median, each way.
    var encodeSpread: Double
    var decodeSpread: Double
}

/// The range of `values` over their median.
func spread(_ values: [Double]) -> Double { ((values.max() ?? 0) - (values.min() ?? 0)) / median(values) }

/// Measures every codec on one data set, interleaving them round by round.
@MainActor func run(_ codecs: [Codec], on info: [AnyHashable: Any], label: String) throws -> [Row] {
    let encoded = try codecs.map { try $0.encode(info) }
    for (codec, bytes) in zip(codecs, encoded) {  // warm up
        for _ in 0..<(iterations / 10) {
            _ = try codec.encode(info)
            _ = try codec.decode(bytes)
        }
    }
    var encodeTimes = Array(repeating: [Double](), count: codecs.count)
    var decodeTimes = Array(repeating: [Double](), count: codecs.count)
    for _ in 0..<rounds {
        for (index, codec) in codecs.enumerated() {
            encodeTimes[index].append(try round { _ = try codec.encode(info) })
            decodeTimes[index].append(try round { _ = try codec.decode(encoded[index]) })
        }
    }
    let baseline = codecs.firstIndex { $0.name == plist.name }!
    return codecs.indices.map { index in
        Row(
            codec: codecs[index].name, data: label,
            encodeMicros: median(encodeTimes[index]), decodeMicros: median(decodeTimes[index]), size: encoded[index].count,
            encodeSpeedup: median(zip(encodeTimes[baseline], encodeTimes[index]).map { $0 / $1 }),
            decodeSpeedup: median(zip(decodeTimes[baseline], decodeTimes[index]).map { $0 / $1 }),
            encodeSpread: spread(encodeTimes[index]), decodeSpread: spread(decodeTimes[index]))
    }
}

func format(_ value: Double) -> String { String(format: "%.1f", value) }

// PROFILE=encode or PROFILE=decode runs only that operation of ours, in a loop, for a profiler.
if let profile = ProcessInfo.processInfo.environment["PROFILE"] {
    let info = typicalUserInfo()
    let encoded = try UserInfoCoding.encode(info)
    for _ in 0..<iterations * 50 {
        if profile == "encode" { _ = try UserInfoCoding.encode(info) } else { _ = try UserInfoCoding.decodeUserInfo(encoded) }
    }
    exit(0)
}

do {
    let jsonSafe = typicalUserInfo()
    let withDates = plistUserInfo()
    var rows: [Row] = []
    rows += try run([ours, plist, json], on: jsonSafe, label: "typical (JSON-safe)")
    rows += try run([ours, plist], on: withDates, label: "typical + Date + Data")

    print("userInfo encode/decode. Machine: \(machineDescription()). Release build.")
    print("Median µs per operation over \(rounds) interleaved rounds of \(iterations); speed-ups are the median of each round's ratio")
    print("to PropertyListSerialization; the spread is the range of the rounds' times over their median.\n")
    print("| data | codec | encode µs | decode µs | spread (encode / decode) | size B | encode vs plist | decode vs plist | size vs plist |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    let targets = Targets()
    for row in rows {
        let baseline = rows.first { $0.data == row.data && $0.codec == plist.name }!
        let sizeRatio = Double(row.size) / Double(baseline.size)
        print("| \(row.data) | \(row.codec) | \(format(row.encodeMicros)) | \(format(row.decodeMicros)) | \(format(row.encodeSpread * 100)) % / \(format(row.decodeSpread * 100)) % | \(row.size) | \(format(row.encodeSpeedup))x faster | \(format(row.decodeSpeedup))x faster | \(String(format: "%.2f", sizeRatio))x |")
        guard row.codec == ours.name else { continue }
        targets.check("\(row.data): ≥ 10x faster than PropertyListSerialization each way", row.encodeSpeedup >= 10 && row.decodeSpeedup >= 10,
            "\(format(row.encodeSpeedup))x / \(format(row.decodeSpeedup))x")
        targets.check("\(row.data): ≤ 2x the size of PropertyListSerialization's", sizeRatio <= 2, "\(String(format: "%.2f", sizeRatio))x")
        if let fastest = rows.first(where: { $0.data == row.data && $0.codec == json.name }) {
            // JSONSerialization keeps less (no integer/float/bool distinction, no dates, no
            // bytes), yet ours must still beat it.
            targets.check("\(row.data): faster than JSONSerialization each way", row.encodeMicros < fastest.encodeMicros && row.decodeMicros < fastest.decodeMicros,
                "\(format(fastest.encodeMicros / row.encodeMicros))x / \(format(fastest.decodeMicros / row.decodeMicros))x")
        }
    }
    let unsteady = rows.filter { $0.encodeSpread >= 0.10 || $0.decodeSpread >= 0.10 }.map { "\($0.codec) on \($0.data)" }
    print(unsteady.isEmpty ? "\nEvery codec's rounds agree within 10 %." : "\nRounds did NOT agree within 10 % for: \(unsteady.joined(separator: "; ")).")
    print("")
    print(targets.table)
    targets.finish()
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
