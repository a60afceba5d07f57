import Foundation
import Handoff

/// A document-based app's document, as `UIDocument` and `NSDocument` are.
///
/// When the app's manifest gives the document's type an `NSUbiquitousDocumentUserActivityType`
/// and the file lies in a synced container, the open document gets its activity
/// automatically, with the file URL under `NSUserActivityDocumentURLKey`, and offers it to the
/// person's other devices. Closing the document invalidates the activity.
@MainActor
open class Document: Responder {
    /// The document's file.
    public let fileURL: URL
    /// The app the document belongs to.
    public let application: Application
    public private(set) var isOpen = false

    public required init(fileURL: URL) {
        self.fileURL = fileURL
        self.application = Application.shared
        super.init()
    }

    /// Opens the document: it joins the app's open documents and, when its type and place
    /// allow, gets and offers its activity.
    open func open() {
        guard !isOpen else { return }
        isOpen = true
        application.openDocuments.append(self)
        guard userActivity == nil, let type = application.documentActivityType(for: fileURL) else { return }
        let activity = application.perform { UserActivity(activityType: type) }
        activity.addUserInfoEntries(from: [NSUserActivityDocumentURLKey: fileURL])
        userActivity = activity
        activity.becomeCurrent()
    }

    /// Closes the document and lets go of its activity, which is then invalidated unless
    /// another responder still shares it.
    open func close() {
        guard isOpen else { return }
        isOpen = false
        application.openDocuments.removeAll { $0 === self }
        userActivity = nil
    }

    /// Puts the document's URL back into the activity; subclasses add their state and call super.
    open override func updateUserActivityState(_ activity: UserActivity) {
        activity.addUserInfoEntries(from: [NSUserActivityDocumentURLKey: fileURL])
    }
}
