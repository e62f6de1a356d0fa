"""Response adapter in Python: answers CSV or JSON by the request's `Accept`, the same behaviour
as the Rust `csv-json-response` example. One output (config `output`, default the first) is
written row by row along its first dimension:
- `text/csv`: one line per row;
- `application/jsonlines`: one JSON array per line;
- anything else: `{"predictions": [[...], ...]}` as `application/json`.

Numbers are written as the Rust example writes them: the shortest digits that read back to the
same value, never an exponent (`3`, `2.5`, `0.1` for an FP32 0.1, `100000000000000000000`).

Build: componentize-py -d wit -w response-adapter-plugin componentize -p plugins/python/csv_json_response app -o csv_json_response_py.wasm
"""

import math
import struct
from decimal import Decimal

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.response_adapter import InferenceResult
from wit_world.imports.host import config
from wit_world.imports.types import Datatype, Invocation, PluginError_Internal, Reply

# Element type -> its struct format (one element), or None for a float (shortest digits).
INTEGERS = {
    Datatype.UINT8: "B", Datatype.UINT16: "H", Datatype.UINT32: "I", Datatype.UINT64: "Q",
    Datatype.INT8: "b", Datatype.INT16: "h", Datatype.INT32: "i", Datatype.INT64: "q",
}
FLOATS = {Datatype.FP32: ("f", 9), Datatype.FP64: ("d", 17)}


def shortest(value, code, most_digits):
    """The shortest decimal that packs back to the same float, written without an exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    exact = struct.pack("<" + code, value)
    for digits in range(1, most_digits + 1):
        text = "%.*g" % (digits, value)
        if struct.pack("<" + code, float(text)) == exact:
            break
    plain = format(Decimal(text), "f")
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return plain


def elements(tensor):
    data = bytes(tensor.data)
    if tensor.datatype == Datatype.BOOLEAN:
        return ["true" if b else "false" for b in data]
    if tensor.datatype in INTEGERS:
        code = INTEGERS[tensor.datatype]
        count = len(data) // struct.calcsize(code)
        return [str(v) for v in struct.unpack(f"<{count}{code}", data[: count * struct.calcsize(code)])]
    if tensor.datatype in FLOATS:
        code, most = FLOATS[tensor.datatype]
        count = len(data) // struct.calcsize(code)
        values = struct.unpack(f"<{count}{code}", data[: count * struct.calcsize(code)])
        return [shortest(v, code, most) for v in values]
    raise Err(PluginError_Internal(
        f"output '{tensor.name}' is {tensor.datatype.name}, which this adapter does not write"))


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        # Every key this plugin reads is read here: trident refuses a key check-config did
        # not read, so a misspelled one fails the load instead of leaving its default serving.
        config("output")


class ResponseAdapter(exports.ResponseAdapter):
    def adapt_response(self, invocation: Invocation, inference: InferenceResult) -> Reply:
        wanted = config("output")
        found = [t for t in inference.outputs if wanted is None or t.name == wanted]
        if not found:
            raise Err(PluginError_Internal(f"the model returned no output {wanted or ''}"))
        tensor = found[0]
        values = elements(tensor)
        rows = max(tensor.shape[0] if tensor.shape else 1, 1)
        per_row = len(values) // rows
        lines = [values[i:i + per_row] for i in range(0, len(values), per_row)] if per_row else []
        accept = invocation.accept or "application/json"
        if accept.startswith("text/csv"):
            content_type, body = "text/csv", "".join(",".join(row) + "\n" for row in lines)
        elif accept.startswith("application/jsonlines"):
            content_type, body = "application/jsonlines", "".join(f"[{','.join(row)}]\n" for row in lines)
        else:
            rows_text = ",".join(f"[{','.join(row)}]" for row in lines)
            content_type, body = "application/json", f'{{"predictions":[{rows_text}]}}'
        return Reply(status=200, content_type=content_type, headers=[], body=body.encode())
