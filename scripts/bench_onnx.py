"""The ONNX table of scripts/bench (`--only onnx`): an FP32 tensor in, the network's output out,
with dynamic batching on, on three networks: ResNet-50 (compute-bound: about 4 GFLOP an image;
tests/clients/onnx_models.py writes it with seeded weights), PP-OCRv4's text recognizer on one
48x320 crop (20 ms of compute here: still compute-bound), and PP-OCR's text direction
classifier on one 48x192 crop (0.6 MB, about 1 ms: where the serving path shows).

- Triton's SageMaker frontend: what a user of Triton's PyPI build must do on CPU, where it has no
  onnxruntime backend: a python-backend model running ONNX Runtime's Python package on the same
  `model.onnx`, joining the requests the dynamic batcher hands it into one run and splitting the
  answer, one instance per core with one ONNX Runtime thread each.
- trident: the `model.onnx` on its onnxruntime backend (backend/src/onnxruntime/), one instance
  per core with `intra_op_thread_count: 1`.
- The floor: ONNX Runtime in one Python process, no HTTP, one session per core with one thread
  each, every session running batches of the size the servers' batcher can form at that
  concurrency (min(c / cores, 8), at least 1).

Both servers take the request in Triton's binary format and answer in it. CPU per request counts
every process of the server (Triton's python stubs included), measured in the steady state: the
CPU the server spends per second over the middle half of the run, over the requests it answers
per second. (A whole run's CPU over its answered requests counts the work on the requests still
queued when the load stops: at c=64 on ResNet-50, two seconds of queue, 10% too much.)
"""

import array
import json
import os
import random
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / "target/test-clients/python/bin/python"
RECOGNIZER = ROOT / "target/test-models/ch_PP-OCRv4_rec_infer.onnx"
CLASSIFIER = ROOT / "target/test-models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
# ONNX Runtime's Python package for Triton's python stubs (no dependencies: the stub's NumPy).
STUB_PACKAGES = ROOT / "target/bench-python"
ONNXRUNTIME = "onnxruntime==1.31.1 --hash=sha256:5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f"
MAX_BATCH = 8

NETWORKS = [
    # (name, input, one row's shape, output)
    ("resnet50", "input", [3, 224, 224], "logits"),
    ("ocr_rec", "x", [3, 48, 320], "softmax_11.tmp_0"),
    ("ocr_cls", "x", [3, 48, 192], "save_infer_model/scale_0.tmp_1"),
]
# Each network's output dims without the batch.
OUTPUT_DIMS = {"resnet50": "1000", "ocr_rec": "-1, 6625", "ocr_cls": "2"}

PYTHON_MODEL = '''
import os
import sys

sys.path.insert(0, @PACKAGES@)
import numpy as np
import onnxruntime
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        folder = os.path.join(args["model_repository"], args["model_version"])
        self.session = onnxruntime.InferenceSession(os.path.join(folder, "model.onnx"), options,
                                                    providers=["CPUExecutionProvider"])

    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, @INPUT@).as_numpy() for r in requests]
        joined = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        result = self.session.run([@OUTPUT@], {@INPUT@: joined})[0]
        responses, at = [], 0
        for array in arrays:
            rows = result[at:at + len(array)]
            at += len(array)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(@OUTPUT@, rows)]))
        return responses
'''

FLOOR = '''
import json, resource, sys, threading, time
import numpy as np
import onnxruntime

model, name, shape, batch, sessions, seconds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
options = onnxruntime.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
x = np.random.default_rng(1).uniform(-1, 1, [batch] + shape).astype(np.float32)
workers = [onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"]) for _ in range(sessions)]
for session in workers:
    session.run(None, {name: x})
counts = [0] * sessions
stop = time.monotonic() + seconds
def loop(i):
    while time.monotonic() < stop:
        workers[i].run(None, {name: x})
        counts[i] += batch
start = resource.getrusage(resource.RUSAGE_SELF)
began = time.monotonic()
threads = [threading.Thread(target=loop, args=(i,)) for i in range(sessions)]
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.monotonic() - began
end = resource.getrusage(resource.RUSAGE_SELF)
cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
done = sum(counts)
print(json.dumps({"rps": done / elapsed, "cpu_us": cpu * 1e6 / max(1, done), "batch": batch}))
'''


def prepare(tmp):
    """The networks' files, and ONNX Runtime for Triton's stubs."""
    resnet = tmp / "resnet50.onnx"
    subprocess.run([str(PYTHON), str(ROOT / "tests/clients/onnx_models.py"), f"resnet50:{resnet}"],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    if not (STUB_PACKAGES / "onnxruntime").is_dir():
        requirements = tmp / "onnxruntime.txt"
        requirements.write_text(ONNXRUNTIME + "\n")
        subprocess.run(["python3", "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes",
                        "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                        "--target", str(STUB_PACKAGES), "-r", str(requirements)], check=True)
    return {"resnet50": resnet, "ocr_rec": RECOGNIZER, "ocr_cls": CLASSIFIER}


def repositories(tmp, network, model_file, cores):
    """(Triton's repository: the python model; trident's: the model.onnx), both named `network`."""
    name, input_name, shape, output = network
    dims = ", ".join(str(d) for d in shape)
    triton, trident = tmp / f"repo-onnx-{name}-triton", tmp / f"repo-onnx-{name}-trident"
    for repository in (triton, trident):
        (repository / name / "1").mkdir(parents=True)
        shutil.copy(model_file, repository / name / "1/model.onnx")
    out_dims = OUTPUT_DIMS[name]
    tensors = (f'input [ {{ name: "{input_name}", data_type: TYPE_FP32, dims: [ {dims} ] }} ]\n'
               f'output [ {{ name: "{output}", data_type: TYPE_FP32, dims: [ {out_dims} ] }} ]\n'
               f'max_batch_size: {MAX_BATCH}\ndynamic_batching {{ }}\n'
               f'instance_group [ {{ kind: KIND_CPU, count: {cores} }} ]\n')
    code = (PYTHON_MODEL.replace("@PACKAGES@", repr(str(STUB_PACKAGES)))
            .replace("@INPUT@", repr(input_name)).replace("@OUTPUT@", repr(output)))
    (triton / name / "1/model.py").write_text(code)
    (triton / name / "config.pbtxt").write_text('backend: "python"\n' + tensors)
    (trident / name / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\n' + tensors +
        'parameters { key: "intra_op_thread_count" value: { string_value: "1" } }\n'
        'parameters { key: "inter_op_thread_count" value: { string_value: "1" } }\n')
    return triton, trident


def body(tmp, network):
    """One row of seeded values, in Triton's binary format, the output asked back in binary."""
    name, input_name, shape, output = network
    count = 1
    for d in shape:
        count *= d
    generator = random.Random(7)
    data = array.array("f", (generator.uniform(-1, 1) for _ in range(count))).tobytes()
    header = json.dumps({"inputs": [{"name": input_name, "datatype": "FP32", "shape": [1] + shape,
                                     "parameters": {"binary_data_size": len(data)}}],
                         "outputs": [{"name": output, "parameters": {"binary_data": True}}]}).encode()
    path = tmp / f"{name}.bin"
    path.write_bytes(header + data)
    return path, f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"


def answers_agree(ports, request, content_type):
    """Both servers' outputs for the request, which must agree to 1e-4."""
    answers = []
    for port in ports:
        call = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=request.read_bytes(),
                                      headers={"Content-Type": content_type})
        with urllib.request.urlopen(call, timeout=60) as response:
            size = int(response.headers["Content-Type"].split("json-header-size=")[1])
            answers.append(array.array("f", response.read()[size:]))
    agree = len(answers[0]) == len(answers[1]) and all(
        abs(a - b) <= 1e-4 * abs(b) + 1e-6 for a, b in zip(answers[0], answers[1]))
    if not agree:
        raise SystemExit(f"bench: the servers disagree on {request.name}")


def settle(pids, tree_cpu, timeout=60):
    """Waits until the servers are idle: under 2% of a core for a second."""
    deadline = time.monotonic() + timeout
    last = sum(tree_cpu(pid) for pid in pids)
    while time.monotonic() < deadline:
        time.sleep(1)
        now = sum(tree_cpu(pid) for pid in pids)
        if now - last < 0.02:
            return
        last = now


def steady(run, pid, duration, tree_cpu):
    """`run()` (a wrk run of `duration` seconds), with `cpu_us` from the middle half of it."""
    done = {}
    worker = threading.Thread(target=lambda: done.update(result=run()))
    worker.start()
    time.sleep(duration / 4)
    first, started = tree_cpu(pid), time.monotonic()
    time.sleep(duration / 2)
    spent, elapsed = tree_cpu(pid) - first, time.monotonic() - started
    worker.join()
    result = done["result"]
    result["cpu_us"] = spent / elapsed * 1e6 / max(result["rps"], 1e-9)
    return result


def floor(model_file, network, c, cores, duration):
    name, input_name, shape, _ = network
    batch = max(1, min(c // cores, MAX_BATCH))
    out = subprocess.run([str(PYTHON), "-c", FLOOR, str(model_file), input_name, json.dumps(shape), str(batch),
                          str(cores), str(duration)], check=True, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL).stdout
    return json.loads(out.strip().splitlines()[-1])


def onnx_rows(tmp, start_servers, wrk, script, concurrencies, duration, tree_cpu):
    """Per network and concurrency: (network, c, Triton result, trident result, floor result)."""
    cores = os.cpu_count() or 1
    files = prepare(tmp)
    rows = []
    for network in NETWORKS:
        name = network[0]
        triton_repo, trident_repo = repositories(tmp, network, files[name], cores)
        request, content_type = body(tmp, network)
        servers = start_servers(triton_repo, name, trident_repository=trident_repo, trident_model=name)
        try:
            answers_agree([servers.triton_port, servers.trident_port], request, content_type)
            sides = [("triton", servers.triton_port, servers.triton.pid),
                     ("trident", servers.trident_port, servers.trident_pid)]
            for i, c in enumerate(concurrencies):
                results = {}
                for who, port, pid in (sides if i % 2 == 0 else sides[::-1]):
                    wrk(port, "/invocations", "POST", request, content_type, c, 2, script)  # warm-up
                    results[who] = steady(lambda: wrk(port, "/invocations", "POST", request, content_type, c,
                                                      duration, script), pid, duration, tree_cpu)
                    # The queue a run leaves (at c=64 on ResNet-50, seconds of work) drains before
                    # the other server is measured.
                    settle([servers.triton.pid, servers.trident_pid], tree_cpu)
                rows.append([name, c, results["triton"], results["trident"]])
        finally:
            servers.stop()
        # The floor with neither server running.
        for row in rows:
            if row[0] == name:
                row.append(floor(files[name], network, row[1], cores, duration))
    return rows


def table(rows, fmt):
    lines = ["", "ONNX models, dynamic batching on (max batch 8), one instance per core with one ONNX Runtime "
             "thread each: Triton's frontend with a python-backend model running ONNX Runtime's Python package "
             "(Triton's PyPI build has no onnxruntime backend) against trident's onnxruntime backend, the same "
             "`model.onnx`; the floor is ONNX Runtime in one process, no HTTP, one session per core running "
             "batches of min(c / cores, 8). ResNet-50 (seeded weights), PP-OCRv4's recognizer on one 48x320 "
             "crop, PP-OCR's direction classifier on one 48x192 crop; latency in ms, CPU per request in µs "
             "(steady state) counting every process of the server:", "",
             "| network | conc. | Triton req/s | trident req/s | ratio | Triton p50 | trident p50 | Triton p99 | "
             "trident p99 | Triton CPU | trident CPU | ratio | floor req/s | floor CPU | trident/floor CPU | "
             "errors T/t |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c, t, d, fl in rows:
        lines.append(f"| {name} | {c} | {t['rps']:.1f} | {d['rps']:.1f} | {d['rps'] / t['rps']:.2f}× | "
                     f"{fmt(t['p50'])} | {fmt(d['p50'])} | {fmt(t['p99'])} | {fmt(d['p99'])} | {t['cpu_us']:.0f} | "
                     f"{d['cpu_us']:.0f} | {d['cpu_us'] / t['cpu_us']:.2f}× | {fl['rps']:.1f} | {fl['cpu_us']:.0f} | "
                     f"{d['cpu_us'] / fl['cpu_us']:.2f}× | {t['errors']}/{d['errors']} |")
    return lines
