"""{{name}}: a trident request adapter for images. A JPEG or PNG (raw, or base64 in a JSON body;
several make a batch) becomes one normalized tensor, named by the `input` config (default
`INPUT0`), made by trident's native image primitives (`images.to_tensor`): decoding, EXIF
orientation, resizing, cropping and normalization at native speed, with the image-tensor plugin's
configuration keys (defaults: torchvision's ImageNet preprocessing). Add your own steps around it;
see trident's book, docs/plugins/writing.md."""

from wit_world import exports
from wit_world.exports.request_adapter import Adapted_Tensors, TensorRequest
from wit_world.imports import images
from wit_world.imports.host import config
from wit_world.imports.types import Invocation

# The configuration keys handed to images.to_tensor (see docs/plugins/images-and-text.md, "Images in, labels out").
KEYS = ["size", "resize", "resize_shorter", "resample", "layout", "channels", "datatype", "scale", "mean", "std",
        "batch", "max_pixels", "max_image_bytes", "max_images"]

# Read once, in check_config: every call starts from this state.
INPUT = "INPUT0"
SETTINGS = []


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        """Called once when trident loads the plugin: raise Err("why") to refuse the config."""
        global INPUT, SETTINGS
        INPUT = config("input") or "INPUT0"
        SETTINGS = [(key, value) for key in KEYS if (value := config(key)) is not None]


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation) -> Adapted_Tensors:
        # A broken image raises Err(PluginError_BadRequest(...)), which answers the request.
        tensor = images.to_tensor(INPUT, invocation.content_type, invocation.body, SETTINGS)
        return Adapted_Tensors(TensorRequest(inputs=[tensor], outputs=[]))
