"""{{name}}: a trident request adapter. A body of numbers separated by commas or white space
becomes one FP32 tensor of shape `[1, n]`, named by the `input` config (default `INPUT0`).
Change `adapt_request` to read your payload; see trident's book, docs/plugins/writing.md."""

import re
import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.request_adapter import Adapted_Tensors, TensorRequest
from wit_world.imports.host import config
from wit_world.imports.types import Datatype, Invocation, PluginError_BadRequest, Tensor


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        """Called once when trident loads the plugin: raise Err("why") to refuse the config.

        Read every config key here: trident refuses a key check-config did not read (a
        misspelling), so that it fails the load instead of leaving a default serving."""
        config("input")


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation) -> Adapted_Tensors:
        try:
            text = bytes(invocation.body).decode("utf-8")
        except UnicodeDecodeError:
            raise Err(PluginError_BadRequest("the body is not UTF-8"))
        values = []
        for field in re.split(r"[,\s]+", text):
            if not field:
                continue
            try:
                values.append(float(field))
            except ValueError:
                raise Err(PluginError_BadRequest(f"'{field}' is not a number"))
        if not values:
            raise Err(PluginError_BadRequest("the body has no numbers"))
        tensor = Tensor(
            name=config("input") or "INPUT0",
            datatype=Datatype.FP32,
            shape=[1, len(values)],
            data=struct.pack(f"<{len(values)}f", *values),
        )
        return Adapted_Tensors(TensorRequest(inputs=[tensor], outputs=[]))
