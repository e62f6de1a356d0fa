"""Photos of text made with Pillow, and what RapidOCR's own Python finds in them: the
reference for trident's text-detection example (tests/text_detection.rs).

  text_detection.py photos:DIR     writes the photos into DIR; prints their names
  text_detection.py reference:DIR  prints RapidOCR's boxes for each photo in DIR (detection
                                   only: RapidOCR()(path, use_cls=False, use_rec=False))

The photos: lines of text at several sizes on plain and textured backgrounds, a block turned by
a few degrees, a portrait page, a small label, a phone's 12 MP photo, as PNG and JPEG. Made from seeded randomness, so
each run makes the same bytes.
"""

import json
import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

WORDS = ("invoice total amount paid order shipping tax receipt number date customer "
         "address account balance due item quantity price discount subtotal station "
         "platform departure arrival gate seat coach").split()


def line(rng, words, gap=" "):
    return gap.join(rng.choice(WORDS) for _ in range(words)).capitalize() + f"{gap}{rng.randint(10, 9999)}"


def page(rng, size, lines, font_sizes, background=(250, 250, 245), ink=(20, 20, 30), noise=0, gap=" "):
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    if noise:
        for _ in range(noise):
            x, y = rng.randrange(size[0]), rng.randrange(size[1])
            shade = rng.randint(200, 240)
            draw.rectangle([x, y, x + rng.randint(2, 30), y + rng.randint(2, 30)], fill=(shade, shade, shade - 10))
    y = rng.randint(20, 40)
    for i in range(lines):
        font = ImageFont.load_default(size=font_sizes[i % len(font_sizes)])
        x = rng.randint(20, 60)
        text = line(rng, rng.randint(2, 5), gap)
        while draw.textlength(text, font=font) > size[0] - x - 20 and gap in text:
            text = text.rsplit(gap, 1)[0]
        draw.text((x, y), text, font=font, fill=ink)
        y += int(font.size * 1.9)
        if y > size[1] - font.size * 2:
            break
    return image


def photos():
    rng = random.Random(58)
    made = {}
    made["receipt.png"] = page(rng, (800, 600), 8, [28, 22, 34])
    made["sign.png"] = page(rng, (1024, 512), 3, [64, 48], background=(30, 70, 140), ink=(255, 255, 255))
    made["textured.png"] = page(rng, (900, 700), 7, [30, 26], noise=400)
    portrait = page(rng, (600, 900), 14, [24, 30])
    made["portrait.png"] = portrait
    turned = page(rng, (800, 600), 6, [32], background=(255, 255, 255))
    made["turned.png"] = turned.rotate(7, resample=Image.BICUBIC, expand=False, fillcolor=(255, 255, 255))
    made["label.png"] = page(rng, (320, 200), 2, [26])
    made["receipt.jpg"] = made["receipt.png"].filter(ImageFilter.GaussianBlur(0.6))
    # A phone's 12 MP photo (4032x3024) of a page: over RapidOCR's 2000 pixels a side, so
    # brought down before the detector sees it.
    made["phone.jpg"] = page(rng, (4032, 3024), 9, [110, 90, 130], noise=2000)
    return made


def main():
    command, folder = sys.argv[1].split(":", 1)
    folder = Path(folder)
    if command == "photos":
        folder.mkdir(parents=True, exist_ok=True)
        for name, image in photos().items():
            if name.endswith(".jpg"):
                image.save(folder / name, quality=92)
            else:
                image.save(folder / name)
        json.dump(sorted(photos()), sys.stdout)
    elif command == "reference":
        from rapidocr_onnxruntime import RapidOCR

        engine = RapidOCR()
        answers = {}
        for path in sorted(folder.iterdir()):
            if path.suffix not in (".png", ".jpg"):
                continue
            result, _ = engine(str(path), use_cls=False, use_rec=False)
            answers[path.name] = [[[round(x), round(y)] for x, y in box] for box in (result or [])]
        json.dump(answers, sys.stdout)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
