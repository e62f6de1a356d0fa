"""{{name}}: a trident pipeline, a plugin that answers a request whole by calling the
endpoint's models. The body, a JSON array of numbers, goes to the model named by the `model`
config (default `affine`, which the manifest entry's `models` must name) as `INPUT0`, FP32
`[1, n]`; the reply is the model's FP32 outputs as JSON, `{"OUTPUT0": [...]}`. A model's
refusal is passed on with its status. Call more models, or one in a loop, from `handle`; see
trident's book, docs/plugins/pipelines.md."""

import json
import math
import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import models
from wit_world.imports.host import config
from wit_world.imports.types import Datatype, Invocation, PluginError_BadRequest, Reply, Tensor

# The status each kind of model refusal is passed on with.
STATUS = {"NotAllowed": 403, "BadRequest": 400, "Unavailable": 503, "Failed": 500}


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        """Called once when trident loads the plugin: raise Err("why") to refuse the config.

        Read every config key here: trident refuses a key check-config did not read."""
        config("model")


def reply(status: int, value) -> Reply:
    return Reply(status=status, content_type="application/json", headers=[],
                 body=json.dumps(value).encode("utf-8"))


def numbers(body: bytes) -> list:
    try:
        values = json.loads(body)
    except ValueError:
        values = None
    if not (isinstance(values, list) and values
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)):
        raise Err(PluginError_BadRequest("send a JSON array of numbers"))
    if not all(math.isfinite(v) and abs(v) <= 3.4e38 for v in values):
        raise Err(PluginError_BadRequest("a number is not a finite FP32"))
    return values


class Pipeline(exports.Pipeline):
    def handle(self, invocation: Invocation) -> Reply:
        values = numbers(bytes(invocation.body))
        model = config("model") or "affine"
        tensor = Tensor(name="INPUT0", datatype=Datatype.FP32, shape=[1, len(values)],
                        data=struct.pack(f"<{len(values)}f", *values))
        try:
            response = models.infer(models.ModelRequest(model=model, inputs=[tensor], outputs=[]))
        except Err as error:
            # error.value is a models.CallError_NotAllowed, _BadRequest, _Unavailable or _Failed.
            kind = type(error.value).__name__.rsplit("_", 1)[-1]
            return reply(STATUS.get(kind, 500), {"error": f"model '{model}': {error.value.value}"})
        outputs = {}
        for output in response.outputs:
            if output.datatype == Datatype.FP32:
                data = bytes(output.data)
                outputs[output.name] = list(struct.unpack(f"<{len(data) // 4}f", data))
        return reply(200, outputs)
