#!/usr/bin/env python3
"""An attacker on the local socket, for the S8 tests: a process that connects to the agent
and then makes the installed app's executable run behind the connection's pid, while it keeps
the socket itself and talks through it as if it were that app.

    impostor.py SOCKET APP_EXECUTABLE BUNDLE_ID VERSION MODE

MODE:
  fork-exec     connect, fork; the parent execs the app's executable (the socket stays open
                in it), the child keeps the socket and speaks once the parent runs the app.
  hello-first   connect and send hello, then fork; the parent execs the app, the child keeps
                the socket and reads (and answers whatever the agent asks next).
  pass          fork a helper first; connect, hand the socket to the helper over SCM_RIGHTS,
                close it, exec the app: the helper speaks through the passed socket.
  namespace     run inside a user and pid namespace of its own (unshare -Urp), where it may
                name any pid of its namespace in SCM_CREDENTIALS: connect, fork; the parent
                execs the app, and the child sends hello and the proof naming the parent's pid.
  self          be the app: connect and speak as this process (run as the installed app's
                executable, a copy of python3, with or without LD_PRELOAD).

Every message the agent sends prints as one line, `MESSAGE <json>`, for the test to read;
`SPEAKER <pid>` says which process speaks. The process that talks exits after 60 s.
"""

import json
import os
import socket
import struct
import sys
import time


def frame(message: dict) -> bytes:
    payload = json.dumps(message).encode()
    return struct.pack(">IB", len(payload), 0x4A) + payload


def read_exact(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_message(sock: socket.socket) -> dict:
    length, _kind = struct.unpack(">IB", read_exact(sock, 5))
    return json.loads(read_exact(sock, length))


def wait_until_running(pid: int, executable: str) -> None:
    """Waits until process `pid` runs `executable` (its exec has happened)."""
    for _ in range(1000):
        try:
            if os.readlink(f"/proc/{pid}/exe") == executable:
                return
        except OSError:
            pass
        time.sleep(0.005)
    raise SystemExit(f"process {pid} never ran {executable}")


def speak(sock: socket.socket, bundle: str, version: int, send_hello: bool, claim_pid: int | None = None) -> None:
    print(f"SPEAKER {os.getpid()}", flush=True)
    if send_hello:
        sock.sendall(frame({"type": "hello", "request": 1, "version": version, "role": "app",
                            "bundleIdentifier": bundle}))
    sock.settimeout(60)
    try:
        while True:
            message = read_message(sock)
            print("MESSAGE " + json.dumps(message), flush=True)
            if message.get("type") == "prove":
                # What the real library answers; here written by the wrong process.
                proof = frame({"type": "proof", "nonce": message.get("nonce")})
                if claim_pid is None:
                    sock.sendall(proof)
                else:
                    credentials = struct.pack("iII", claim_pid, os.getuid(), os.getgid())
                    sock.sendmsg([proof], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, credentials)])
    except (EOFError, OSError):
        print("CLOSED", flush=True)


def main() -> None:
    path, executable, bundle, version, mode = sys.argv[1:6]
    version = int(version)
    # The app, when exec'd, must not reach the agent itself: only the impostor talks.
    env = dict(os.environ, HANDOFF_SOCKET="/nonexistent/handoff.sock")
    if mode == "pass":
        mine, theirs = socket.socketpair()
        helper = os.fork()
        if helper == 0:
            mine.close()
            _msg, fds, _flags, _addr = socket.recv_fds(theirs, 16, 1)
            sock = socket.socket(fileno=fds[0])
            wait_until_running(os.getppid(), executable)
            speak(sock, bundle, version, send_hello=True)
            os._exit(0)
        theirs.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        socket.send_fds(mine, [b"x"], [sock.fileno()])
        sock.close()
        os.execve(executable, [executable, "60"], env)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    if mode == "self":
        speak(sock, bundle, version, send_hello=True)
        return
    if mode == "namespace":
        parent = os.getpid()
        if os.fork() != 0:
            os.set_inheritable(sock.fileno(), True)
            os.execve(executable, [executable, "60"], env)
        wait_until_running(parent, executable)
        # Hello and proof both name the parent, which now runs the app.
        hello = frame({"type": "hello", "request": 1, "version": version, "role": "app", "bundleIdentifier": bundle})
        sock.sendmsg([hello], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("iII", parent, os.getuid(), os.getgid()))])
        speak(sock, bundle, version, send_hello=False, claim_pid=parent)
        os._exit(0)
    if mode == "hello-first":
        sock.sendall(frame({"type": "hello", "request": 1, "version": version, "role": "app",
                            "bundleIdentifier": bundle}))
    elif mode != "fork-exec":
        raise SystemExit(f"unknown mode {mode}")
    parent = os.getpid()
    if os.fork() != 0:
        os.set_inheritable(sock.fileno(), True)
        os.execve(executable, [executable, "60"], env)
    wait_until_running(parent, executable)
    speak(sock, bundle, version, send_hello=(mode == "fork-exec"))
    os._exit(0)


if __name__ == "__main__":
    main()
