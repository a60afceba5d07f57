import Foundation

/// The activity type of a web page being browsed. An app that declares it in
/// `NSUserActivityTypes` is a browser; a continuation of this type carries only a `webpageURL`.
public let NSUserActivityTypeBrowsingWeb = "NSUserActivityTypeBrowsingWeb"

/// The `userInfo` key under which a document's activity carries the document's file URL.
public let NSUserActivityDocumentURLKey = "NSUserActivityDocumentURL"

/// The payload size above which Handoff logs a warning: Apple advises 3 KB or less.
public let userInfoAdvisedSize = 3 * 1024

/// The default hard limit on an encoded payload; larger ones fail with error 4611.
public let userInfoDefaultLimit = 64 * 1024
