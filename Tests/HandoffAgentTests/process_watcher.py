"""A second local user watching the process list, as an attacker on a shared machine does.

It reads a secret from the first line of standard input (never from its own command line),
then reads every process's command line and environment, again and again, until its standard
input ends. It prints "ready" after its first full pass, "seen PID: COMMAND LINE" for each
process that shows the secret (dashes and case ignored, as an invitation code reads), and at
the end "passes N". Run it as a user other than the one whose processes it watches.
"""
import os
import sys
import threading

secret = sys.stdin.readline().strip().replace("-", "").upper()
done = threading.Event()


def wait_for_end():
    sys.stdin.read()
    done.set()


threading.Thread(target=wait_for_end, daemon=True).start()

me = str(os.getpid())
seen = set()
passes = 0
while True:
    last = done.is_set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if secret and secret in text.replace("-", "").upper() and pid not in seen:
                seen.add(pid)
                print(f"seen {pid}: {text.replace(chr(0), ' ').strip()}", flush=True)
    passes += 1
    if passes == 1:
        print("ready", flush=True)
    if last:
        break
print(f"passes {passes}", flush=True)
