"""A photo and its reference tensor, made without trident: Pillow writes a 224x224 PNG of seeded
random pixels and numpy computes the tensor torchvision's ImageNet preprocessing makes of it at
that size (no resize, no crop: pixels / 255, less the mean, over the std, channels first), saved
with numpy.save as a golden case's `.npy` reference.

Input (JSON on stdin): {"png": path, "npy": path}. Prints {"shape": [...]}.
"""

import json
import sys

import numpy as np
from PIL import Image

request = json.load(sys.stdin)
pixels = np.random.default_rng(59).integers(0, 256, size=(224, 224, 3), dtype=np.uint8)
Image.fromarray(pixels, "RGB").save(request["png"])
mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
tensor = ((pixels.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1)[None]
np.save(request["npy"], np.ascontiguousarray(tensor, dtype=np.float32))
print(json.dumps({"shape": list(tensor.shape)}))
