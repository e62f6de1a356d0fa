"""What the benchmark scripts need of the servers they start: a free port for Triton's frontend
(trident picks its own, see listening.py), waiting for `/ping` 200, and trident's serving
process behind its supervisor."""

import os
import socket
import sys
import time
import urllib.request
from pathlib import Path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, what, timeout=180):
    """Returns once `proc` answers `/ping` with 200 on `port`; exits the script, naming `what`,
    when it ends first or is not ready within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited early ({proc.returncode})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    sys.exit(f"{what} not ready in {timeout} s")


def serving_pid(pid):
    """The process that serves for `trident serve` started as `pid`: its serving process (the
    supervisor's one child, see the README's Process model), or `pid` itself when it serves
    alone. CPU and memory are the serving process's; the supervisor only waits."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
                # The serving process runs the supervisor's own binary (through /proc/self/exe;
                # it names itself `trident-serve`, builds before that were named `exe`).
                if os.path.samefile(f"/proc/{child}/exe", f"/proc/{pid}/exe"):
                    return int(child)
    except OSError:
        pass
    return pid
