"""Images for the image plugins' tests, made with Pillow (no downloads), and what a client expects
back from them, computed the way a Python pre-processing step would: Pillow decoding, torchvision's
Resize(256) / CenterCrop(224) / ToTensor / Normalize written out in NumPy, and the stand-in
classifier's formula (backend/src/models/classifier.rs) with a softmax and the top five.

Usage: images.py make:DIR      (stdin: null)  writes every image into DIR; prints {name: path}
       images.py heavy:DIR     (stdin: null)  writes 4000x3000 progressive JPEGs of 99 and 64
                                              scans (libjpeg-turbo's cjpeg, with a scan script)
                                              into DIR; prints {name: path}
       images.py expect:LABELS (stdin: [path, ...])  prints, per image, [[label, score], ...]
       images.py resampled:FILTER (stdin: [path, ...])  prints, per image, the 224x224 centre
                                              crop of its shorter side resized to 256 with
                                              Pillow's FILTER (bilinear, bicubic, lanczos), as
                                              a flat list of its 8-bit RGB values, row by row
       images.py gray: (stdin: [path, ...])   the same crop (bilinear) of the image converted
                                              to Pillow's "L" first: its 8-bit values
       images.py letterboxed:WxH (stdin: [path, ...])  the image in a WxH letterbox as
                                              ultralytics' LetterBox makes it (OpenCV's
                                              INTER_LINEAR resize, margins of 114, centred):
                                              its 8-bit RGB values, row by row
"""

import io
import json
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageOps

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def gradient(width, height, warm=True):
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :]
    y = np.linspace(0, 1, height, dtype=np.float32)[:, None]
    if warm:
        rgb = [200 + 40 * x + 0 * y, 60 + 120 * y * x, 30 + 20 * y + 0 * x]
    else:
        rgb = [20 + 30 * x + 0 * y, 90 + 60 * y + 0 * x, 180 + 60 * x * y]
    return Image.fromarray(np.stack(rgb, axis=-1).clip(0, 255).astype(np.uint8), "RGB")


def textured(width, height):
    """Smooth enough for two resizers to agree to a level, detailed enough that a pixel off
    shows."""
    x = np.arange(width, dtype=np.float64)[None, :]
    y = np.arange(height, dtype=np.float64)[:, None]
    rgb = [128 + 100 * np.sin(x / 9) * np.cos(y / 11), 128 + 90 * np.sin((x + y) / 13), 60 + 150 * x / width + 0 * y]
    return Image.fromarray(np.stack(rgb, axis=-1).clip(0, 255).astype(np.uint8), "RGB")


def encoded(image, fmt, **options):
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_of_zeros(width, height):
    """A grayscale PNG of zeros, its rows compressed as a stream: ~1000x smaller than its pixels."""
    compressor = zlib.compressobj(9)
    row = bytes(width + 1)
    idat = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def png_header_only(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(bytes(16))
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def jpeg_with_size(jpeg, width, height):
    """`jpeg` with its frame header claiming `width` x `height`."""
    data = bytearray(jpeg)
    at = 2
    while at < len(data):
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            data[at + 5:at + 9] = struct.pack(">HH", height, width)
            return bytes(data)
        at += 2 + length
    raise ValueError("no frame header")


def with_exif(jpeg, exif):
    """`jpeg` with an APP1 EXIF segment holding `exif` (a TIFF structure) after its SOI."""
    payload = b"Exif\0\0" + exif
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


def exif_orientation(value):
    ifd = struct.pack("<H", 1) + struct.pack("<HHII", 0x0112, 3, 1, value) + struct.pack("<I", 0)
    return b"II*\0" + struct.pack("<I", 8) + ifd


def exif_loop():
    """IFD0 claims 65535 entries and its next IFD is itself; an entry's value points back too."""
    ifd = struct.pack("<H", 0xFFFF) + struct.pack("<HHII", 0x8769, 4, 1, 8) * 4 + struct.pack("<I", 8)
    return b"II*\0" + struct.pack("<I", 8) + ifd


def gif_of_size(width, height):
    """A GIF whose logical screen claims `width` x `height`, holding one 1x1 frame."""
    screen = b"GIF89a" + struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\0\0\0\xff\xff\xff"
    frame = b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00"
    return screen + frame + b";"


def tiff_of_size(width, height):
    """A TIFF whose first page claims `width` x `height` RGB pixels, holding 16 bytes."""
    entries = [
        (256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1),
        (262, 3, 1, 2), (273, 4, 1, 8), (277, 3, 1, 3), (278, 4, 1, height), (279, 4, 1, 16),
    ]
    ifd_at = 8 + 16
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        ifd += struct.pack("<HHI", tag, kind, count) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
    return b"II*\0" + struct.pack("<I", ifd_at) + bytes(16) + ifd + struct.pack("<I", 0)


def make(folder):
    warm = gradient(640, 480)
    cool = gradient(500, 300, warm=False)
    jpeg = encoded(warm, "JPEG", quality=95)
    # Stored landscape, shown portrait (orientation 6: turn 90 degrees clockwise). Its top third
    # is red once turned, the rest blue; the centre crop sees the middle, so the orientation
    # decides the answer.
    portrait = Image.new("RGB", (200, 600), (30, 60, 220))
    portrait.paste((230, 20, 20), (0, 0, 200, 200))
    stored = portrait.transpose(Image.Transpose.ROTATE_90)
    rgba = cool.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize(cool.size))
    images = {
        "warm.jpg": jpeg,
        "cool.png": encoded(cool, "PNG"),
        "tall.png": encoded(textured(300, 500), "PNG"),
        "large.png": encoded(textured(1500, 1000), "PNG"),
        "gray.png": encoded(warm.convert("L"), "PNG"),
        "rgba.png": encoded(rgba, "PNG"),
        "palette.png": encoded(cool.convert("P", palette=Image.Palette.ADAPTIVE), "PNG"),
        "gray16.png": encoded(Image.fromarray((np.arange(300 * 200, dtype=np.uint16).reshape(200, 300) * 7)), "PNG"),
        "cmyk.jpg": encoded(warm.convert("CMYK"), "JPEG"),
        "oriented.jpg": with_exif(encoded(stored, "JPEG", quality=95), exif_orientation(6)),
        "exif_loop.jpg": with_exif(jpeg, exif_loop()),
        "zeros_3000.png": png_of_zeros(3000, 3000),
        "zeros_12000.png": png_of_zeros(12000, 12000),
        "huge.jpg": jpeg_with_size(jpeg, 60000, 60000),
        "huge.png": png_header_only(60000, 60000),
        "zero_width.png": png_header_only(0, 10),
        "truncated.jpg": jpeg[: len(jpeg) // 2],
        "corrupt.jpg": b"\xff\xd8\xff" + bytes((i * 73) % 256 for i in range(4000)) + b"\xff\xd9",
        "animation.gif": encoded(warm, "GIF"),
        # Formats beside JPEG and PNG: each decoded as Pillow opens it (a GIF's first frame).
        "warm.webp": encoded(warm, "WEBP", lossless=True),
        "cool.bmp": encoded(cool, "BMP"),
        "frames.gif": encoded(
            cool, "GIF", save_all=True, append_images=[warm.resize(cool.size)], duration=100, loop=0
        ),
        "cool.tiff": encoded(cool, "TIFF", compression="tiff_lzw"),
        "huge.gif": gif_of_size(65535, 65535),
        "huge.tiff": tiff_of_size(60000, 60000),
    }
    paths = {}
    for name, data in images.items():
        path = f"{folder}/{name}"
        with open(path, "wb") as out:
            out.write(data)
        paths[name] = path
    return paths


def bands(count):
    """The AC coefficients 1 to 63 in `count` (1 to 63) spectral bands."""
    edges = [1 + (63 * i) // count for i in range(count + 1)]
    return [(edges[i], edges[i + 1] - 1) for i in range(count)]


def scan_script(scans):
    """A cjpeg scan script of `scans` scans (4 to 190): the DC of every component, then each
    component's AC coefficients in spectral bands, the luminance's the finest."""
    rest = scans - 1
    luma = min(63, rest - 2)
    cb = (rest - luma) // 2
    cr = rest - luma - cb
    lines = ["0,1,2: 0-0, 0, 0;"]
    for component, count in ((0, luma), (1, cb), (2, cr)):
        lines += [f"{component}: {start}-{end}, 0, 0;" for start, end in bands(count)]
    return "\n".join(lines) + "\n"


def heavy(folder):
    """4000x3000 progressive JPEGs: 99 scans and 64 (past and at the budget of pixels x scans
    of an endpoint taking 48 MP images: 16 x 48 MP)."""
    import subprocess

    x = np.linspace(0, 255, 4000, dtype=np.float32)[None, :]
    y = np.linspace(0, 255, 3000, dtype=np.float32)[:, None]
    rgb = np.stack([x + 0 * y, y + 0 * x, (x + y) / 2], axis=-1).astype(np.uint8)
    ppm = f"{folder}/heavy.ppm"
    Image.fromarray(rgb).save(ppm)
    paths = {}
    for scans in (99, 64):
        script = f"{folder}/scans_{scans}.txt"
        with open(script, "w") as out:
            out.write(scan_script(scans))
        path = f"{folder}/progressive_{scans}.jpg"
        subprocess.run(["cjpeg", "-scans", script, "-outfile", path, ppm], check=True)
        paths[f"progressive_{scans}.jpg"] = path
    os.remove(ppm)
    return paths


def prototypes(classes=1000):
    k = np.arange(classes)
    rgb = np.stack([k % 10, k // 10 % 10, k // 100 % 10], axis=-1).astype(np.float32) * 28 + 2
    rgb /= 255.0
    return (rgb - MEAN) / STD


def resize_crop(path, resample, mode="RGB"):
    """The image at `path`, oriented and in `mode`, as torchvision's Resize(256, resample) and
    CenterCrop(224) make it."""
    image = ImageOps.exif_transpose(Image.open(path)).convert("RGB").convert(mode)
    width, height = image.size
    if width <= height:
        size = (256, int(256 * height / width))
    else:
        size = (int(256 * width / height), 256)
    image = image.resize(size, resample)
    left = int(round((size[0] - 224) / 2.0))
    top = int(round((size[1] - 224) / 2.0))
    return image.crop((left, top, left + 224, top + 224))


def expect(path, labels, protos):
    image = resize_crop(path, Image.Resampling.BILINEAR)
    tensor = (np.asarray(image, dtype=np.float32) / 255.0 - MEAN) / STD
    mean = tensor.reshape(-1, 3).mean(axis=0)
    scores = -((protos - mean) ** 2).sum(axis=1)
    scores = np.exp(scores - scores.max())
    scores /= scores.sum()
    best = sorted(range(len(scores)), key=lambda k: (-scores[k], k))[:5]
    return [[labels[k], float(scores[k])] for k in best]


def resampled(path, name):
    """What torchvision's Resize(256, interpolation) and CenterCrop(224) make of a PIL image,
    as Hugging Face's image processors run them too."""
    resample = {
        "bilinear": Image.Resampling.BILINEAR,
        "bicubic": Image.Resampling.BICUBIC,
        "lanczos": Image.Resampling.LANCZOS,
    }[name]
    image = resize_crop(path, resample)
    return np.asarray(image, dtype=np.uint8).reshape(-1).tolist()


def gray(path):
    """Grayscale first (Pillow's "L"), then torchvision's Resize(256) and CenterCrop(224)."""
    image = resize_crop(path, Image.Resampling.BILINEAR, "L")
    return np.asarray(image, dtype=np.uint8).reshape(-1).tolist()


def letterboxed(path, size):
    """ultralytics' LetterBox (auto=False, center=True, scaleup=True), written out: the scale
    that fits, each side rounded (Python's round), cv2.resize INTER_LINEAR, and margins of 114
    split with round(d -/+ 0.1)."""
    import cv2

    width, height = (int(n) for n in size.split("x"))
    rgb = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))
    h, w = rgb.shape[:2]
    r = min(height / h, width / w)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    dw, dh = (width - new_w) / 2, (height - new_h) / 2
    if (w, h) != (new_w, new_h):
        rgb = cv2.resize(rgb, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    boxed = cv2.copyMakeBorder(rgb, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    assert boxed.shape[:2] == (height, width), boxed.shape
    return boxed.reshape(-1).tolist()


def main():
    mode, argument = sys.argv[1].split(":", 1)
    request = json.load(sys.stdin)
    if mode == "make":
        sys.stdout.flush()
        print(json.dumps(make(argument)))
    elif mode == "heavy":
        print(json.dumps(heavy(argument)))
    elif mode == "gray":
        print(json.dumps([gray(path) for path in request]))
    elif mode == "letterboxed":
        print(json.dumps([letterboxed(path, argument) for path in request]))
    elif mode == "resampled":
        print(json.dumps([resampled(path, argument) for path in request]))
    else:
        labels = open(argument).read().splitlines()
        protos = prototypes(len(labels))
        print(json.dumps([expect(path, labels, protos) for path in request]))


main()
