// Handoff's browser extension: the page in the focused window's active tab, if it is an
// http(s) page, is this device's current activity, through the native-messaging host
// `handoff-browser-host` (installed with `handoff browser install`). On video sites whose
// addresses carry a time, media-time.js says where the video is, and the host puts it in the
// address when the page is continued. It works in Chromium-based browsers and Firefox
// (Manifest V3).
"use strict";

const api = globalThis.browser ?? globalThis.chrome;
const HOST = "org.handoff.browser";
/// Longer URLs are not offered: they could not be sent to the host whole.
const MAXIMUM_URL = 32 * 1024;
let port = null;
let lastSent = null;
let focusedWindow = api.windows.WINDOW_ID_NONE;
let retry = 1000;

function connect() {
  if (port) return port;
  port = api.runtime.connectNative(HOST);
  port.onMessage.addListener((answer) => {
    retry = 1000;
    // The page was continued on another device: its media pauses here (media-time.js).
    if (answer.type === "pause") {
      const sent = api.tabs.sendMessage(answer.tab, { type: "pause" });
      if (sent && sent.catch) sent.catch(() => {});
      return;
    }
    if (!answer.ok) console.warn("Handoff:", answer.error);
  });
  port.onDisconnect.addListener((closed) => {
    const error = (closed && closed.error) || api.runtime.lastError;
    if (error) console.warn("Handoff: the native host is not available:", error.message, "(run 'handoff browser install')");
    port = null;
    lastSent = null;
    // Try again later, and offer the current page then.
    setTimeout(offerActive, retry);
    retry = Math.min(retry * 2, 60000);
  });
  return port;
}

function send(message) {
  const text = JSON.stringify(message);
  if (text === lastSent) return;
  lastSent = text;
  try {
    connect().postMessage(message);
  } catch (error) {
    console.warn("Handoff:", error);
    port = null;
    lastSent = null;
  }
}

function offer(tab) {
  if (!tab || !tab.url) return send({ type: "resign" });
  const url = tab.url;
  if (!(url.startsWith("http://") || url.startsWith("https://")) || url.length > MAXIMUM_URL) return send({ type: "resign" });
  send({ type: "page", tab: tab.id, url, title: (tab.title || "").slice(0, 256) });
}

async function offerActive() {
  if (focusedWindow === api.windows.WINDOW_ID_NONE) return send({ type: "resign" });
  const [tab] = await api.tabs.query({ active: true, windowId: focusedWindow });
  offer(tab);
}

api.tabs.onActivated.addListener((info) => {
  if (info.windowId === focusedWindow) offerActive();
});
api.tabs.onUpdated.addListener((tabId, change, tab) => {
  // Only the page the person is looking at: the active tab of the focused window.
  if (tab.active && tab.windowId === focusedWindow && (change.url || change.title || change.status === "complete")) offer(tab);
});
api.tabs.onRemoved.addListener((tabId) => send({ type: "closed", tab: tabId }));
// Where a video site's media is (media-time.js): for the page the person is looking at only.
api.runtime.onMessage.addListener((message, sender) => {
  const tab = sender && sender.tab;
  if (!message || message.type !== "time" || !tab || !tab.active || tab.windowId !== focusedWindow) return;
  if (!Number.isInteger(message.seconds) || message.seconds < 0) return;
  send({ type: "time", tab: tab.id, seconds: message.seconds });
});
api.windows.onFocusChanged.addListener((windowId) => {
  focusedWindow = windowId;
  offerActive();
});
api.windows.onRemoved.addListener((windowId) => {
  if (windowId === focusedWindow) focusedWindow = api.windows.WINDOW_ID_NONE;
  offerActive();
});
api.windows.getLastFocused().then((window) => {
  focusedWindow = window && window.focused !== false ? window.id : api.windows.WINDOW_ID_NONE;
  // A headless or freshly started browser may report no focus: take its only window.
  if (focusedWindow === api.windows.WINDOW_ID_NONE && window) focusedWindow = window.id;
  offerActive();
});
