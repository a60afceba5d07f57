import Foundation
import HandoffCore
import Testing

@Suite("A page's address with its video's time, as each site writes one")
struct PageTimeTests {
    func at(_ page: String, _ seconds: Int) -> String { PageTime.url(URL(string: page)!, at: seconds).absoluteString }

    @Test("YouTube, youtu.be, Twitch videos and Dailymotion take the time in the query, replacing one they had; Vimeo and a media file in the fragment")
    func sites() {
        #expect(at("https://www.youtube.com/watch?v=abc", 83) == "https://www.youtube.com/watch?v=abc&t=83s")
        #expect(at("https://www.youtube.com/watch?v=abc&t=10s&list=x", 83) == "https://www.youtube.com/watch?v=abc&list=x&t=83s")
        #expect(at("https://m.youtube.com/watch?v=abc", 5) == "https://m.youtube.com/watch?v=abc&t=5s")
        #expect(at("https://youtu.be/abc", 83) == "https://youtu.be/abc?t=83")
        #expect(at("https://www.twitch.tv/videos/123", 3723) == "https://www.twitch.tv/videos/123?t=1h2m3s")
        #expect(at("https://www.twitch.tv/videos/123", 63) == "https://www.twitch.tv/videos/123?t=1m3s")
        #expect(at("https://www.dailymotion.com/video/x7", 83) == "https://www.dailymotion.com/video/x7?start=83")
        #expect(at("https://vimeo.com/76979871", 83) == "https://vimeo.com/76979871#t=83s")
        #expect(at("https://media.example/talks/one.webm", 83) == "https://media.example/talks/one.webm#t=83")
        #expect(at("https://media.example/talks/one.webm#t=10", 83) == "https://media.example/talks/one.webm#t=83")
    }

    @Test("A page that takes no time (a channel, a live stream, an article) is left as it is; under a second, a time it had is taken away; a section fragment is kept")
    func leftAlone() {
        #expect(at("https://www.youtube.com/@channel", 83) == "https://www.youtube.com/@channel")
        #expect(at("https://www.twitch.tv/somebody", 83) == "https://www.twitch.tv/somebody")
        #expect(at("https://news.example/article", 83) == "https://news.example/article")
        #expect(at("https://www.youtube.com/watch?v=abc&t=40s", 0) == "https://www.youtube.com/watch?v=abc")
        #expect(at("https://vimeo.com/1#t=40s", 0) == "https://vimeo.com/1")
        #expect(at("https://media.example/one.mp4#chapter-2", 83) == "https://media.example/one.mp4#chapter-2")
    }
}
