"""Hugging Face's own image processors, as the reference for the image plugin's reading of a
`preprocessor_config.json` (run in the virtual environment of transformers that
scripts/install-test-clients makes: target/test-clients/hf).

Usage: hf_processors.py DIR   (stdin: {"processors": {NAME: CONFIG, ...}})
    Writes each CONFIG (a preprocessor_config.json's object, as the Hub's files hold them, or
    {"class": CLASS, "kwargs": {...}}: that processor saved by transformers itself) to
    DIR/NAME/preprocessor_config.json, and three photos Pillow makes (PNG, textured, of sizes
    whose centre crops fall on half pixels) to DIR; then loads each folder with
    AutoImageProcessor.from_pretrained, as a model's user does, and prints
    {"images": [path, ...], "processors": {NAME: {"config": path, "class": the class loaded,
    "tensors": [{"shape": [...], "data": [...]}, ...one per image], "levels": [...]}}}
    where levels are what one 8-bit level is worth in each channel of the tensor.
"""

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402


def photo(width, height, seed):
    """A textured image: smooth enough for resizing to agree to a level, detailed enough that
    a crop one pixel off shows."""
    x = np.arange(width, dtype=np.float64)[None, :]
    y = np.arange(height, dtype=np.float64)[:, None]
    r = 128 + 100 * np.sin(x / (7 + seed)) * np.cos(y / 11)
    g = 128 + 90 * np.sin((x + y) / 13)
    b = 60 + 0.5 * x + 0 * y
    rgb = np.stack([r, g, b], axis=-1).clip(0, 255).astype(np.uint8)
    return Image.fromarray(rgb, "RGB")


def main():
    folder = sys.argv[1]
    request = json.load(sys.stdin)
    images = []
    # 303x224: CLIP's crop offset is 39.5 (Hugging Face takes 39, torchvision 40); a portrait,
    # and a larger photo.
    for width, height, seed in [(303, 224, 0), (224, 303, 1), (640, 427, 2)]:
        path = os.path.join(folder, f"photo_{width}x{height}.png")
        photo(width, height, seed).save(path)
        images.append(path)
    out = {"images": images, "processors": {}}
    for name, config in request["processors"].items():
        where = os.path.join(folder, name)
        os.makedirs(where, exist_ok=True)
        if "class" in config:
            cls = getattr(transformers, config["class"])
            cls(**config["kwargs"]).save_pretrained(where)
        else:
            with open(os.path.join(where, "preprocessor_config.json"), "w") as f:
                json.dump(config, f)
        processor = transformers.AutoImageProcessor.from_pretrained(where)
        tensors = []
        for path in images:
            pixels = processor(Image.open(path), return_tensors="np")["pixel_values"]
            tensors.append({"shape": list(pixels.shape), "data": pixels.reshape(-1).tolist()})
        scale = processor.rescale_factor if processor.do_rescale else 1.0
        std = np.broadcast_to(
            np.asarray(processor.image_std if processor.do_normalize else 1.0, dtype=np.float64), (3,)
        )
        out["processors"][name] = {
            "config": os.path.join(where, "preprocessor_config.json"),
            "class": type(processor).__name__,
            "tensors": tensors,
            "levels": (scale / std).tolist(),
        }
    print(json.dumps(out))


main()
