#!/usr/bin/env python3
"""A client of handoffd's local API, written from docs/local-api.md alone.

It is two things:

* documentation by example: a small, reusable client (`LocalAPIClient`) that any
  Python 3.11 program can copy, using the standard library only, plus an encoder and
  decoder of Handoff's `userInfo` bytes (docs/userinfo-encoding.md);
* a test: `python3 local_api_client.py scenario ORIGIN_SOCKET CONTINUING_SOCKET`
  plays an app on one device and a script on another, continues the app's activity
  across, and checks every step. It prints one line per step and exits 0, or prints
  the first failed check to stderr and exits 1.

Usage as a library:

    with LocalAPIClient("/run/user/1000/handoff/agent.sock") as agent:
        hello = agent.hello(role="control")
        for entry in agent.call("nearby")["activities"]:
            print(entry["deviceName"], entry["activity"].get("title"))
"""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time
import uuid
from typing import Any, Callable

# --------------------------------------------------------------------------------------
# Framing: length (4 bytes, big-endian, unsigned) | kind (1 byte) | payload (length bytes)
# --------------------------------------------------------------------------------------

KIND_JSON = 0x4A                    # 'J': the payload is one JSON object in UTF-8
MAX_PAYLOAD = 1024 * 1024           # 1 MiB; the agent closes the connection beyond it
HEADER = struct.Struct(">IB")       # length (payload only), kind
API_VERSION = 2                     # the local API version hello and stream connections carry


def encode_frame(payload: bytes, kind: int = KIND_JSON) -> bytes:
    """One frame. `length` counts the payload only, not the 5 header bytes."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes is over the 1 MiB limit")
    return HEADER.pack(len(payload), kind) + payload


def encode_message(message: dict[str, Any]) -> bytes:
    """A JSON frame for one message."""
    return encode_frame(json.dumps(message, separators=(",", ":")).encode("utf-8"))


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    """`count` bytes, or None if the peer closed the connection first."""
    chunks, remaining = [], count
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    """(kind, payload) of the next frame, or None at the end of the stream."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    length, kind = HEADER.unpack(header)
    if length > MAX_PAYLOAD:
        raise ProtocolError(f"the agent sent a frame of {length} bytes, over the 1 MiB limit")
    payload = _read_exactly(sock, length) if length else b""
    if payload is None:
        raise ProtocolError("the connection closed in the middle of a frame")
    return kind, payload


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

class ProtocolError(Exception):
    """The connection broke, or the agent sent something this client cannot read."""


class AgentError(Exception):
    """An `ok: false` reply. `kind` is one of the documented kinds; an unknown kind is
    treated as `failed`, as the doc asks."""

    KINDS = {"badRequest", "notAllowed", "notFound", "account", "continuation", "failed"}

    def __init__(self, reply: dict[str, Any]):
        error = reply.get("error") or {}
        kind = error.get("kind")
        self.kind: str = kind if kind in self.KINDS else "failed"
        self.message: str = error.get("message", "")
        self.code: int | None = error.get("code")   # Foundation's code, for `continuation`
        self.reply = reply
        code = f" (code {self.code})" if self.code is not None else ""
        super().__init__(f"{self.kind}{code}: {self.message}")


# --------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------

class PendingReply:
    """The reply to one request, which may arrive later and in any order."""

    def __init__(self, number: int):
        self.number = number
        self._event = threading.Event()
        self._reply: dict[str, Any] | None = None
        self._failure: Exception | None = None

    def _resolve(self, reply: dict[str, Any] | None, failure: Exception | None = None) -> None:
        self._reply, self._failure = reply, failure
        self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = 10.0) -> dict[str, Any]:
        """The whole reply (ok or not). Raises TimeoutError or ProtocolError."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"no reply to request {self.number} within {timeout} s")
        if self._failure is not None:
            raise self._failure
        assert self._reply is not None
        return self._reply

    def result(self, timeout: float | None = 10.0) -> dict[str, Any]:
        """The reply if it is ok; an `AgentError` if it is not."""
        reply = self.wait(timeout)
        if reply.get("ok") is not True:
            raise AgentError(reply)
        return reply


class LocalAPIClient:
    """One connection to handoffd.

    A background thread reads every frame. Replies (`"type": "reply"`) are matched to
    their requests by number; everything else the agent sends on its own (`save`,
    `willContinue`, `deliver`, `fail`, `wasContinued`, `event`) is kept, in order, for
    `next_message`. Note that the agent's own requests (`save`) carry a `request` number
    from the agent's numbering, not ours: they are told apart from replies by `type`.
    """

    def __init__(self, path: str | None = None, connect_timeout: float = 5.0):
        self.path = path or default_socket_path()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(connect_timeout)
        try:
            self._sock.connect(self.path)
        except OSError as error:
            self._sock.close()
            raise ProtocolError(f"cannot connect to the agent at {self.path}: "
                                f"{error.strerror or error} (is handoffd running?)") from None
        self._sock.settimeout(None)               # the reader thread blocks
        self._send_lock = threading.Lock()
        self._numbers = itertools.count(1)         # our request numbers, each used once
        self._lock = threading.Condition()
        self._pending: dict[int, PendingReply] = {}
        self._messages: list[dict[str, Any]] = []  # unsolicited messages not yet taken
        self._closed: Exception | None = None
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"handoff-reader {self.path}")
        self._reader.start()

    # --- lifetime -----------------------------------------------------------------

    def close(self) -> None:
        """Closes the connection; the agent forgets this client's activities."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> "LocalAPIClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sending ------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        """Sends one message as it is (no reply is expected or awaited)."""
        self.send_raw(json.dumps(message, separators=(",", ":")).encode("utf-8"))

    def send_raw(self, payload: bytes, kind: int = KIND_JSON) -> None:
        """Sends one frame with any payload, even one that is not JSON (for tests)."""
        frame = encode_frame(payload, kind)
        try:
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError as error:
            # The agent closes the connection after some errors (a refused hello, a
            # message before the hello, an oversized frame): say so plainly.
            raise ProtocolError(f"cannot send to {self.path}: the connection is closed "
                                f"({error.strerror or error})") from None

    def expect_reply(self, number: int) -> PendingReply:
        """The reply that will come (or has come) under `number`. Use it for requests
        whose number you chose yourself, and for request 0, under which the agent
        answers a message whose number it could not read."""
        with self._lock:
            pending = self._pending.get(number)
            if pending is None:
                pending = self._pending[number] = PendingReply(number)
                if self._closed is not None:
                    pending._resolve(None, self._closed)
            return pending

    def request(self, type: str, **keys: Any) -> PendingReply:
        """Sends a request with a fresh number; returns at once. Keys whose value is
        None are left out, so optional keys can be passed as None."""
        number = next(self._numbers)
        message = {"type": type, "request": number}
        message.update({k: v for k, v in keys.items() if v is not None})
        pending = self.expect_reply(number)
        self.send(message)
        return pending

    def call(self, type: str, timeout: float | None = 10.0, **keys: Any) -> dict[str, Any]:
        """Sends a request and waits for its reply; raises AgentError if it is not ok."""
        return self.request(type, **keys).result(timeout)

    # --- the API, spelled out -------------------------------------------------------

    def hello(self, role: str = "control", bundle_identifier: str | None = None,
              version: int = API_VERSION, timeout: float = 10.0) -> dict[str, Any]:
        """The first message. Nothing else may be sent until its reply has arrived,
        which is why this waits."""
        return self.call("hello", timeout=timeout, version=version, role=role,
                         bundleIdentifier=bundle_identifier)

    def became_current(self, activity: dict[str, Any]) -> None:
        self.send({"type": "becameCurrent", "activity": activity})

    def resigned(self, activity_id: str) -> None:
        self.send({"type": "resigned", "activity": activity_id})

    def invalidated(self, activity_id: str) -> None:
        self.send({"type": "invalidated", "activity": activity_id})

    def watch(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The activities nearby now; afterwards the agent sends `event` messages on this
        connection until it closes: read them with next_message("event")."""
        return self.call("watch", timeout=timeout)["activities"]

    def saved(self, save_request: dict[str, Any], record: dict[str, Any]) -> None:
        """Answers the agent's `save` request with the activity's state."""
        self.send({"type": "saved", "request": save_request["request"], "record": record})

    def save_failed(self, save_request: dict[str, Any], message: str, code: int = 4608) -> None:
        self.send({"type": "saveFailed", "request": save_request["request"],
                   "error": {"kind": "continuation", "code": code, "message": message}})

    # --- receiving ----------------------------------------------------------------

    def next_message(self, match: str | Callable[[dict[str, Any]], bool] | None = None,
                     timeout: float | None = 10.0) -> dict[str, Any]:
        """The oldest unsolicited message that matches (a `type`, a predicate, or None
        for any). Messages that do not match stay queued for a later call."""
        if isinstance(match, str):
            wanted = match
            match = lambda message: message.get("type") == wanted  # noqa: E731
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                for index, message in enumerate(self._messages):
                    if match is None or match(message):
                        return self._messages.pop(index)
                if self._closed is not None:
                    raise self._closed
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no matching message within {timeout} s")
                self._lock.wait(remaining)

    def _read_loop(self) -> None:
        failure: Exception = ProtocolError(f"the agent closed the connection ({self.path})")
        try:
            while True:
                frame = read_frame(self._sock)
                if frame is None:
                    break
                kind, payload = frame
                if kind != KIND_JSON:
                    continue                      # reserved kinds: skip, as the doc says
                message = json.loads(payload.decode("utf-8"))
                if not isinstance(message, dict):
                    raise ProtocolError(f"the agent sent JSON that is not an object: {payload!r}")
                if message.get("type") == "prove":
                    # Between hello and its reply: this process proves it holds the connection.
                    self.send({"type": "proof", "nonce": message.get("nonce")})
                    continue
                if message.get("type") == "reply" and isinstance(message.get("request"), int):
                    self.expect_reply(message["request"])._resolve(message)
                else:
                    with self._lock:
                        self._messages.append(message)
                        self._lock.notify_all()
        except OSError as error:                   # includes our own close()
            failure = ProtocolError(f"the connection to {self.path} failed: {error}")
        except (ProtocolError, ValueError) as error:
            failure = ProtocolError(str(error))
        with self._lock:
            self._closed = failure
            for pending in self._pending.values():
                if not pending.done():
                    pending._resolve(None, failure)
            self._lock.notify_all()


def default_socket_path() -> str:
    """$HANDOFF_SOCKET, else $XDG_RUNTIME_DIR/handoff/agent.sock, else
    /tmp/handoff-UID/agent.sock."""
    if os.environ.get("HANDOFF_SOCKET"):
        return os.environ["HANDOFF_SOCKET"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "handoff", "agent.sock")
    return f"/tmp/handoff-{os.getuid()}/agent.sock"


# --------------------------------------------------------------------------------------
# userInfo: Handoff's encoding, version 1 (docs/userinfo-encoding.md)
# --------------------------------------------------------------------------------------
#
# Python values map to the model like this:
#   None -> null, bool -> bool, str -> string, bytes -> data, float -> double,
#   int -> Int (UInt64 above Int64's range), datetime -> date, uuid.UUID -> UUID,
#   URL(str) -> URL, Float32(float) -> float, TypedInt(value, width) -> any integer width,
#   list/tuple -> array, set/frozenset -> set, dict -> dictionary.

USERINFO_MAGIC, USERINFO_VERSION = 0x48, 1
REFERENCE_DATE = 978307200.0                # 2001-01-01 in seconds since 1970
INT_WIDTHS = ["Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64"]
INT_BITS = [64, 8, 16, 32, 64, 64, 8, 16, 32, 64]


class URL(str):
    """A string that is encoded as a URL (its absoluteString)."""


class Float32(float):
    """A float that is encoded as a 4-byte `Float`, not a `Double`."""


class TypedInt(tuple):
    """An integer of a given width: TypedInt(5, "UInt8")."""

    def __new__(cls, value: int, width: str = "Int"):
        return super().__new__(cls, (value, width))

    value = property(lambda self: self[0])
    width = property(lambda self: self[1])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_int(value: int, width: str, out: bytearray) -> None:
    index = INT_WIDTHS.index(width)
    bits, signed = INT_BITS[index], index < 5
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not low <= value <= high:
        raise ValueError(f"{value} does not fit in {width}")
    out.append(0x10 + index)
    if signed:                                   # zigzag: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...
        value = (value << 1) if value >= 0 else ((-value << 1) - 1)
    out += _varint(value)


def _encode_value(value: Any, out: bytearray, path: str) -> None:
    if value is None:
        out.append(0x00)
    elif isinstance(value, bool):
        out.append(0x02 if value else 0x01)
    elif isinstance(value, TypedInt):
        _encode_int(value.value, value.width, out)
    elif isinstance(value, int):
        _encode_int(value, "Int" if value < (1 << 63) else "UInt64", out)
    elif isinstance(value, Float32):
        out.append(0x06)
        out += struct.pack("<f", value)
    elif isinstance(value, float):
        out.append(0x05)
        out += struct.pack("<d", value)
    elif isinstance(value, URL):
        raw = value.encode("utf-8")
        out.append(0x08)
        out += _varint(len(raw)) + raw
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        out.append(0x03)
        out += _varint(len(raw)) + raw
    elif isinstance(value, (bytes, bytearray)):
        out.append(0x04)
        out += _varint(len(value)) + bytes(value)
    elif isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{path} is a datetime without a time zone")
        out.append(0x07)
        out += struct.pack("<d", value.timestamp() - REFERENCE_DATE)
    elif isinstance(value, uuid.UUID):
        out.append(0x09)
        out += value.bytes
    elif isinstance(value, (list, tuple)):
        out.append(0x0A)
        out += _varint(len(value))
        for index, element in enumerate(value):
            _encode_value(element, out, f"{path}[{index}]")
    elif isinstance(value, (set, frozenset)):
        out.append(0x0B)
        out += _varint(len(value))
        for element in value:
            _encode_value(element, out, f"{path}.member")
    elif isinstance(value, dict):
        out.append(0x0C)
        out += _varint(len(value))
        for key, element in value.items():
            _encode_value(key, out, f"{path}.key")
            _encode_value(element, out, f"{path}.{key}")
    else:
        raise ValueError(f"{path} holds a value of type {type(value).__name__}, "
                         "which a user activity cannot carry")


def encode_userinfo(value: dict[Any, Any]) -> bytes:
    """The bytes of a userInfo dictionary (to be base64'd into a RECORD)."""
    out = bytearray([USERINFO_MAGIC, USERINFO_VERSION])
    _encode_value(value, out, "userInfo")
    return bytes(out)


def decode_userinfo(data: bytes) -> Any:
    """The value of userInfo bytes; raises ValueError where they are malformed."""
    if len(data) < 2 or data[0] != USERINFO_MAGIC:
        raise ValueError("not Handoff's userInfo encoding (no 'H')")
    if data[1] != USERINFO_VERSION:
        raise ValueError(f"userInfo encoding version {data[1]}; this reader knows version 1")
    position = 2

    def take(count: int) -> bytes:
        nonlocal position
        if count > len(data) - position:
            raise ValueError(f"at byte {position}: {count} bytes declared, "
                             f"{len(data) - position} remain")
        chunk = data[position:position + count]
        position += count
        return chunk

    def varint() -> int:
        result = 0
        for shift in range(0, 70, 7):
            byte = take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
        raise ValueError(f"at byte {position}: a varint longer than 10 bytes")

    def value(depth: int) -> Any:
        if depth > 512:
            raise ValueError(f"at byte {position}: nested deeper than 512")
        tag = take(1)[0]
        if tag == 0x00:
            return None
        if tag in (0x01, 0x02):
            return tag == 0x02
        if tag in (0x03, 0x08):
            text = take(varint()).decode("utf-8")        # raises on invalid UTF-8
            return URL(text) if tag == 0x08 else text
        if tag == 0x04:
            return take(varint())
        if tag == 0x05:
            return struct.unpack("<d", take(8))[0]
        if tag == 0x06:
            return Float32(struct.unpack("<f", take(4))[0])
        if tag == 0x07:
            seconds = struct.unpack("<d", take(8))[0] + REFERENCE_DATE
            return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
        if tag == 0x09:
            return uuid.UUID(bytes=take(16))
        if tag in (0x0A, 0x0B):
            count = varint()
            if count > len(data) - position:          # each element takes a byte at least
                raise ValueError(f"at byte {position}: {count} elements cannot fit")
            elements = [hashable(value(depth + 1)) if tag == 0x0B else value(depth + 1)
                        for _ in range(count)]
            if tag == 0x0A:
                return elements
            members = set(elements)
            if len(members) != count:
                raise ValueError(f"at byte {position}: duplicate set members")
            return members
        if tag == 0x0C:
            count = varint()
            if count * 2 > len(data) - position:
                raise ValueError(f"at byte {position}: {count} pairs cannot fit")
            result: dict[Any, Any] = {}
            for _ in range(count):
                key = hashable(value(depth + 1))
                if key in result:
                    raise ValueError(f"at byte {position}: duplicate key {key!r}")
                result[key] = value(depth + 1)
            return result
        if 0x10 <= tag <= 0x19:
            index = tag - 0x10
            raw = varint()
            number = (raw >> 1) ^ -(raw & 1) if index < 5 else raw
            return number if index == 0 else TypedInt(number, INT_WIDTHS[index])
        raise ValueError(f"at byte {position - 1}: unknown tag 0x{tag:02X}")

    result = value(0)
    if position != len(data):
        raise ValueError(f"{len(data) - position} trailing bytes after the value")
    return result


def hashable(value: Any) -> Any:
    """The hashable form of a decoded key or set member (arrays -> tuples,
    dictionaries -> sorted tuples of pairs, sets -> frozensets)."""
    if isinstance(value, list):
        return tuple(hashable(element) for element in value)
    if isinstance(value, dict):
        return tuple(sorted(((hashable(k), hashable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, set):
        return frozenset(value)
    return value


# --------------------------------------------------------------------------------------
# The scenario: an app on ORIGIN offers an activity; a script on CONTINUING continues it
# --------------------------------------------------------------------------------------

ACTIVITY_TYPE = "com.example.handoff.MapViewer.map-viewing"
BUNDLE = "com.example.handoff.MapViewer"
TEAM = "EXAMPLETEAM"
# The map region, in the keys the MapViewer example itself saves (seen on the wire: its
# `saved` record, decoded with decode_userinfo). With other keys, such as plain "latitude",
# MapViewer continues without error but silently ignores the userInfo.
MAP_STATE = {"region.center.latitude": 37.7887, "region.center.longitude": -122.4075,
             "region.span.latitude": 0.02, "region.span.longitude": 0.02}


class CheckFailed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def same_id(a: Any, b: str) -> bool:
    """Identifiers are UUID strings in any case."""
    return isinstance(a, str) and a.lower() == b.lower()


def run_scenario(origin_path: str, continuing_path: str) -> None:
    started = time.monotonic()

    def step(letter: str, text: str) -> None:
        print(f"[{time.monotonic() - started:6.3f}s] {letter}. {text}", flush=True)

    # a. The app connects to the origin device's agent.
    origin = LocalAPIClient(origin_path)
    hello = origin.hello(role="app")
    check(hello.get("ok") is True, f"hello to {origin_path} was not ok: {hello}")
    device_name = (hello.get("device") or {}).get("name")
    check(isinstance(device_name, str) and device_name != "",
          f"the hello reply has no device name: {hello}")
    step("a", f"connected to {origin_path} as an app on device {device_name!r} "
              f"(account {hello.get('account')!r})")

    # b. It becomes current with a new activity (no reply is sent for this).
    activity = {
        "id": str(uuid.uuid4()).upper(),
        "activityType": ACTIVITY_TYPE,
        "title": "From Python",
        "teamIdentifier": TEAM,
        "bundleIdentifier": BUNDLE,
    }
    origin.became_current(activity)
    step("b", f"becameCurrent {activity['id']} ({ACTIVITY_TYPE})")

    # c. A script on the continuing device waits until the activity is nearby.
    control = LocalAPIClient(continuing_path)
    control.hello(role="control")
    deadline = time.monotonic() + 10.0
    entry = None
    while entry is None:
        for candidate in control.call("nearby")["activities"]:
            if same_id((candidate.get("activity") or {}).get("id"), activity["id"]):
                entry = candidate
                break
        else:
            check(time.monotonic() < deadline,
                  f"activity {activity['id']} did not appear in `nearby` on "
                  f"{continuing_path} within 10 s")
            time.sleep(0.05)
    check(entry["activity"].get("title") == "From Python",
          f"the nearby activity's title is {entry['activity'].get('title')!r}, "
          f"not 'From Python': {entry}")
    check(entry.get("handler") == BUNDLE,
          f"the nearby activity's handler is {entry.get('handler')!r}, not {BUNDLE!r} "
          f"(reason: {entry.get('reason')!r})")
    step("c", f"nearby on {continuing_path}: {entry['activity']['title']!r} from "
              f"{entry.get('deviceName')!r}, handler {entry['handler']}")

    # d. Continue it. The agent asks the origin app to save before it can answer, so
    #    send the request without waiting, then answer the `save` on the other connection.
    continuing = control.request("continue", activity=activity["id"])
    try:
        save = origin.next_message("save", timeout=10.0)
    except TimeoutError:
        raise CheckFailed("the origin app was not asked to save within 10 s") from None
    check(same_id(save.get("activity"), activity["id"]),
          f"the save request names another activity: {save}")
    record = {
        "activity": activity,
        "userInfo": base64.b64encode(encode_userinfo(MAP_STATE)).decode("ascii"),
    }
    origin.saved(save, record)
    step("d", f"sent continue; answered save request {save['request']} with a record "
              f"and userInfo {MAP_STATE}")

    # e. The reply to `continue` comes once the receiving app has the activity.
    reply = continuing.wait(timeout=15.0)
    check(reply.get("ok") is True, f"continue failed: {reply.get('error')}")
    continued = reply.get("continued") or {}
    check(continued.get("app") == BUNDLE,
          f"continued.app is {continued.get('app')!r}, not {BUNDLE!r}: {reply}")
    step("e", f"continued by {continued['app']} in {continued.get('seconds')} s "
              f"(continuation {continued.get('continuation')})")

    # f. The origin app hears that its activity was continued elsewhere.
    try:
        was = origin.next_message(
            lambda m: m.get("type") == "wasContinued" and same_id(m.get("activity"), activity["id"]),
            timeout=5.0)
    except TimeoutError:
        raise CheckFailed(f"no wasContinued for {activity['id']} on the origin within 5 s") from None
    step("f", f"origin received wasContinued for {was['activity']}")

    # g. A frame that is not JSON: a badRequest reply under request 0; the connection lives.
    bad = control.expect_reply(0)
    control.send_raw(b"{not json")
    try:
        answer = bad.wait(timeout=5.0)
    except TimeoutError:
        raise CheckFailed("no reply under request 0 to a frame that is not JSON") from None
    check(answer.get("ok") is False and (answer.get("error") or {}).get("kind") == "badRequest",
          f"a frame that is not JSON was answered with {answer}, not a badRequest")
    status = control.request("status").wait(timeout=5.0)
    check(status.get("ok") is True, f"status after the bad frame was not ok: {status}")
    step("g", f"not JSON -> badRequest under 0 ({answer['error'].get('message')!r}); "
              "status afterwards ok")

    # h. Well-formed JSON of an unknown type: the badRequest comes under its own number.
    unknown = control.expect_reply(99)
    control.send({"type": "frobnicate", "request": 99})
    try:
        answer = unknown.wait(timeout=5.0)
    except TimeoutError:
        raise CheckFailed("no reply under request 99 to an unknown type") from None
    check(answer.get("ok") is False and (answer.get("error") or {}).get("kind") == "badRequest",
          f"an unknown type was answered with {answer}, not a badRequest")
    step("h", f"unknown type -> badRequest under 99 ({answer['error'].get('message')!r})")

    control.close()
    origin.close()
    print(f"scenario passed in {time.monotonic() - started:.3f}s", flush=True)


# --------------------------------------------------------------------------------------
# Continuation streams: a connection of their own, stream frames after the first reply
# --------------------------------------------------------------------------------------

STREAM_DATA, STREAM_END, STREAM_STOP, STREAM_FAILED = 0x44, 0x45, 0x53, 0x58


class StreamConnection:
    """One pair of continuation streams: opened with `openStream` (the continuing app) or
    `acceptStream` (the originating app, answering a `streamRequest`)."""

    def __init__(self, path: str, first: dict[str, Any]):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._sock.sendall(encode_message({"request": 1, "version": API_VERSION, **first}))
        frame = read_frame(self._sock)
        if frame is None:
            raise ProtocolError("the agent closed the stream connection before answering")
        reply = json.loads(frame[1])
        if not reply.get("ok"):
            raise AgentError(reply)

    def write(self, data: bytes) -> None:
        for start in range(0, len(data), 256 * 1024):
            self._sock.sendall(encode_frame(data[start:start + 256 * 1024], STREAM_DATA))

    def finish(self) -> None:
        """Ends this side's output (E)."""
        self._sock.sendall(encode_frame(b"", STREAM_END))

    def stop_reading(self) -> None:
        """Ends this side's input (S)."""
        self._sock.sendall(encode_frame(b"", STREAM_STOP))

    def read_to_end(self) -> bytes:
        """What the other app writes, until it ends its output; raises if the stream fails."""
        received = bytearray()
        while True:
            frame = read_frame(self._sock)
            if frame is None:
                raise ProtocolError("the agent closed the stream connection before its end")
            kind, payload = frame
            if kind == STREAM_DATA:
                received += payload
            elif kind == STREAM_END:
                return bytes(received)
            elif kind == STREAM_FAILED:
                raise ProtocolError(f"the stream failed: {payload.decode('utf-8', 'replace')}")

    def close(self) -> None:
        self._sock.close()


STREAM_APP_TYPE = "com.example.streamapp.transfer"
STREAM_APP_BUNDLE = "com.example.streamapp"


def run_stream_scenario(origin_path: str, continuing_path: str, count: int) -> None:
    """The origin app offers an activity with streams; the stream app on the other device
    continues it and opens streams; this app takes them and sends `count` bytes."""
    origin = LocalAPIClient(origin_path)
    origin.hello(role="app")
    activity = {"id": str(uuid.uuid4()).upper(), "activityType": STREAM_APP_TYPE, "title": "Python streams",
                "teamIdentifier": "STREAMTEAM", "supportsContinuationStreams": True}
    origin.became_current(activity)
    control = LocalAPIClient(continuing_path)
    control.hello(role="control")
    deadline = time.monotonic() + 10.0
    while not any(same_id((e.get("activity") or {}).get("id"), activity["id"]) for e in control.call("nearby")["activities"]):
        check(time.monotonic() < deadline, "the activity did not appear nearby within 10 s")
        time.sleep(0.05)
    continuing = control.request("continue", activity=activity["id"])
    save = origin.next_message("save", timeout=10.0)
    origin.saved(save, {"activity": activity})
    reply = continuing.wait(timeout=15.0)
    check(reply.get("ok") is True, f"continue failed: {reply.get('error')}")
    print("continued; waiting for the stream request", flush=True)
    request = origin.next_message("streamRequest", timeout=10.0)
    check(same_id(request.get("activity"), activity["id"]), f"the stream request names another activity: {request}")
    streams = StreamConnection(origin_path, {"type": "acceptStream", "stream": request["stream"]})
    streams.write(bytes(range(256)) * (count // 256))
    streams.finish()
    # The stream app's receiver writes nothing: its output ends at once.
    check(streams.read_to_end() == b"", "the receiver wrote something")
    streams.stop_reading()
    streams.close()
    print(f"sent {count} bytes on the streams and ended them", flush=True)
    control.close()
    origin.close()


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[1] == "streams":
        try:
            run_stream_scenario(argv[2], argv[3], int(argv[4]))
        except (CheckFailed, AgentError, ProtocolError, TimeoutError, OSError) as error:
            print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
        return 0
    if len(argv) != 4 or argv[1] != "scenario":
        print(f"usage: {argv[0]} scenario ORIGIN_SOCKET CONTINUING_SOCKET | streams ORIGIN_SOCKET CONTINUING_SOCKET BYTES", file=sys.stderr)
        return 2
    try:
        run_scenario(argv[2], argv[3])
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    except (AgentError, ProtocolError, TimeoutError, OSError) as error:
        print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
