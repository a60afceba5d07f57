// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

let package = Package(
    name: "Handoff",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Handoff", targets: ["Handoff"]),
        .library(name: "HandoffApp", targets: ["HandoffApp"]),
        .library(name: "HandoffTesting", targets: ["HandoffTesting"]),
        .library(name: "HandoffWire", targets: ["HandoffWire"]),
        .executable(name: "handoff-demo", targets: ["handoff-demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
    ],
    targets: [
        .target(
            name: "Handoff",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(name: "HandoffApp", dependencies: ["Handoff"], swiftSettings: strict),
        .target(name: "HandoffWire", dependencies: [.product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .target(
            name: "HandoffAgent",
            dependencies: [
                "HandoffWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(name: "HandoffTesting", dependencies: ["Handoff", "HandoffApp"], swiftSettings: strict),
        .target(name: "MapViewerKit", dependencies: ["Handoff", "HandoffApp"], path: "Examples/MapViewerKit", swiftSettings: strict),
        .executableTarget(name: "handoff-state-torture", dependencies: ["HandoffAgent"], swiftSettings: strict),
        .executableTarget(name: "handoff-demo", dependencies: ["HandoffTesting", "MapViewerKit"], swiftSettings: strict),
        .executableTarget(
            name: "UserInfoBenchmark",
            dependencies: ["Handoff"],
            path: "Benchmarks/UserInfoBenchmark",
            swiftSettings: strict
        ),
        .testTarget(name: "HandoffTests", dependencies: ["Handoff"], swiftSettings: strict),
        .testTarget(name: "HandoffWireTests", dependencies: ["HandoffWire"], swiftSettings: strict),
        .testTarget(name: "HandoffAgentTests", dependencies: ["HandoffAgent", "handoff-state-torture"], swiftSettings: strict),
        .testTarget(name: "HandoffAppTests", dependencies: ["HandoffApp", "HandoffTesting"], swiftSettings: strict),
        .testTarget(name: "HandoffTestingTests", dependencies: ["HandoffTesting", "MapViewerKit"], swiftSettings: strict),
    ]
)
