import Foundation

/// Apple's name for `UserActivity`, so code written for Apple platforms compiles unchanged.
public typealias NSUserActivity = UserActivity

/// Apple's name for `UserActivityDelegate`.
public typealias NSUserActivityDelegate = UserActivityDelegate
