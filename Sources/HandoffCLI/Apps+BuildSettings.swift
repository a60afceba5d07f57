import ArgumentParser
import Foundation
import HandoffApp

/// `--setting NAME=VALUE` and `--xcconfig FILE`: the Xcode build settings an app's Info.plist
/// and entitlements use, as `handoff apps sign` and `install` take them.
struct BuildSettingOptions: ParsableArguments {
    @Option(
        name: .customLong("xcconfig"),
        help: ArgumentHelp("An .xcconfig file of build settings, as the Xcode project uses it (repeatable; later files win).", valueName: "FILE"))
    var xcconfigs: [String] = []

    @Option(
        name: .customLong("setting"),
        help: ArgumentHelp(
            "A build setting the Info.plist or entitlements use, such as PRODUCT_BUNDLE_IDENTIFIER=com.example.editor or DEVELOPMENT_TEAM=ABCDE12345 (repeatable; over --xcconfig).",
            valueName: "NAME=VALUE"))
    var settings: [String] = []

    var isEmpty: Bool { xcconfigs.isEmpty && settings.isEmpty }

    /// The settings given: the files in order, then each `--setting`; a bad one ends the command.
    func resolved() -> BuildSettings {
        var resolved = BuildSettings()
        do throws(BuildSettingsError) {
            for file in xcconfigs {
                guard FileManager.default.fileExists(atPath: file) else {
                    throw BuildSettingsError(source: file, problem: "no such file (given with --xcconfig)")
                }
                try resolved.read(xcconfig: URL(fileURLWithPath: file))
            }
            for setting in settings { try resolved.assign(setting) }
        } catch {
            failWith("\(error)", code: 2)
        }
        return resolved
    }
}

/// Prints a manifest's warnings: keys it ignored.
func printWarnings(_ manifest: AppManifest) {
    for warning in manifest.warnings {
        FileHandle.standardError.write(Data("warning: \(warning)\n".utf8))
    }
}
