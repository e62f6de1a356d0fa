"""{{name}}: a trident request adapter for text. The body (UTF-8 text) becomes the tensors a
transformer takes, `input_ids`, `attention_mask` and `token_type_ids`, made by trident's native
text primitives (`text.tokenize`) with the model's `tokenizer.json` (the asset `tokenizer`) and
the tokenize plugin's configuration keys (defaults: 512 tokens, padded and truncated, INT64, a
batch dimension). Add your own steps around it; see trident's book, docs/plugins/writing.md."""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.request_adapter import Adapted_Tensors, TensorRequest
from wit_world.imports import text
from wit_world.imports.host import config
from wit_world.imports.types import Invocation, PluginError_BadRequest

# The configuration keys handed to text.tokenize (see docs/plugins/images-and-text.md, "Text in, text out").
KEYS = ["max_length", "padding", "truncation", "add_special_tokens", "datatype", "batch", "pad_token",
        "max_text_bytes", "max_texts"]

# Read once, in check_config: every call starts from this state.
SETTINGS = []


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        """Called once when trident loads the plugin: raise Err("why") to refuse the config."""
        global SETTINGS
        SETTINGS = [(key, value) for key in KEYS if (value := config(key)) is not None]


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation) -> Adapted_Tensors:
        try:
            body = bytes(invocation.body).decode("utf-8")
        except UnicodeDecodeError as error:
            raise Err(PluginError_BadRequest(f"the body is not UTF-8: {error}"))
        # A text too long raises Err(PluginError_BadRequest(...)), which answers the request.
        tensors = text.tokenize("tokenizer", [body], SETTINGS)
        return Adapted_Tensors(TensorRequest(inputs=tensors, outputs=[]))
