import Foundation
import Testing

@testable import HandoffWire

private func parse(_ text: String) throws -> JSONValue { try StrictJSON.parse(Array(text.utf8)) }

private func jsonError(_ text: String) throws -> StrictJSONError {
    try #require(throws: StrictJSONError.self) { try parse(text) }
}

@Suite("Strict JSON, as Apple reads association files")
struct StrictJSONTests {
    @Test("What RFC 8259 allows is read: nesting, escapes, surrogate pairs, numbers, literals, white space")
    func reads() throws {
        let value = try parse(" {\"a\": [1, -2.5e3, 0, true, false, null], \"b\": \"\\u00e9\\ud83d\\ude00\\n\\/\"}\r\n")
        #expect(value["a"] == .array([.number(1), .number(-2500), .number(0), .bool(true), .bool(false), .null]))
        #expect(value["b"] == .string("é😀\n/"))
        // A repeated key: the last one counts, as JavaScript reads it.
        #expect(try parse(#"{"k":1,"k":2}"#)["k"] == .number(2))
    }

    @Test("A trailing comma is refused, with its line and column, though Linux's JSONSerialization takes it")
    func trailingComma() throws {
        let text = "{\n  \"activitycontinuation\": {\n    \"apps\": [\"ABCDE12345.com.example.app\",]\n  }\n}"
        #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8))) != nil, "Foundation here accepts it; the point of the strict reader")
        let error = try jsonError(text)
        #expect(error.line == 3)
        #expect(error.column == 42, "the comma's own column")
        #expect(error.description.hasPrefix("line 3, column 42: a trailing comma before ']'"))
        #expect(try jsonError(#"{"a":1,}"#).problem.contains("trailing comma before '}'"))
    }

    @Test("A byte-order mark is refused, saying so")
    func byteOrderMark() throws {
        let error = try #require(throws: StrictJSONError.self) { try StrictJSON.parse([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) }
        #expect(error.problem.contains("byte-order mark"))
    }

    @Test(
        "What JSON does not have is refused with where it is",
        arguments: [
            ("{'a':1}", "single quotes"), ("{\"a\":1} x", "text after"), ("// c\n{}", "comment"), ("{\"a\":01}", "leading zero"),
            ("{\"a\":1.}", "after its '.'"), ("{\"a\":\"\u{01}\"}", "control character"), ("{\"a\":\"\\x\"}", "not an escape"),
            ("{\"a\":\"\\ud800\"}", "lone surrogate"), ("{\"a\":tru}", "where a value should be"), ("{\"a\" 1}", "':' should follow"),
            ("[1 2]", "',' or ']'"), ("{\"a\":\"open", "ends inside a string"), ("", "ends where a value should be"), ("{\"a\":1e999}", "too large"),
        ])
    func refuses(text: String, problem: String) throws {
        let error = try jsonError(text)
        #expect(error.problem.contains(problem), "\(error)")
    }

    @Test("Bytes that are not UTF-8 inside a string are refused")
    func notUTF8() throws {
        let error = try #require(throws: StrictJSONError.self) { try StrictJSON.parse(Array("{\"a\":\"".utf8) + [0xFF] + Array("\"}".utf8)) }
        #expect(error.problem.contains("not UTF-8"))
    }

    @Test("Nesting deeper than 512 is refused, not a crash")
    func deep() throws {
        let text = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(try jsonError(text).problem.contains("nest more than 512"))
    }
}

/// A site's file with every section, both applinks shapes and iOS 13 components.
private let fullFile = """
    {
      "applinks": {
        "defaults": {"caseSensitive": true},
        "details": [
          {
            "appIDs": ["ABCDE12345.com.example.shop", "ABCDE12345.com.example.shop.beta"],
            "components": [
              {"/": "/checkout/*", "exclude": true, "comment": "never in the app"},
              {"/": "/products/*", "?": {"ref": "?*"}, "comment": "a product with a referrer"},
              {"/": "/help/*", "#": "faq-*", "caseSensitive": false},
              {"/": "/caf%C3%A9/*"},
              {"/": "/menu/café", "percentsEncoded": false},
              {"/": "/search", "?": "q=*"}
            ]
          },
          {"appID": "FGHIJ67890.com.example.legacy", "paths": ["NOT /legacy/private/*", "/legacy/*", "/old?"]}
        ]
      },
      "activitycontinuation": {"apps": ["ABCDE12345.com.example.shop"]},
      "webcredentials": {"apps": ["ABCDE12345.com.example.shop"]},
      "appclips": {"apps": ["ABCDE12345.com.example.shop.Clip"]}
    }
    """

@Suite("Association files as a public model, with Apple's matching")
struct SiteAssociationModelTests {
    let file: SiteAssociationFile

    init() throws {
        file = try SiteAssociationFile(json: Array(fullFile.utf8))
    }

    func opens(_ address: String) -> [String] {
        file.appLinkApps(for: URL(string: "https://shop.example.com" + address)!)
    }

    @Test("Every section is read: activitycontinuation, webcredentials, appclips and both shapes of applinks")
    func sections() {
        #expect(file.problems.isEmpty, "\(file.problems)")
        #expect(file.activityContinuation?.apps == ["ABCDE12345.com.example.shop"])
        #expect(file.webCredentials?.apps == ["ABCDE12345.com.example.shop"])
        #expect(file.appClips?.apps == ["ABCDE12345.com.example.shop.Clip"])
        #expect(file.appLinks?.details.count == 2)
        #expect(file.appLinks?.details.first?.components?.first?.exclude == true)
        #expect(file.appLinks?.details.first?.components?.first?.comment == "never in the app")
        #expect(file.appLinks?.details.last?.appIDs == ["FGHIJ67890.com.example.legacy"])
    }

    @Test("Components: the first that matches decides, and an excluding one keeps the address in the browser")
    func firstMatchDecides() {
        let shop = ["ABCDE12345.com.example.shop", "ABCDE12345.com.example.shop.beta"]
        #expect(opens("/checkout/cart").isEmpty)
        #expect(opens("/about").isEmpty)
        #expect(opens("/search?q=shoes") == shop)
        #expect(opens("/search?page=2").isEmpty)
    }

    @Test("A query given per item needs each named item, matching; others may be there too; '?*' is at least one character")
    func queryItems() {
        #expect(opens("/products/42?ref=mail&utm=x") == ["ABCDE12345.com.example.shop", "ABCDE12345.com.example.shop.beta"])
        #expect(opens("/products/42?ref=").isEmpty)
        #expect(opens("/products/42").isEmpty)
    }

    @Test("Fragments match '#', and caseSensitive false ignores case in every pattern of the component")
    func fragmentAndCase() {
        #expect(!opens("/HELP/a#FAQ-1").isEmpty)
        #expect(opens("/help/a#other").isEmpty)
        #expect(opens("/Search?q=x").isEmpty, "paths are case-sensitive by default")
    }

    @Test("percentsEncoded: true patterns compare with the address as sent, false ones with its decoded text")
    func percentEncoding() {
        #expect(!opens("/caf%C3%A9/menu").isEmpty)
        #expect(!opens("/menu/caf%C3%A9").isEmpty)
    }

    @Test("iOS 9 paths: NOT excludes, * and ? wildcards, the first match decides")
    func legacyPaths() {
        #expect(opens("/legacy/page") == ["FGHIJ67890.com.example.legacy"])
        #expect(opens("/legacy/private/key").isEmpty)
        #expect(opens("/old1") == ["FGHIJ67890.com.example.legacy"])
        #expect(opens("/old12").isEmpty)
    }

    @Test("A wildcard pattern of many stars against a long address finishes at once")
    func noBlowUp() {
        let pattern = String(repeating: "*a", count: 40) + "b"
        let text = String(repeating: "a", count: 5_000)
        #expect(!WildcardPattern.matches(pattern, text, caseSensitive: true))
        #expect(WildcardPattern.matches("/a/*/c", "/a/b/x/c", caseSensitive: true))
    }

    @Test("Malformed parts are left out and named: a component of the wrong type, a detail without app IDs, a flag that is not a boolean")
    func problems() throws {
        let text = #"{"applinks":{"details":[{"appIDs":["A1.b"],"components":[7,{"/":"/x","exclude":"yes"}]},{"paths":["*"]}]},"activitycontinuation":{"apps":["A1.b"]}}"#
        let read = try SiteAssociationFile(json: Array(text.utf8))
        #expect(read.activityContinuationApps == ["A1.b"])
        #expect(read.problems.contains { $0.contains("'applinks.details[0].components[0]' is a number") })
        #expect(read.problems.contains { $0.contains("'applinks.details[0].components[1].exclude' is a string") })
        #expect(read.problems.contains { $0.contains("'applinks.details[1]' names no well-formed application identifier") })
        for problem in read.problems {
            #expect(!problem.contains("JSONValue") && !problem.contains(".swift"), "\(problem)")
        }
    }

    @Test("A real-shaped file with a trailing comma is refused with its line, so it approves nothing, as on Apple platforms")
    func trailingCommaFile() {
        let text = fullFile.replacingOccurrences(of: #""appclips": {"apps": ["ABCDE12345.com.example.shop.Clip"]}"#, with: #""appclips": {"apps": ["ABCDE12345.com.example.shop.Clip"]},"#)
        #expect(throws: SiteAssociationError.self) { try SiteAssociationFile(json: Array(text.utf8)) }
        do {
            _ = try SiteAssociationFile(json: Array(text.utf8))
        } catch {
            #expect(error.message.contains("line 21, column 61"), "\(error)")
            #expect(error.message.contains("trailing comma"))
        }
    }
}

@Suite("Association files a hostile site cannot blow up")
struct SiteAssociationLimitTests {
    @Test("Thousands of malformed entries under a long key make at most 50 short problems and a count; control characters are escaped")
    func boundedProblems() throws {
        let key = String(repeating: "k", count: 60_000) + "\u{1B}[2J"
        let items = Array(repeating: "0", count: 14_000).joined(separator: ",")
        let text = #"{"applinks":{"details":{""# + key.replacingOccurrences(of: "\u{1B}", with: "\\u001b") + #"":{"appIDs":["# + items + #"]}}},"activitycontinuation":{"apps":["A1.b","\u001b[31mX"]}}"#
        #expect(text.utf8.count < SiteAssociationFile.maximumSize)
        let file = try SiteAssociationFile(json: Array(text.utf8))
        #expect(file.activityContinuationApps == ["A1.b"])
        #expect(file.problems.count == 51)
        #expect(file.problems.last?.hasPrefix("and ") == true)
        #expect(file.problems.allSatisfy { $0.count < 400 }, "\(file.problems.map(\.count).max() ?? 0)")
        #expect(!file.problems.joined().unicodeScalars.contains { $0.value == 0x1B })
    }
}
