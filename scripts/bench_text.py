"""The text tables of scripts/bench (`--only text`): texts in, labels out, and a prompt in, text
streamed out, on the same stand-in models (examples/text-classification, examples/text-streaming),
each server the way its users build it.

- Triton: ensembles, as Triton's BERT and TensorRT-LLM recipes are built: a python-backend
  `preprocess` model running Hugging Face `tokenizers` (the same tokenizer.json), the model, and a
  python-backend `postprocess` model (softmax and labels; or, for the stream, each response's ids
  decoded as TensorRT-LLM's postprocessing model decodes them, one call per response). The
  classification goes to Triton's SageMaker frontend as a v2 JSON BYTES tensor; the stream to its
  HTTP frontend's `generate_stream` (Triton 2.51's SageMaker frontend has none).
- trident: the same models behind the tokenize and top-k-labels plugins (`{"inputs": text}`), and
  behind the detokenize plugin (`{"text_input": prompt}` on `generate_stream`).

Texts of 128 and 512 tokens (the model's sequence as long), each against Triton's python steps
at their default (one instance each) and tuned as informed users set them (one instance per
core: VARIANTS), and a 256-token prompt streamed back as 256 events, each detokenized. CPU per request counts every process of the server: tritonserver
and its python stubs, trident's serving process. The python models import `tokenizers` from the
test clients' environment (scripts/install-test-clients), the same version trident's plugins
are checked against.
"""

import hashlib
import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

from bench_images import tree_cpu

ROOT = Path(__file__).resolve().parent.parent
CLASSIFICATION = ROOT / "examples/text-classification"
STREAMING = ROOT / "examples/text-streaming"
PYTHON = ROOT / "target/test-clients/python/bin/python"

# What every python model that tokenizes starts with: its tokenizer.json, read once.
TOKENIZER_MODEL = '''
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, STUB_PATH)
from tokenizers import Tokenizer  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"])
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
'''

PREPROCESS = TOKENIZER_MODEL + '''        self.tokenizer.enable_truncation(LENGTH)
        self.tokenizer.enable_padding(length=LENGTH, pad_id=self.tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = [t.decode("utf-8") for t in pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)]
            encodings = self.tokenizer.encode_batch(texts)
            tensors = [pb_utils.Tensor(name, np.array([getattr(e, field) for e in encodings], dtype=np.int64))
                       for name, field in [("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                           ("token_type_ids", "type_ids")]]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
'''

POSTPROCESS = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils

LABELS = ["NEGATIVE", "POSITIVE"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, "logits").as_numpy()
            answers = []
            for row in logits:
                exp = np.exp(row - row.max())
                probabilities = exp / exp.sum()
                best = np.argsort(-probabilities, kind="stable")
                answers.append(json.dumps([{"label": LABELS[k], "score": float(probabilities[k])} for k in best]))
            out = np.array(answers, dtype=object).reshape(-1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("LABELS", out)]))
        return responses
'''

STREAM_PREPROCESS = TOKENIZER_MODEL + '''
    def execute(self, requests):
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            ids = self.tokenizer.encode(prompt.decode("utf-8")).ids
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("input_ids", np.array(ids, dtype=np.int64))]))
        return responses
'''

STREAM_POSTPROCESS = TOKENIZER_MODEL + '''
    def execute(self, requests):
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, "output_ids").as_numpy().reshape(-1).tolist()
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=object))]))
        return responses
'''


# (tokens of the text and the model's sequence, python instances of each of Triton's steps)
VARIANTS = [(128, 1), (128, os.cpu_count()), (512, 1), (512, os.cpu_count())]


def python_model(folder, code, inputs, outputs, batch, files=(), instances=1):
    (folder / "1").mkdir(parents=True)
    # The stub's Python finds `tokenizers` where stub_path put it (its environment is Triton's).
    (folder / "1/model.py").write_text(code.replace("STUB_PATH", repr(str(folder.parent.parent / "stub-path"))))
    for file in files:
        shutil.copy(file, folder / "1/tokenizer.json")
    (folder / "config.pbtxt").write_text(
        f'backend: "python"\nmax_batch_size: {batch}\ninput [ {inputs} ]\noutput [ {outputs} ]\n'
        f'instance_group [ {{ kind: KIND_CPU, count: {instances} }} ]\n')


def ids_tensors(length):
    return ", ".join(f'{{ name: "{n}", data_type: TYPE_INT64, dims: [ {length} ] }}'
                     for n in ["input_ids", "attention_mask", "token_type_ids"])


def classification_repositories(tmp, length, tokenizer, instances):
    """(Triton's repository with the ensemble, its python steps `instances` instances each,
    trident's with the classifier alone), the classifier's sequence `length` tokens."""
    triton = tmp / f"repo-text{length}-{instances}-triton"
    trident = tmp / f"repo-text{length}-{instances}-trident"
    for repository in (triton, trident):
        shutil.copytree(CLASSIFICATION / "models", repository)
        config = repository / "text-classifier/config.pbtxt"
        config.write_text(config.read_text().replace("dims: [ 128 ]", f"dims: [ {length} ]"))
    python_model(triton / "preprocess", PREPROCESS.replace("LENGTH", str(length)),
                 '{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }', ids_tensors(length), 8, [tokenizer],
                 instances)
    python_model(triton / "postprocess", POSTPROCESS, '{ name: "logits", data_type: TYPE_FP32, dims: [ 2 ] }',
                 '{ name: "LABELS", data_type: TYPE_STRING, dims: [ 1 ] }', 8, instances=instances)
    step = lambda names: " ".join(f'{kind} {{ key: "{n}" value: "{n}" }}' for kind, n in names)
    ids = [("input_map", n) for n in ["input_ids", "attention_mask", "token_type_ids"]]
    (triton / "text_classification/1").mkdir(parents=True)
    (triton / "text_classification/config.pbtxt").write_text(f'''
platform: "ensemble"
max_batch_size: 8
input [ {{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }} ]
output [ {{ name: "LABELS", data_type: TYPE_STRING, dims: [ 1 ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "preprocess" model_version: -1 input_map {{ key: "TEXT" value: "TEXT" }}
    {step([("output_map", n) for n in ["input_ids", "attention_mask", "token_type_ids"]])} }},
  {{ model_name: "text-classifier" model_version: -1 {step(ids)} output_map {{ key: "logits" value: "logits" }} }},
  {{ model_name: "postprocess" model_version: -1 input_map {{ key: "logits" value: "logits" }}
    output_map {{ key: "LABELS" value: "LABELS" }} }}
] }}
''')
    return triton, trident


def stream_repositories(tmp, tokenizer):
    """(Triton's repository with the streaming ensemble, trident's with the model alone), the
    model streaming without a pause."""
    triton, trident = tmp / "repo-stream-triton", tmp / "repo-stream-trident"
    for repository in (triton, trident):
        shutil.copytree(STREAMING / "models", repository)
        config = repository / "token-stream/config.pbtxt"
        config.write_text(config.read_text().replace('string_value: "20"', 'string_value: "0"'))
    python_model(triton / "preprocess", STREAM_PREPROCESS, '{ name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] }',
                 '{ name: "input_ids", data_type: TYPE_INT64, dims: [ -1 ] }', 0, [tokenizer])
    python_model(triton / "postprocess", STREAM_POSTPROCESS, '{ name: "output_ids", data_type: TYPE_INT64, dims: [ 1 ] }',
                 '{ name: "text_output", data_type: TYPE_STRING, dims: [ 1 ] }', 0, [tokenizer])
    (triton / "text_stream/1").mkdir(parents=True)
    (triton / "text_stream/config.pbtxt").write_text('''
platform: "ensemble"
input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "preprocess" model_version: -1 input_map { key: "text_input" value: "text_input" }
    output_map { key: "input_ids" value: "input_ids" } },
  { model_name: "token-stream" model_version: -1 input_map { key: "input_ids" value: "input_ids" }
    output_map { key: "output_ids" value: "output_ids" } },
  { model_name: "postprocess" model_version: -1 input_map { key: "output_ids" value: "output_ids" }
    output_map { key: "text_output" value: "text_output" } }
] }
''')
    return triton, trident


def manifest(folder, template, files):
    """A plugin manifest in `folder` from an example's `template`, `files` (placeholder →
    path) copied beside it, under the names the template gives them, and pinned."""
    folder.mkdir()
    text = template.read_text()
    for placeholder, source in files.items():
        name = "tokenizer.json" if placeholder == "@TOKENIZER@" else source.name
        shutil.copy(source, folder / name)
        text = text.replace(placeholder, hashlib.sha256(Path(source).read_bytes()).hexdigest())
    (folder / "plugins.toml").write_text(text)
    return folder / "plugins.toml"


def tokenizer_path(tmp, family):
    path = tmp / f"{family}.json"
    if not path.exists():
        subprocess.run([str(PYTHON), str(ROOT / "scripts/train_tokenizer.py"), family, str(path)], check=True)
    return path


def text_of(tokens, tokenizer):
    """An English text of about `tokens` tokens by `tokenizer`, from the corpus's sentences."""
    script = f'''
import sys
sys.path.insert(0, {str(ROOT / "scripts")!r})
from tokenizers import Tokenizer
from train_tokenizer import corpus
tok = Tokenizer.from_file({str(tokenizer)!r})
lines = [l for i, l in enumerate(corpus(3000)) if i % 3]
text = ""
for line in lines:
    longer = (text + " " + line).strip()
    if len(tok.encode(longer).ids) > {tokens}:
        break
    text = longer
print(text)
'''
    return subprocess.run([str(PYTHON), "-c", script], check=True, capture_output=True, text=True).stdout.strip()


def tokenizer_alone(tmp, tokenizer, text, length):
    """Microseconds of one thread to tokenize `text` (truncated and padded to `length`), by Python's
    `tokenizers` (`encode_batch`, as the ensemble's preprocess step calls it) and by trident-text
    natively (what the tokenize plugin's host primitive runs): the work both servers share."""
    path = tmp / f"alone{length}.txt"
    path.write_text(text)
    script = f'''
import time
from tokenizers import Tokenizer
tok = Tokenizer.from_file({str(tokenizer)!r})
tok.enable_truncation({length})
tok.enable_padding(length={length})
text = open({str(path)!r}).read()
for _ in range(200):
    tok.encode_batch([text])
started = time.perf_counter()
for _ in range(2000):
    tok.encode_batch([text])
print((time.perf_counter() - started) / 2000 * 1e6)
'''
    python = float(subprocess.run([str(PYTHON), "-c", script], check=True, capture_output=True, text=True).stdout)
    native = float(subprocess.run(["cargo", "run", "--release", "--locked", "-q", "-p", "trident-text", "--example",
                                   "encode_cost", "--", str(tokenizer), str(path), str(length)], cwd=ROOT,
                                  check=True, capture_output=True, text=True).stdout)
    return python, native


def stub_path(tmp):
    """A folder holding `tokenizers` alone, which the python models put first on their path (the
    test clients' package, built for every CPython 3; the stubs keep the system's NumPy)."""
    site = next((ROOT / "target/test-clients/python/lib").glob("python3*/site-packages"))
    folder = tmp / "stub-path"
    folder.mkdir(exist_ok=True)
    if not (folder / "tokenizers").exists():
        (folder / "tokenizers").symlink_to(site / "tokenizers")
    return folder


def post(port, path, body, content_type="application/json"):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def measure(wrk, script, sides, concurrencies, duration):
    """Per concurrency, each side's wrk result with `cpu_us` counting its whole process tree,
    alternating which side goes first."""
    rows = []
    for i, c in enumerate(concurrencies):
        results = {}
        for who, port, path, pid, body, content_type in (sides if i % 2 == 0 else sides[::-1]):
            wrk(port, path, "POST", body, content_type, c, 2, script)  # warm-up
            before = tree_cpu(pid)
            result = wrk(port, path, "POST", body, content_type, c, duration, script)
            result["cpu_us"] = (tree_cpu(pid) - before) * 1e6 / max(1, result["rps"] * duration)
            results[who] = result
        rows.append((c, results["triton"], results["trident"]))
    return rows


def classification_rows(tmp, start_servers, wrk, script, concurrencies, duration, wasm_folder):
    """Per variant (VARIANTS): (tokens, instances, top label, rows, (Python µs, trident-text µs) to
    tokenize the text alone)."""
    tokenizer = tokenizer_path(tmp, "bert")
    stub_path(tmp)
    tables, alone = [], {}
    for length, instances in VARIANTS:
        triton_repo, trident_repo = classification_repositories(tmp, length, tokenizer, instances)
        plugins = manifest(tmp / f"text{length}-{instances}-plugins", CLASSIFICATION / "plugins.toml.in", {
            "@TOKENIZE@": wasm_folder / "tokenize.wasm", "@TOP_K_LABELS@": wasm_folder / "top_k_labels.wasm",
            "@LABELS@": CLASSIFICATION / "config.json", "@TOKENIZER@": tokenizer})
        text = plugins.parent / "plugins.toml"
        text.write_text(text.read_text().replace('max_length = "128"', f'max_length = "{length}"'))
        sentence = text_of(length, tokenizer)
        triton_body = tmp / f"text{length}.triton.json"
        triton_body.write_text(json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1, 1],
                                                       "data": [sentence]}]}))
        trident_body = tmp / f"text{length}.trident.json"
        trident_body.write_text(json.dumps({"inputs": sentence}))
        servers = start_servers(triton_repo, "text_classification", plugins=plugins,
                                trident_repository=trident_repo, trident_model="text-classifier")
        try:
            theirs = json.loads(post(servers.triton_port, "/invocations", triton_body.read_bytes()))
            theirs = json.loads(next(o for o in theirs["outputs"] if o["name"] == "LABELS")["data"][0])
            ours = json.loads(post(servers.trident_port, "/invocations", trident_body.read_bytes()))
            if [a["label"] for a in theirs] != [a["label"] for a in ours] or \
                    abs(theirs[0]["score"] - ours[0]["score"]) > 1e-5:
                raise SystemExit(f"bench: the servers disagree on a {length}-token text: Triton {theirs}, trident {ours}")
            sides = [("triton", servers.triton_port, "/invocations", servers.triton.pid, triton_body, "application/json"),
                     ("trident", servers.trident_port, "/invocations", servers.trident_pid, trident_body,
                      "application/json")]
            rows = measure(wrk, script, sides, concurrencies, duration)
        finally:
            servers.stop()
        # The tokenizer alone depends on the text, not on Triton's instances: measured once a length.
        if length not in alone:
            alone[length] = tokenizer_alone(tmp, tokenizer, sentence, length)
        tables.append((length, instances, ours[0]["label"], rows, alone[length]))
    return tables


def stream_rows(tmp, start_servers, wrk, script, concurrencies, duration, wasm_folder):
    """A 256-token prompt streamed back: (events, rows)."""
    tokenizer = tokenizer_path(tmp, "gpt2")
    stub_path(tmp)
    triton_repo, trident_repo = stream_repositories(tmp, tokenizer)
    plugins = manifest(tmp / "stream-plugins", STREAMING / "plugins.toml.in", {
        "@DETOKENIZE@": wasm_folder / "detokenize.wasm", "@TOKENIZER@": tokenizer})
    prompt = text_of(255, tokenizer)
    body = tmp / "stream.json"
    body.write_text(json.dumps({"text_input": prompt}))
    servers = start_servers(triton_repo, "text_stream", plugins=plugins, trident_repository=trident_repo,
                            trident_model="token-stream", triton_http=True, inference_type="generate_stream")
    path = "/v2/models/text_stream/generate_stream"
    try:
        def texts(raw):
            events = [json.loads(e[len("data: "):]) for e in raw.decode().split("\n\n") if e.startswith("data: ")]
            return [e["text_output"] for e in events]
        theirs = texts(post(servers.triton_http_port, path, body.read_bytes()))
        ours = texts(post(servers.trident_port, "/invocations", body.read_bytes()))
        if "".join(theirs) != prompt or "".join(ours) != prompt:
            raise SystemExit(f"bench: a stream is not the prompt: Triton {''.join(theirs)[:80]!r}, "
                             f"trident {''.join(ours)[:80]!r}")
        sides = [("triton", servers.triton_http_port, path, servers.triton.pid, body, "application/json"),
                 ("trident", servers.trident_port, "/invocations", servers.trident_pid, body, "application/json")]
        return len(theirs), len(ours), measure(wrk, script, sides, concurrencies, duration)
    finally:
        servers.stop()


def tables(classification, stream, fmt):
    lines = []
    if classification:
        lines += ["", "Text in, labels out: a text through Triton's ensemble (a python-backend `tokenizers` step, the "
                 "classifier, a python labels step) against trident's tokenize and top-k-labels plugins on the same "
                 "classifier, its sequence as long as the text (both answer the same labels with the same score); "
                 "Triton's python steps at their default (1 instance each) and tuned (1 instance per core); CPU per "
                 "request in µs counting every process of the server (Triton's python stubs included), latency in ms:",
                 "", "| setting | conc. | Triton CPU | trident CPU | CPU ratio | Triton req/s | trident req/s | ratio | "
                 "Triton p50 | trident p50 | Triton p99 | trident p99 | errors T/t |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        alone = []
        for length, instances, label, rows, (python, native) in classification:
            name = f"{length} tokens, Triton's python steps {instances} instance{'s' if instances > 1 else ''} each"
            for c, t, d in rows:
                lines.append(f"| {name} | {c} | {t['cpu_us']:.0f} | {d['cpu_us']:.0f} | {d['cpu_us'] / t['cpu_us']:.2f}× | "
                             f"{t['rps']:.0f} | {d['rps']:.0f} | {d['rps'] / t['rps']:.2f}× | {fmt(t['p50'])} | "
                             f"{fmt(d['p50'])} | {fmt(t['p99'])} | {fmt(d['p99'])} | {t['errors']}/{d['errors']} |")
            line = f"{length} tokens: Python `tokenizers` {python:.0f} µs, trident-text {native:.0f} µs"
            if line not in alone:
                alone.append(line)
        lines += ["", "The tokenizer alone, one thread, the same text (the work both servers share: the ensemble's "
                  "preprocess step calls Python's `tokenizers`, the tokenize plugin's host primitive trident-text): "
                  + "; ".join(alone) + "."]
    if stream:
        theirs, ours, rows = stream
        lines += ["", "A 256-token prompt streamed back as text, one event per token: Triton's HTTP "
                  "`generate_stream` over an ensemble (a python `tokenizers` step, the decoupled model, a python "
                  f"step decoding each response's ids: {theirs} events) against trident's `generate_stream` with "
                  f"the detokenize plugin (its stream state carrying each event's context: {ours} events); both "
                  "streams' texts are the prompt. A request is a whole stream; latency in ms, CPU per stream in "
                  "µs, every process of the server:", ""]
        lines += row_table(rows, fmt)
    return lines


def row_table(rows, fmt):
    lines = ["| conc. | Triton req/s | trident req/s | ratio | Triton p50 | trident p50 | Triton p99 | trident p99 | "
             "Triton CPU | trident CPU | ratio | errors T/t |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c, t, d in rows:
        lines.append(f"| {c} | {t['rps']:.0f} | {d['rps']:.0f} | {d['rps'] / t['rps']:.2f}× | {fmt(t['p50'])} | "
                     f"{fmt(d['p50'])} | {fmt(t['p99'])} | {fmt(d['p99'])} | {t['cpu_us']:.0f} | {d['cpu_us']:.0f} | "
                     f"{d['cpu_us'] / t['cpu_us']:.2f}× | {t['errors']}/{d['errors']} |")
    return lines
