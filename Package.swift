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
        .library(name: "HandoffLocalAPI", targets: ["HandoffLocalAPI"]),
        .library(name: "HandoffAgent", targets: ["HandoffAgent"]),
        .executable(name: "handoff-demo", targets: ["handoff-demo"]),
        .executable(name: "handoffd", targets: ["handoffd"]),
        .executable(name: "handoff", targets: ["handoff"]),
        .executable(name: "handoff-cli", targets: ["handoff-cli"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .target(name: "HandoffFraming", swiftSettings: strict),
        .target(name: "HandoffModel", swiftSettings: strict),
        .target(name: "HandoffCore", swiftSettings: strict),
        // The local socket's blocking client, errors and JSON primitives, without Foundation: what
        // the `handoff` front links.
        .target(name: "HandoffLocalSocket", dependencies: ["HandoffFraming"], swiftSettings: strict),
        // Handoff's version, written once (Sources/CHandoffVersion/CHandoffVersion.c).
        .target(name: "CHandoffVersion"),
        .target(name: "HandoffLocalAPI", dependencies: ["CHandoffSystem", "HandoffFraming", "HandoffLocalSocket", "HandoffModel"], swiftSettings: strict),
        .target(
            name: "Handoff",
            dependencies: ["HandoffCore", "HandoffLocalAPI", "HandoffModel", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(name: "HandoffApp", dependencies: ["Handoff", "HandoffCore"], swiftSettings: strict),
        .target(name: "HandoffDesktop", dependencies: ["HandoffModel", "HandoffCore"], swiftSettings: strict),
        .target(name: "HandoffWire", dependencies: ["HandoffFraming", "HandoffModel", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        // Signing apps and checking their signatures: reads the app's files, so not in HandoffWire.
        .target(name: "HandoffSigning", dependencies: ["HandoffWire", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .target(
            name: "HandoffAgent",
            dependencies: [
                "HandoffWire",
                "HandoffSigning",
                "HandoffLocalAPI",
                "HandoffCore",
                "HandoffDesktop",
                "CHandoffSystem",
                "HandoffProcess",
                "CHandoffVersion",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "HandoffTesting",
            dependencies: ["Handoff", "HandoffApp", "HandoffAgent", "HandoffLocalAPI", "HandoffModel", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(name: "MapViewerKit", dependencies: ["Handoff", "HandoffApp"], path: "Examples/MapViewerKit", swiftSettings: strict),
        // Each program's code is a library, so that one executable (handoff-programs, what the
        // Debian package ships) can hold them all; each program is also built alone.
        .target(
            name: "HandoffDaemon",
            dependencies: [
                "HandoffAgent",
                "HandoffCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "handoffd", dependencies: ["HandoffDaemon"], swiftSettings: strict),
        // What every form of `handoff` shares, without Foundation (the front links nothing heavier).
        .target(name: "HandoffCommandLine", dependencies: ["HandoffLocalSocket"], swiftSettings: strict),
        // `handoff` runs a plain `continue` itself and every other command through `handoff-cli`.
        .executableTarget(name: "handoff", dependencies: ["HandoffCommandLine"], swiftSettings: strict),
        .target(
            name: "HandoffCLI",
            dependencies: [
                "Handoff", "HandoffApp", "HandoffWire", "HandoffSigning", "HandoffLocalAPI", "HandoffDesktop", "HandoffCommandLine", "CHandoffVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "handoff-cli", dependencies: ["HandoffCLI"], swiftSettings: strict),
        .executableTarget(name: "MapViewer", dependencies: ["Handoff", "HandoffApp", "MapViewerKit"], path: "Examples/MapViewer", exclude: ["App"], swiftSettings: strict),
        .executableTarget(
            name: "MapViewerScenes", dependencies: ["Handoff", "HandoffApp", "MapViewerKit"], path: "Examples/MapViewerScenes", exclude: ["App"], swiftSettings: strict),
        .executableTarget(name: "Editor", dependencies: ["Handoff", "HandoffApp"], path: "Examples/Editor", exclude: ["App"], swiftSettings: strict),
        .executableTarget(name: "Shapes", dependencies: ["Handoff", "HandoffApp"], path: "Examples/Shapes", exclude: ["App"], swiftSettings: strict),
        .executableTarget(
            name: "MailCompose", dependencies: ["Handoff", "HandoffApp", .product(name: "Crypto", package: "swift-crypto")], path: "Examples/MailCompose",
            exclude: ["App"], swiftSettings: strict),
        .target(
            name: "HandoffFuzzing", dependencies: ["Handoff", "HandoffApp", "HandoffAgent", "HandoffLocalAPI", "HandoffWire", "HandoffSession", "HandoffDesktop", "HandoffTesting", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict),
        .target(name: "CFuzzerDriver"),
        .target(name: "CHandoffSystem"),
        // The X11 clipboard through libxcb, loaded at run time: nothing of X11 is needed to build.
        .target(name: "CHandoffX11"),
        // What a graphical session knows of its apps: desktop entries, the recently-used list.
        .target(name: "HandoffSession", swiftSettings: strict),
        // The Wayland clipboard through libwayland-client and data control, loaded at run time.
        .target(name: "CHandoffWayland"),
        .target(
            name: "HandoffSessionService",
            dependencies: ["CHandoffX11", "CHandoffWayland", "HandoffLocalAPI", "HandoffSession", "HandoffCore", "HandoffModel", "HandoffDesktop", "HandoffProcess"],
            swiftSettings: strict),
        .executableTarget(name: "handoff-session", dependencies: ["HandoffSessionService"], swiftSettings: strict),
        .target(name: "HandoffProcess", dependencies: ["CHandoffSystem"], swiftSettings: strict),
        .executableTarget(
            name: "handoff-fuzz",
            dependencies: ["HandoffFuzzing", "CFuzzerDriver", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict),
        .executableTarget(name: "handoff-state-torture", dependencies: ["HandoffAgent"], swiftSettings: strict),
        .executableTarget(name: "handoff-stream-app", dependencies: ["Handoff", "HandoffApp"], swiftSettings: strict),
        .target(
            name: "HandoffBrowserHost",
            dependencies: ["Handoff", "HandoffLocalAPI", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .executableTarget(name: "handoff-browser-host", dependencies: ["HandoffBrowserHost"], swiftSettings: strict),
        .executableTarget(
            name: "handoff-programs", dependencies: ["HandoffDaemon", "HandoffCLI", "HandoffSessionService", "HandoffBrowserHost"], swiftSettings: strict),
        .executableTarget(name: "handoff-demo", dependencies: ["HandoffProcess", "handoffd", "handoff", "handoff-cli", "MapViewer"], swiftSettings: strict),
        .target(name: "BenchmarkReport", path: "Benchmarks/BenchmarkReport", swiftSettings: strict),
        .executableTarget(
            name: "UserInfoBenchmark",
            dependencies: ["BenchmarkReport", "Handoff"],
            path: "Benchmarks/UserInfoBenchmark",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "AgentBenchmark",
            dependencies: [
                "BenchmarkReport", "Handoff", "HandoffApp", "HandoffAgent", "HandoffProcess", "HandoffLocalAPI", "HandoffWire", "HandoffFuzzing", "HandoffDesktop", "handoffd",
                "handoff-session",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"), .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Benchmarks/AgentBenchmark",
            swiftSettings: strict
        ),
        .testTarget(
            name: "HandoffTests", dependencies: ["Handoff", "HandoffCommandLine", "HandoffCore", "HandoffLocalAPI", "HandoffModel", "HandoffTesting"],
            swiftSettings: strict),
        .testTarget(name: "HandoffWireTests", dependencies: ["HandoffWire", "HandoffModel", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .testTarget(
            name: "HandoffAgentTests",
            dependencies: [
                "HandoffAgent", "BenchmarkReport", "HandoffDesktop", "HandoffLocalAPI", "HandoffModel", "HandoffProcess", "HandoffSigning", "Handoff", "HandoffApp", "HandoffTesting", "MapViewerKit", "handoff-state-torture", "handoff-stream-app", "handoff-browser-host", "MapViewer", "MapViewerScenes", "Editor", "MailCompose", "Shapes", "handoffd", "handoff", "handoff-cli", "handoff-programs", "HandoffCLI", "HandoffDaemon", "HandoffCommandLine", "handoff-session", "CHandoffX11", "HandoffSession",
                .product(name: "Logging", package: "swift-log"), .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"), .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            exclude: ["local_api_client.py", "impostor.py", "tls_resume.py", "tls_probe.py", "link_proof.py", "early_data.sh", "process_watcher.py", "local_flood.py"],
            swiftSettings: strict),
        .testTarget(
            name: "HandoffFuzzingTests", dependencies: ["HandoffFuzzing", "HandoffAgent", "HandoffWire", "handoff-fuzz"], swiftSettings: strict),
        .testTarget(name: "HandoffAppTests", dependencies: ["HandoffApp", "HandoffCore", "HandoffTesting"], swiftSettings: strict),
        .testTarget(name: "HandoffTestingTests", dependencies: ["HandoffTesting", "MapViewerKit"], swiftSettings: strict),
    ]
)
