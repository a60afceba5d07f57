import Foundation

/// One type of what a device offers to paste: its name (a MIME type such as
/// `text/plain;charset=utf-8`, or an X11 target such as `UTF8_STRING`) and its size in bytes.
public struct ClipboardType: Sendable, Hashable {
    public var name: String
    public var size: UInt64

    public init(name: String, size: UInt64) {
        self.name = name
        self.size = size
    }
}

/// What a device offers to paste, as its other devices learn it: the types and their sizes, a
/// generation, when it was copied and for how long it is offered. Never the content, which
/// travels only when a device pastes (`LinkMessage.clipboardOpen`). See docs/clipboard.md.
public struct ClipboardOffer: Sendable, Hashable {
    /// Grows with every copy on the device; a paste names the generation it pastes, and the
    /// offering device refuses a paste of any other.
    public var generation: UInt64
    /// When it was copied, on the copying device's clock, to the millisecond: the newest copy
    /// of the account wins.
    public var copiedAt: Date
    /// How long after `copiedAt` it is offered.
    public var lifetimeSeconds: UInt16
    /// In the order the copying app prefers them.
    public var types: [ClipboardType]

    /// The most types an offer carries.
    public static let maximumTypes = 16
    /// The longest type name, in bytes.
    public static let maximumTypeNameBytes = 100
    /// The largest size a type may declare (2^53 - 1: what JSON's numbers hold exactly).
    public static let maximumSize: UInt64 = (1 << 53) - 1

    public init(generation: UInt64, copiedAt: Date, lifetimeSeconds: UInt16, types: [ClipboardType]) {
        self.generation = generation
        // The wire keeps milliseconds; keep the value in step so that a round trip is equal.
        self.copiedAt = Date(timeIntervalSince1970: (copiedAt.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        self.lifetimeSeconds = lifetimeSeconds
        self.types = types
    }

    /// Whether `name` can be a type's name: 1 to `maximumTypeNameBytes` bytes of printable
    /// ASCII (spaces inside only, as in `text/plain; charset=utf-8`).
    public static func isValidTypeName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumTypeNameBytes, bytes.first != 0x20, bytes.last != 0x20 else { return false }
        return bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// Types the beacon names with one byte (code = index + 1); any other is spelled out.
    static let wellKnownTypes: [String] = [
        "text/plain;charset=utf-8", "text/plain", "UTF8_STRING", "STRING", "TEXT", "COMPOUND_TEXT", "text/html", "text/rtf",
        "image/png", "image/jpeg", "image/gif", "image/bmp", "image/webp", "image/tiff", "image/svg+xml", "text/uri-list",
        "x-special/gnome-copied-files", "application/x-kde-cutselection", "text/x-moz-url", "chromium/x-web-custom-data",
    ]
    private static let wellKnownCodes: [String: UInt8] = Dictionary(
        uniqueKeysWithValues: wellKnownTypes.enumerated().map { ($0.element, UInt8($0.offset + 1)) })

    // MARK: In a beacon

    /// The bytes of the section before its types: generation, time, lifetime, count.
    static let sectionHeaderSize = 8 + 8 + 2 + 1

    /// A type as the beacon carries it: its code (or 0 and its name) and its size (LEB128).
    static func encoded(_ type: ClipboardType) -> [UInt8] {
        var out: [UInt8] = []
        if let code = wellKnownCodes[type.name] {
            out.append(code)
        } else {
            out.append(0)
            out.append(UInt8(type.name.utf8.count))
            out.append(contentsOf: type.name.utf8)
        }
        var size = min(type.size, maximumSize)
        while size >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: size) | 0x80)
            size >>= 7
        }
        out.append(UInt8(size))
        return out
    }

    /// The section for a beacon, holding the types that fit in `room` bytes, in order (a type
    /// that does not fit is left out, and the ones after it are tried); nil when not even the
    /// header fits. Types whose names are not valid are never carried.
    static func section(_ offer: ClipboardOffer, room: Int) -> (bytes: [UInt8], carried: Int)? {
        guard room >= sectionHeaderSize else { return nil }
        var types: [[UInt8]] = []
        var names: Set<String> = []
        var used = sectionHeaderSize
        for type in offer.types where types.count < maximumTypes && isValidTypeName(type.name) && !names.contains(type.name) {
            let bytes = encoded(type)
            guard used + bytes.count <= room else { continue }
            names.insert(type.name)
            types.append(bytes)
            used += bytes.count
        }
        var out: [UInt8] = []
        out.reserveCapacity(used)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: offer.generation >> UInt64(shift))) }
        let milliseconds = UInt64(bitPattern: Int64((offer.copiedAt.timeIntervalSince1970 * 1000).rounded(.down)))
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: milliseconds >> UInt64(shift))) }
        out.append(UInt8(offer.lifetimeSeconds >> 8))
        out.append(UInt8(offer.lifetimeSeconds & 0xFF))
        out.append(UInt8(types.count))
        for type in types { out.append(contentsOf: type) }
        return (out, types.count)
    }

    /// Reads a section; nil for anything no sender writes (too many types, a name that is not
    /// valid, an unknown code, a size past `maximumSize`, the same type twice).
    static func read(_ reader: inout ByteReader) -> ClipboardOffer? {
        guard let generation = reader.uint64(), let milliseconds = reader.uint64(), let high = reader.byte(), let low = reader.byte(),
            let count = reader.byte(), Int(count) <= maximumTypes
        else { return nil }
        var types: [ClipboardType] = []
        var seen: Set<String> = []
        for _ in 0..<count {
            guard let code = reader.byte() else { return nil }
            let name: String
            if code == 0 {
                guard let spelled = reader.string(), isValidTypeName(spelled) else { return nil }
                name = spelled
            } else {
                guard Int(code) <= wellKnownTypes.count else { return nil }
                name = wellKnownTypes[Int(code) - 1]
            }
            guard let size = reader.leb128(), size <= maximumSize, seen.insert(name).inserted else { return nil }
            types.append(ClipboardType(name: name, size: size))
        }
        return ClipboardOffer(
            generation: generation, copiedAt: Date(timeIntervalSince1970: Double(Int64(bitPattern: milliseconds)) / 1000),
            lifetimeSeconds: UInt16(high) << 8 | UInt16(low), types: types)
    }
}
