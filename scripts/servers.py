"""What the benchmark scripts need of the servers they start: both servers side by side
(`Servers`), a free port for Triton's frontend (trident picks its own, see listening.py), waiting
for `/ping` 200, and trident's serving process behind its supervisor."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from listening import listening_port

RUNTIME = Path(__file__).resolve().parent.parent / "triton-runtime"


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
    supervisor's one child, see docs/serving.md, "Process model"), or `pid` itself when it serves
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


class Servers:
    """Triton's frontend and trident, both serving `model` from `repository` (or, with
    `models_root`, both as multi-model endpoints starting empty), their logs quiet. `trident` is
    the binary to run, `trident_env` variables for trident's processes alone; `what` names the
    calling script in errors. `trident_repository` and `trident_model`, when given, are what
    trident serves instead (a comparison of a Triton ensemble with trident's plugins), and
    `inference_type` trident's `SAGEMAKER_TRITON_INFERENCE_TYPE`."""

    def __init__(self, repository, model, trident, trident_env, what, plugins=None, models_root=None,
                 trident_repository=None, trident_model=None, triton_http=False, inference_type=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SAGEMAKER_") and k != "RUST_BACKTRACE"}
        if model:
            env["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = model
        # Triton's frontend cannot say which port it took, so it gets a probed one; trident
        # picks its own (scripts/listening.py says why).
        self.triton_port = free_port()
        # With `triton_http`, Triton's HTTP frontend too (its generate_stream, which the SageMaker
        # frontend of Triton 2.51 does not offer), on `triton_http_port`.
        self.triton_http_port = free_port() if triton_http else None
        http = ["--allow-http=true", f"--http-port={self.triton_http_port}"] if triton_http else ["--allow-http=false"]
        quiet = ["--log-verbose=0", "--log-info=false", "--log-warning=false"]
        self.triton = subprocess.Popen(
            [str(RUNTIME / "bin/tritonserver"), f"--model-repository={repository}",
             f"--backend-directory={RUNTIME / 'backends'}", "--model-control-mode=explicit",
             *([f"--load-model={model}"] if model else []), "--allow-sagemaker=true",
             f"--sagemaker-port={self.triton_port}",
             *http, "--allow-grpc=false", "--allow-metrics=false",
             "--backend-config=python,shm-default-byte-size=16777216",
             "--backend-config=python,shm-growth-byte-size=1048576", *quiet],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if trident_model:
            env = dict(env, SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=trident_model)
        repository = trident_repository or repository
        environment = dict(env, SAGEMAKER_TRITON_LOG_VERBOSE="false", SAGEMAKER_TRITON_LOG_INFO="false",
                           SAGEMAKER_TRITON_LOG_WARNING="false", RUST_LOG="warn,trident::supervisor=info,trident::serve=info")
        environment.update(trident_env)
        if inference_type:
            environment["SAGEMAKER_TRITON_INFERENCE_TYPE"] = inference_type
        if plugins:
            environment["SAGEMAKER_TRITON_PLUGINS"] = str(plugins)
        mme = []
        if models_root:
            environment["SAGEMAKER_MULTI_MODEL"] = "true"
            mme = ["--multi-model-repository", str(repository), "--models-root", str(models_root)]
        self.log = Path(tempfile.mkstemp(prefix=f"{what}-trident-", suffix=".log")[1])
        with open(self.log, "wb") as log:
            self.trident = subprocess.Popen(
                [str(trident), "serve", "--model-repository", str(repository), *mme,
                 "--bind", "127.0.0.1", "--port", "0"],
                env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        try:
            self.trident_port = listening_port(self.log, self.trident, f"{what}: trident")
            wait_ready(self.triton_port, self.triton, f"{what}: tritonserver")
            wait_ready(self.trident_port, self.trident, f"{what}: trident")
        except SystemExit:
            # One server failed to start: the other must not outlive the script.
            self.stop()
            raise
        self.trident_pid = serving_pid(self.trident.pid)

    def stop(self):
        for proc in (self.trident, self.triton):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (self.trident, self.triton):
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.log.unlink(missing_ok=True)
