"""CSV request adapter in Python: `text/csv` rows of numbers become one `[rows, columns]` tensor,
handed to the model as typed data. The same behaviour as the Rust `csv-request` example.

Config (manifest `config` table): `input` (tensor name, default `INPUT0`), `datatype` (`FP32`
default, or `FP64`, `INT32`, `INT64`), `outputs` (comma-separated output names to ask for;
default all), `header` (`true` when the first line is a header to skip).

Build: componentize-py -d wit -w request-adapter-plugin componentize -p plugins/python/csv_request app -o csv_request_py.wasm
"""

import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.request_adapter import Adapted_Tensors, TensorRequest
from wit_world.imports.host import Level, config, log
from wit_world.imports.types import (
    Datatype,
    Invocation,
    PluginError_BadRequest,
    PluginError_Internal,
    PluginError_UnsupportedMediaType,
    Tensor,
)

# Element type -> (struct format of one element, how a field becomes a value).
DATATYPES = {
    "FP32": (Datatype.FP32, "<f", float),
    "FP64": (Datatype.FP64, "<d", float),
    "INT32": (Datatype.INT32, "<i", int),
    "INT64": (Datatype.INT64, "<q", int),
}


def datatype():
    name = config("datatype") or "FP32"
    if name not in DATATYPES:
        raise Err(f"datatype '{name}' is not supported (FP32, FP64, INT32, INT64)")
    return DATATYPES[name]


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        # Every key this plugin reads is read here: trident refuses a key check-config did
        # not read, so a misspelled one fails the load instead of leaving its default serving.
        for key in ("input", "outputs", "header"):
            config(key)
        datatype()


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation) -> Adapted_Tensors:
        content_type = invocation.content_type or "text/csv"
        if not content_type.startswith("text/csv"):
            raise Err(PluginError_UnsupportedMediaType(f"this endpoint takes text/csv, not {content_type}"))
        try:
            dtype, element, parse = datatype()
        except Err as error:
            raise Err(PluginError_Internal(error.value))
        try:
            text = bytes(invocation.body).decode("utf-8")
        except UnicodeDecodeError:
            raise Err(PluginError_BadRequest("the CSV body is not UTF-8"))
        values, rows, columns = [], 0, None
        lines = text.splitlines()
        skip = 1 if config("header") == "true" else 0
        for number, line in enumerate(lines[skip:], start=skip + 1):
            line = line.strip()
            if not line:
                continue
            fields = [field.strip() for field in line.split(",")]
            try:
                values.extend(parse(field) for field in fields)
            except ValueError:
                bad = next(f for f in fields if not valid(parse, f))
                raise Err(PluginError_BadRequest(f"line {number}: '{bad}' is not a valid {dtype.name} number"))
            if columns is None:
                columns = len(fields)
            elif columns != len(fields):
                raise Err(PluginError_BadRequest(
                    f"line {number} has {len(fields)} fields, the first row has {columns}"))
            rows += 1
        if columns is None:
            raise Err(PluginError_BadRequest("the CSV body has no rows"))
        try:
            data = struct.pack(f"<{len(values)}{element[1]}", *values)
        except struct.error as error:
            raise Err(PluginError_BadRequest(f"a value does not fit {dtype.name}: {error}"))
        log(Level.DEBUG, f"{rows}x{columns} CSV for {invocation.model}")
        outputs = [name.strip() for name in (config("outputs") or "").split(",") if name.strip()]
        tensor = Tensor(name=config("input") or "INPUT0", datatype=dtype, shape=[rows, columns], data=data)
        return Adapted_Tensors(TensorRequest(inputs=[tensor], outputs=outputs))


def valid(parse, field):
    try:
        parse(field)
        return True
    except ValueError:
        return False
