// Handoff's browser extension: the active tab's http(s) page is this device's current
// activity, through the native-messaging host `handoff-browser-host` (installed with
// `handoff browser install`). It works in Chromium-based browsers and Firefox (Manifest V3).
"use strict";

const api = globalThis.browser ?? globalThis.chrome;
const HOST = "org.handoff.browser";
let port = null;
let lastSent = null;

function connect() {
  if (port) return port;
  port = api.runtime.connectNative(HOST);
  port.onMessage.addListener((answer) => {
    if (!answer.ok) console.warn("Handoff:", answer.error);
  });
  port.onDisconnect.addListener(() => {
    const error = api.runtime.lastError;
    if (error) console.warn("Handoff: the native host is not available:", error.message, "(run 'handoff browser install')");
    port = null;
    lastSent = null;
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
  }
}

function offer(tab) {
  if (!tab || !tab.url) return send({ type: "resign" });
  const url = tab.url;
  if (!url.startsWith("http://") && !url.startsWith("https://")) return send({ type: "resign" });
  send({ type: "page", tab: tab.id, url, title: tab.title || "" });
}

async function offerActive() {
  const [tab] = await api.tabs.query({ active: true, lastFocusedWindow: true });
  offer(tab);
}

api.tabs.onActivated.addListener(() => offerActive());
api.tabs.onUpdated.addListener((tabId, change, tab) => {
  if (tab.active && (change.url || change.title || change.status === "complete")) offer(tab);
});
api.tabs.onRemoved.addListener((tabId) => send({ type: "closed", tab: tabId }));
api.windows.onFocusChanged.addListener((windowId) => {
  if (windowId === api.windows.WINDOW_ID_NONE) send({ type: "resign" });
  else offerActive();
});
api.windows.onRemoved.addListener(() => offerActive());
offerActive();
