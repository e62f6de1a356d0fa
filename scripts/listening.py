"""The port `trident serve --port 0` chose, read from its log.

Scripts start trident on port 0 and read the `listening address=…` line, instead of probing for a
free port and handing it over: a probed port can be taken by another process before trident binds
it. The log must include trident's `info` events of `trident::supervisor` and `trident::serve`
(e.g. `RUST_LOG=warn,trident::supervisor=info,trident::serve=info`)."""

import sys
import time


def listening_port(log, proc, what, timeout=120):
    """The port in the first `listening` line of the file `log`, written by the process `proc`;
    exits the script when `proc` ends first or nothing is logged within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if " listening " in line and "address=" in line:
                return int(line.split("address=")[1].split()[0].rsplit(":", 1)[1])
        if proc.poll() is not None:
            sys.exit(f"{what} exited ({proc.returncode}) before it listened; see {log}")
        time.sleep(0.1)
    sys.exit(f"{what} logged no listening line in {timeout} s; see {log}")
