"""Photos of text made with Pillow, and what RapidOCR's own Python reads in them: the reference
for trident's OCR example (tests/ocr.rs).

  ocr.py photos:DIR     writes the photos into DIR; prints their names
  ocr.py recognize:DIR  reads {name: [box, ...]} on standard input and prints what RapidOCR's
                        own crops and recognizer read in those boxes of each photo in DIR:
                        {name: [{"text": ..., "score": ...}]} (get_crop_img_list, then
                        TextRecognizer)
  ocr.py reference:DIR  prints RapidOCR's lines for each photo in DIR, as
                        {name: [{"box": [[x, y] x 4], "text": ..., "score": ...}]}
                        (RapidOCR()(path, use_cls=False): detection and recognition, no
                        direction classifier, as the example's pipeline)

The photos are made as text_detection.py's (lines of text at several sizes and colours, on
plain and textured backgrounds, a block turned by a few degrees, a portrait page, a small label,
a blurred JPEG), and pages of 1, 8 and 32 lines (the bench's). Made from seeded randomness, so
each run makes the same bytes.
"""

import json
import random
import sys
from pathlib import Path

from PIL import Image, ImageFilter

from text_detection import page

# Words two spaces apart: with one, Pillow's default font leaves gaps the recognizer reads as a
# space or as none by a hair, and a pixel's difference in a box flips it.
GAP = "  "


def lines_page(rng, count):
    """A 1000-pixel-wide page of `count` lines at 22 pixels (32 lines fill it)."""
    height = max(120, 40 + count * 42)
    return page(rng, (1000, height), count, [22], gap=GAP)


def photos():
    rng = random.Random(60)
    made = {}
    made["receipt.png"] = page(rng, (800, 600), 8, [28, 22, 34], gap=GAP)
    made["sign.png"] = page(rng, (1024, 512), 3, [64, 48], background=(30, 70, 140), ink=(255, 255, 255), gap=GAP)
    made["textured.png"] = page(rng, (900, 700), 7, [30, 26], noise=400, gap=GAP)
    made["portrait.png"] = page(rng, (600, 900), 14, [24, 30], gap=GAP)
    turned = page(rng, (800, 600), 6, [32], background=(255, 255, 255), gap=GAP)
    made["turned.png"] = turned.rotate(7, resample=Image.BICUBIC, expand=False, fillcolor=(255, 255, 255))
    made["label.png"] = page(rng, (320, 200), 2, [26], gap=GAP)
    made["receipt.jpg"] = made["receipt.png"].filter(ImageFilter.GaussianBlur(0.6))
    for count in (1, 8, 32):
        made[f"lines-{count}.png"] = lines_page(rng, count)
    return made


def main():
    command, folder = sys.argv[1].split(":", 1)
    folder = Path(folder)
    if command == "photos":
        folder.mkdir(parents=True, exist_ok=True)
        made = photos()
        for name, image in made.items():
            if name.endswith(".jpg"):
                image.save(folder / name, quality=92)
            else:
                image.save(folder / name)
        json.dump(sorted(made), sys.stdout)
    elif command == "reference":
        from rapidocr_onnxruntime import RapidOCR

        engine = RapidOCR()
        answers = {}
        for path in sorted(folder.iterdir()):
            if path.suffix not in (".png", ".jpg"):
                continue
            result, _ = engine(str(path), use_cls=False)
            answers[path.name] = [
                {"box": [[round(x), round(y)] for x, y in box], "text": text, "score": score}
                for box, text, score in (result or [])
            ]
        json.dump(answers, sys.stdout, ensure_ascii=False)
    elif command == "recognize":
        import numpy as np
        from rapidocr_onnxruntime import RapidOCR

        engine = RapidOCR()
        answers = {}
        for name, boxes in json.load(sys.stdin).items():
            image = engine.load_img(str(folder / name))
            crops = engine.get_crop_img_list(image, [np.array(b, dtype=np.float32) for b in boxes])
            read, _ = engine.text_rec(crops) if crops else ([], 0)
            answers[name] = [{"text": text, "score": score} for text, score in read]
        json.dump(answers, sys.stdout, ensure_ascii=False)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
