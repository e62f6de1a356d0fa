// {{name}}: a trident request adapter for images. A JPEG or PNG (raw, or base64 in a JSON body;
// several make a batch) becomes one normalized tensor, named by the `input` config (default
// `INPUT0`), made by trident's native image primitives (`toTensor`): decoding, EXIF orientation,
// resizing, cropping and normalization at native speed, with the image-tensor plugin's
// configuration keys (defaults: torchvision's ImageNet preprocessing). Add your own steps around
// it; see trident's book, docs/plugins/writing.md.

import { config } from "trident:plugin/host@0.1.0";
import { toTensor } from "trident:plugin/images@0.1.0";

// The configuration keys handed to toTensor (see docs/plugins/images-and-text.md, "Images in, labels out").
const KEYS = ["size", "resize", "resize_shorter", "resample", "layout", "channels", "datatype", "scale", "mean", "std",
  "batch", "max_pixels", "max_image_bytes", "max_images"];

let input = "INPUT0";
let settings = [];

export const lifecycle = {
  // Called once for each instance (JavaScript components are not snapshotted): throw "why" to
  // refuse the configuration.
  checkConfig() {
    input = config("input") ?? "INPUT0";
    settings = KEYS.flatMap((key) => {
      const value = config(key);
      return value == null ? [] : [[key, value]];
    });
  },
};

export const requestAdapter = {
  adaptRequest(invocation) {
    // A broken image throws its { tag, val } error, which answers the request.
    const tensor = toTensor(input, invocation.contentType ?? null, invocation.body, settings);
    return { tag: "tensors", val: { inputs: [tensor], outputs: [] } };
  },
};
