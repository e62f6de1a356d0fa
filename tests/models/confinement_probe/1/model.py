"""Tries each attempt of ATTEMPTS and answers what each gave (tests/confinement.rs).

Actions: read, list, write (a file path), signal (SIGCONT), alive (signal 0) and ptrace
(attach, then detach) of a pid; "parent" as a target is the serving process. "own-file" and
"scratch" as targets are this model's own file and a file in its TMPDIR.
"""
import ctypes
import json
import os
import signal
import tempfile

import numpy as np
import triton_python_backend_utils as pb_utils

LIBC = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def target(value):
    if value == "parent":
        return os.getppid()
    if value == "own-file":
        return __file__
    if value == "scratch":
        return os.path.join(tempfile.gettempdir(), "scratch-file")
    return value


def attempt(action, value):
    value = target(value)
    try:
        if action == "read":
            with open(value, "rb") as f:
                f.read(1)
        elif action == "list":
            os.listdir(value)
        elif action == "write":
            with open(value, "wb") as f:
                f.write(b"planted")
        elif action == "signal":
            os.kill(int(value), signal.SIGCONT)
        elif action == "alive":
            os.kill(int(value), 0)
        elif action == "ptrace":
            if LIBC.ptrace(PTRACE_ATTACH, int(value), 0, 0) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            LIBC.ptrace(PTRACE_DETACH, int(value), 0, 0)
        else:
            return "unknown action"
        return "ok"
    except OSError as e:
        return type(e).__name__


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "ATTEMPTS").as_numpy().reshape(-1)[0]
            attempts = json.loads(raw)
            results = [attempt(action, value) for action, value in attempts]
            out = np.array([json.dumps(results).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("RESULTS", out)]))
        return responses
