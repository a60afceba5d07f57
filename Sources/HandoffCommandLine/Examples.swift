/// A command's discussion followed by its examples, each a command line and what it does: what
/// `--help` prints under the overview and what the command's manual page (generated from the
/// same text by swift-argument-parser's generate-manual) shows in its description.
public func withExamples(_ discussion: String, _ examples: [(command: String, does: String)]) -> String {
    let list = examples.map { "  $ \($0.command)\n      \($0.does)" }.joined(separator: "\n")
    return (discussion.isEmpty ? "" : discussion + "\n\n") + "Examples:\n" + list
}

/// A command's examples alone, as its discussion.
public func withExamples(_ examples: [(command: String, does: String)]) -> String {
    withExamples("", examples)
}
