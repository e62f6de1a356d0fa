"""The image-classification table of scripts/bench (`--only image`): a JPEG in, the top five
labels out, on the same stand-in classifier (examples/image-classification), each server the way
its users build it, in five settings (VARIANTS): a 640x480 photo against Triton's python steps at
their default (one instance each) and tuned as informed users set them (one instance per core),
12 MP and 24 MP phone photos, and bicubic resizing (CLIP's, DeiT's), the last three against the
tuned anchor.

- Triton's SageMaker frontend: an ensemble, as Triton's own image examples are built: a
  python-backend `preprocess` model (Pillow and NumPy: decode, EXIF orientation, RGB, the shorter
  side to 256, the centre 224x224, ImageNet's normalization), the classifier, and a
  python-backend `postprocess` model (softmax, top five, labels); the client sends the JPEG as a
  BYTES tensor in Triton's binary format (its frontend takes nothing else) and gets the labels
  as a JSON string.
- trident: the classifier behind the image-tensor and top-k-labels plugins, the JPEG sent as
  `image/jpeg`, the labels answered as JSON.

CPU per request counts every process of the server: tritonserver and its python stubs, trident's
serving process. The floor is the same decode, resize and model call in one native process, with
no HTTP (`cargo bench --bench engine_floor -- --image`).
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples/image-classification"

PREPROCESS = '''
import io

import numpy as np
from PIL import Image, ImageOps
import triton_python_backend_utils as pb_utils

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def pixels(raw):
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(raw))).convert("RGB")
    width, height = image.size
    size = (256, int(256 * height / width)) if width <= height else (int(256 * width / height), 256)
    image = image.resize(size, Image.Resampling.@RESAMPLE@)
    left, top = int(round((size[0] - 224) / 2.0)), int(round((size[1] - 224) / 2.0))
    image = image.crop((left, top, left + 224, top + 224))
    array = (np.asarray(image, dtype=np.float32) / 255.0 - MEAN) / STD
    return array.transpose(2, 0, 1)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy().reshape(-1)
            batch = np.stack([pixels(bytes(raw)) for raw in images]).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("INPUT0", batch)]))
        return responses
'''

POSTPROCESS = '''
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(folder, "labels.txt")) as labels:
            self.labels = labels.read().splitlines()

    def execute(self, requests):
        responses = []
        for request in requests:
            scores = pb_utils.get_input_tensor_by_name(request, "OUTPUT0").as_numpy()
            answers = []
            for row in scores:
                exp = np.exp(row - row.max())
                probabilities = exp / exp.sum()
                best = np.argsort(-probabilities, kind="stable")[:5]
                answers.append(json.dumps([{"label": self.labels[k], "score": float(probabilities[k])}
                                           for k in best]))
            out = np.array(answers, dtype=object).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("LABELS", out)]))
        return responses
'''

ENSEMBLE = '''
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "LABELS", data_type: TYPE_STRING, dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "preprocess" model_version: -1
    input_map { key: "IMAGE" value: "IMAGE" } output_map { key: "INPUT0" value: "pixels" } },
  { model_name: "classifier" model_version: -1
    input_map { key: "INPUT0" value: "pixels" } output_map { key: "OUTPUT0" value: "scores" } },
  { model_name: "postprocess" model_version: -1
    input_map { key: "OUTPUT0" value: "scores" } output_map { key: "LABELS" value: "LABELS" } }
] }
'''


# (name, photo's width, height and JPEG quality, python instances of each of Triton's steps,
# resampling, concurrencies kept (None: all), whether the native floor is measured). The 24 MP
# photo is saved at quality 80 (4.8 MB): at 90 its noise makes 8.5 MB, past the 6 MB payload
# SageMaker takes (and trident by default, which answers 413).
VARIANTS = [
    ("640x480, Triton's python steps at their default (1 instance)", (640, 480, 90), 1, "bilinear", None, True),
    ("640x480, Triton tuned (1 python instance per core)", (640, 480, 90), os.cpu_count(), "bilinear", None, False),
    ("12 MP (4032x3024), Triton tuned", (4032, 3024, 90), os.cpu_count(), "bilinear", 2, False),
    ("24 MP (6000x4000, quality 80), Triton tuned", (6000, 4000, 80), os.cpu_count(), "bilinear", 2, False),
    ("640x480 bicubic, Triton tuned", (640, 480, 90), os.cpu_count(), "bicubic", None, False),
]


def python_model(folder, code, inputs, outputs, files=(), instances=1):
    (folder / "1").mkdir(parents=True)
    (folder / "1/model.py").write_text(code)
    for file in files:
        shutil.copy(file, folder / "1")
    (folder / "config.pbtxt").write_text(
        f'backend: "python"\nmax_batch_size: 8\ninput [ {inputs} ]\noutput [ {outputs} ]\n'
        f'instance_group [ {{ kind: KIND_CPU, count: {instances} }} ]\n')


def repositories(tmp, instances, resample):
    """(Triton's repository with the ensemble, trident's with the classifier alone)."""
    triton, trident = tmp / "repo-images-triton", tmp / "repo-images-trident"
    for repository in (triton, trident):
        shutil.copytree(EXAMPLE / "models", repository)
    python_model(triton / "preprocess", PREPROCESS.replace("@RESAMPLE@", resample.upper()),
                 '{ name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] }',
                 '{ name: "INPUT0", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] }', instances=instances)
    python_model(triton / "postprocess", POSTPROCESS, '{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 1000 ] }',
                 '{ name: "LABELS", data_type: TYPE_STRING, dims: [ 1 ] }', [EXAMPLE / "labels.txt"],
                 instances=instances)
    (triton / "image_classification/1").mkdir(parents=True)
    (triton / "image_classification/config.pbtxt").write_text(ENSEMBLE)
    return triton, trident


def manifest(tmp, wasm_folder, resample):
    """trident's plugins, as the example's serve script writes them (with `resample`)."""
    folder = tmp / "images-plugins"
    folder.mkdir()
    text = (EXAMPLE / "plugins.toml.in").read_text()
    if resample != "bilinear":
        text = text.replace('resize_shorter = "256"', f'resize_shorter = "256", resample = "{resample}"')
    for file, placeholder in [("image_tensor.wasm", "@IMAGE_TENSOR@"), ("top_k_labels.wasm", "@TOP_K_LABELS@"),
                              ("labels.txt", "@LABELS@")]:
        source = wasm_folder / file if file.endswith(".wasm") else EXAMPLE / file
        shutil.copy(source, folder / file)
        text = text.replace(placeholder, hashlib.sha256(source.read_bytes()).hexdigest())
    (folder / "plugins.toml").write_text(text)
    return folder / "plugins.toml"


def photo(tmp, size=(640, 480, 90)):
    """A JPEG of `size` (width, height, quality) with a photo's texture (gradients and noise), made
    with the system's Pillow."""
    path = tmp / "photo.jpg"
    subprocess.run(["/usr/bin/python3", "-c", """
import sys
import numpy as np
from PIL import Image
w, h = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
y, x = np.mgrid[0:h, 0:w]
rgb = np.stack([200 + 40 * x / w, 60 + 120 * y / h, 30 + 60 * (x * y) / (w * h)], axis=-1)
rgb += rng.normal(0, 12, rgb.shape)
Image.fromarray(rgb.clip(0, 255).astype(np.uint8)).save(sys.argv[1], quality=int(sys.argv[4]))
""", str(path), *map(str, size)], check=True)
    return path


def triton_body(tmp, jpeg):
    """The JPEG as Triton's frontend takes it: a BYTES tensor in its binary format."""
    data = jpeg.read_bytes()
    header = json.dumps({"inputs": [{"name": "IMAGE", "datatype": "BYTES", "shape": [1, 1],
                                     "parameters": {"binary_data_size": len(data) + 4}}],
                         "outputs": [{"name": "LABELS"}]}).encode()
    body = tmp / "photo.triton.bin"
    body.write_bytes(header + struct.pack("<I", len(data)) + data)
    return body, f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"


def tree_cpu(pid):
    """CPU seconds of `pid` and every process under it (Triton's python stubs)."""
    total, pending = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while pending:
        current = pending.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(stat[11]) + int(stat[12])) / tick
            for task in os.listdir(f"/proc/{current}/task"):
                pending += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return total


def answers_agree(triton_port, trident_port, triton_body_file, triton_type, jpeg):
    """Both servers' top label for the photo, which must be the same."""
    import urllib.request

    def post(port, body, content_type):
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": content_type})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    theirs = post(triton_port, triton_body_file.read_bytes(), triton_type)
    labels = next(o for o in theirs["outputs"] if o["name"] == "LABELS")["data"][0]
    ours = post(trident_port, jpeg.read_bytes(), "image/jpeg")
    theirs = json.loads(labels)
    if theirs[0]["label"] != ours[0]["label"]:
        raise SystemExit(f"bench: the servers disagree: Triton {theirs[0]}, trident {ours[0]}")
    return ours[0]["label"]


def image_rows(tmp, start_servers, wrk, script, concurrencies, duration, wasm_folder, floor):
    """Per variant and concurrency: (variant, c, Triton result, trident result, floor result or
    None), each with cpu_us counting every process of the server."""
    label, rows = None, []
    for name, size, instances, resample, most, measure_floor in VARIANTS:
        folder = tmp / f"images-{len(rows)}"
        folder.mkdir()
        label, variant = variant_rows(folder, start_servers, wrk, script, concurrencies[:most], duration,
                                      wasm_folder, floor if measure_floor else None, size, instances, resample)
        rows += [(name, *row) for row in variant]
    return label, rows


def variant_rows(tmp, start_servers, wrk, script, concurrencies, duration, wasm_folder, floor, size, instances,
                 resample):
    """One variant's rows: (c, Triton result, trident result, floor result or None)."""
    triton_repo, trident_repo = repositories(tmp, instances, resample)
    plugins = manifest(tmp, wasm_folder, resample)
    jpeg = photo(tmp, size)
    body, content_type = triton_body(tmp, jpeg)
    servers = start_servers(triton_repo, "image_classification", plugins=plugins,
                            trident_repository=trident_repo, trident_model="classifier")
    rows = []
    try:
        label = answers_agree(servers.triton_port, servers.trident_port, body, content_type, jpeg)
        sides = [("triton", servers.triton_port, servers.triton.pid, body, content_type),
                 ("trident", servers.trident_port, servers.trident_pid, jpeg, "image/jpeg")]
        for i, c in enumerate(concurrencies):
            results = {}
            order = sides if i % 2 == 0 else sides[::-1]
            for who, port, pid, request_body, request_type in order:
                wrk(port, "/invocations", "POST", request_body, request_type, c, 2, script)  # warm-up
                before = tree_cpu(pid)
                result = wrk(port, "/invocations", "POST", request_body, request_type, c, duration, script)
                spent = tree_cpu(pid) - before
                result["cpu_us"] = spent * 1e6 / max(1, result["rps"] * duration)
                results[who] = result
            rows.append((c, results["triton"], results["trident"],
                         floor(trident_repo, jpeg, c, duration) if floor else None))
    finally:
        servers.stop()
    return label, rows


def table(label, rows, fmt):
    lines = ["", "Images in, labels out: a JPEG through Triton's ensemble (python-backend Pillow/NumPy "
             "pre-processing, the classifier, a python top-5 step) against trident's image-tensor and "
             f"top-k-labels plugins on the same classifier (both answer `{label}` first); latency in ms, CPU "
             "per request in µs counting every process of the server (Triton's python stubs included); the "
             "floor is the same decode, resize and model call in one native process, no HTTP:", "",
             "| setting | conc. | Triton CPU | trident CPU | CPU ratio | Triton req/s | trident req/s | ratio | "
             "Triton p50 | trident p50 | Triton p99 | trident p99 | floor req/s | floor CPU | errors T/t |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c, t, d, floor in rows:
        floor_cells = f"{floor['rps']:.0f} | {floor['cpu_us']:.0f}" if floor else "— | —"
        lines.append(f"| {name} | {c} | {t['cpu_us']:.0f} | {d['cpu_us']:.0f} | {d['cpu_us'] / t['cpu_us']:.2f}× | "
                     f"{t['rps']:.0f} | {d['rps']:.0f} | {d['rps'] / t['rps']:.2f}× | {fmt(t['p50'])} | "
                     f"{fmt(d['p50'])} | {fmt(t['p99'])} | {fmt(d['p99'])} | {floor_cells} | "
                     f"{t['errors']}/{d['errors']} |")
    return lines


def floor_runner(binary):
    """The floor for `--image` (benches/engine_floor.rs) with `binary`."""
    def run(repository, jpeg, c, duration):
        out = subprocess.run([binary, "--repository", str(repository), "--model", "classifier", "--body", str(jpeg),
                              "--image", "--concurrency", str(c), "--seconds", str(duration)],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    return run
