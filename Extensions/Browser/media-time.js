// Handoff's browser extension, on the video sites whose addresses carry a time: it tells the
// extension where the page's video or audio is, so that a continuation of the page opens it at
// that moment (the native host writes the time into the address when the page is fetched).
// It reports when playback starts, pauses or is moved, and at most every 5 s while it plays:
// messages inside this browser only, nothing on the network. When the page is continued on
// another device, its media pauses here.
"use strict";

(() => {
  const api = globalThis.browser ?? globalThis.chrome;
  let lastSeconds = -1;
  let lastAt = 0;

  /// The page's main media: the one playing, else one that has been played or moved.
  function mainMedia() {
    const all = Array.from(document.querySelectorAll("video, audio"));
    return all.find((media) => !media.paused) ?? all.find((media) => media.currentTime > 0) ?? null;
  }

  function report(always) {
    const media = mainMedia();
    if (!media || !Number.isFinite(media.currentTime)) return;
    const seconds = Math.floor(media.currentTime);
    const now = Date.now();
    // Within 5 s of the last report, only a change that matters (a pause, a seek) is told.
    if (now - lastAt < 5000 && (seconds === lastSeconds || !always)) return;
    lastSeconds = seconds;
    lastAt = now;
    try {
      const sent = api.runtime.sendMessage({ type: "time", seconds });
      if (sent && sent.catch) sent.catch(() => {});
    } catch (error) {
      // The extension was reloaded: this page's script is left over, and stops.
    }
  }

  // The page was continued on another device: its media pauses, as a player's does.
  api.runtime.onMessage.addListener((message) => {
    if (message && message.type === "pause") mainMedia()?.pause();
  });

  // Media events do not bubble: they are caught on the way down.
  document.addEventListener("timeupdate", () => report(false), true);
  for (const name of ["play", "pause", "seeked"]) document.addEventListener(name, () => report(true), true);
})();
