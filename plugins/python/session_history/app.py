"""Session history in Python: an adapter that keeps what a stateful session sent, in the session's
store (`trident:session/store`), so each request is answered with the whole history, while every
call still runs in a fresh instance. The pattern of a chat adapter keeping a conversation.

A request's body is a JSON list of numbers. In a session (`X-Amzn-SageMaker-Session-Id`) they are
added to the session's history, and the model (any FP32 `[1, n]` identity or transform, input
`INPUT0`) gets the whole history; outside a session, just the request's numbers. The answer is
`{"session_id": <id or null>, "turns": <requests in the session>, "history": <the model's
OUTPUT0>}`. A history the store cannot hold is a 400 naming the store's bound, and the session
keeps what it had.

Config: `input` and `output` (tensor names, default `INPUT0` and `OUTPUT0`).

Build: componentize-py -d wit/session -w adapter-plugin componentize -p plugins/python/session_history app -o session_history.wasm
"""

import json
import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.request_adapter import Adapted_Tensors, TensorRequest
from wit_world.exports.response_adapter import InferenceResult
from wit_world.imports import store
from wit_world.imports.host import config
from wit_world.imports.types import Datatype, Invocation, PluginError_BadRequest, Reply, Tensor


def load(key, default):
    kept = store.get(key)
    return default if kept is None else json.loads(bytes(kept))


def keep(key, value):
    try:
        store.set(key, json.dumps(value).encode())
    except Err as refused:
        raise Err(PluginError_BadRequest(refused.value))


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        # Every key this plugin reads is read here: trident refuses a key check-config did
        # not read, so a misspelled one fails the load instead of leaving its default serving.
        for key in ("input", "output"):
            config(key)


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation) -> Adapted_Tensors:
        try:
            values = json.loads(bytes(invocation.body))
        except ValueError:
            raise Err(PluginError_BadRequest("the body must be a JSON list of numbers"))
        if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        ):
            raise Err(PluginError_BadRequest("the body must be a JSON list of numbers"))
        history = values
        if store.session_id() is not None:
            history = load("history", []) + values
            # Both writes fit or neither is made: the history first (the larger), then the count.
            keep("history", history)
            keep("turns", load("turns", 0) + 1)
        data = struct.pack(f"<{len(history)}f", *history)
        tensor = Tensor(config("input") or "INPUT0", Datatype.FP32, [1, len(history)], data)
        return Adapted_Tensors(TensorRequest([tensor], []))


class ResponseAdapter(exports.ResponseAdapter):
    def adapt_response(self, invocation: Invocation, inference: InferenceResult) -> Reply:
        name = config("output") or "OUTPUT0"
        output = next((t for t in inference.outputs if t.name == name), None)
        if output is None:
            raise Err(PluginError_BadRequest(f"the model answered no {name}"))
        data = bytes(output.data)
        history = list(struct.unpack(f"<{len(data) // 4}f", data))
        answer = {
            "session_id": store.session_id(),
            "turns": load("turns", 0),
            "history": history,
        }
        return Reply(200, "application/json", [], json.dumps(answer).encode())
