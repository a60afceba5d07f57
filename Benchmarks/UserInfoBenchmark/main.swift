// Encodes and decodes a typical 3 KB userInfo with Handoff's encoding, and, in the same run,
// with PropertyListSerialization (binary) and JSONSerialization as the baseline. Prints a
// Markdown table. Run it with Benchmarks/userinfo.sh (a release build).
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

/// Median time of one operation in microseconds, over several rounds of many iterations.
func measure(_ iterations: Int, _ body: () throws -> Void) rethrows -> Double {
    for _ in 0..<(iterations / 10) { try body() }  // warm up
    var rounds: [Double] = []
    for _ in 0..<7 {
        let start = ContinuousClock.now
        for _ in 0..<iterations { try body() }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        rounds.append(seconds / Double(iterations) * 1e6)
    }
    return rounds.sorted()[rounds.count / 2]
}

struct Row {
    var codec: String
    var data: String
    var encodeMicros: Double
    var decodeMicros: Double
    var size: Int
}

let iterations = Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "") ?? 2_000

func run(_ codec: Codec, on info: [AnyHashable: Any], label: String) throws -> Row {
    let encoded = try codec.encode(info)
    let encodeTime = try measure(iterations) { _ = try codec.encode(info) }
    let decodeTime = try measure(iterations) { _ = try codec.decode(encoded) }
    return Row(codec: codec.name, data: label, encodeMicros: encodeTime, decodeMicros: decodeTime, size: encoded.count)
}

func format(_ value: Double) -> String { String(format: "%.1f", value) }

do {
    let jsonSafe = typicalUserInfo()
    let withDates = plistUserInfo()
    var rows: [Row] = []
    for codec in [ours, plist, json] { rows.append(try run(codec, on: jsonSafe, label: "typical (JSON-safe)")) }
    for codec in [ours, plist] { rows.append(try run(codec, on: withDates, label: "typical + Date + Data")) }

    print("userInfo encode/decode, median µs per operation over 7 rounds of \(iterations)\n")
    print("| data | codec | encode µs | decode µs | size B | encode vs plist | decode vs plist | size vs plist |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    var verdicts: [String] = []
    for row in rows {
        let baseline = rows.first { $0.data == row.data && $0.codec == plist.name }!
        let encodeRatio = baseline.encodeMicros / row.encodeMicros
        let decodeRatio = baseline.decodeMicros / row.decodeMicros
        let sizeRatio = Double(row.size) / Double(baseline.size)
        print("| \(row.data) | \(row.codec) | \(format(row.encodeMicros)) | \(format(row.decodeMicros)) | \(row.size) | \(format(encodeRatio))x faster | \(format(decodeRatio))x faster | \(String(format: "%.2f", sizeRatio))x |")
        if row.codec == ours.name {
            let ok = encodeRatio >= 10 && decodeRatio >= 10 && sizeRatio <= 2
            verdicts.append("\(row.data): target (≥10x faster each way, ≤2x the size) \(ok ? "met" : "NOT met")")
        }
    }
    print("")
    for verdict in verdicts { print(verdict) }
} catch {
    print("benchmark failed: \(error)")
    exit(1)
}
