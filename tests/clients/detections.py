"""The reference for the detection-boxes plugin: a YOLOv8 detector's raw output post-processed
as ultralytics' predictor does it, with OpenCV's own non-maximum suppression
(cv2.dnn.NMSBoxesBatched: per class) and ultralytics' scale_boxes arithmetic written out.

Usage: detections.py photos:DIR   (stdin: {"model": path})  draws the test photos into DIR and
                                  writes the model's class names (its ONNX metadata) to
                                  DIR/labels.txt; prints {"photos": [path, ...], "labels": path}
       detections.py expect:MODEL (stdin: {"tensor": {"shape", "data"}, "photo": [w, h],
                                  "size": [w, h], "confidence", "iou", "max_detections"})
                                  runs MODEL on the tensor (ONNX Runtime) and prints the
                                  detections: [{"class", "score", "box": [x1, y1, x2, y2]}, ...]
"""

import ast
import json
import os
import sys

import cv2
import numpy as np
import onnx
import onnxruntime
from PIL import Image, ImageDraw


def photos(folder, model):
    names = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}["names"]
    names = ast.literal_eval(names)
    labels = os.path.join(folder, "labels.txt")
    with open(labels, "w") as f:
        f.write("".join(names[i] + "\n" for i in range(len(names))))
    paths = []
    # Faces drawn on a background, at several sizes and aspect ratios (a landscape enlarged, a
    # portrait, a photo shrunk): what the detector scores is real output either way.
    for width, height, faces in [(640, 480, 1), (300, 500, 2), (1500, 1000, 3)]:
        image = Image.new("RGB", (width, height), (120, 160, 200))
        draw = ImageDraw.Draw(image)
        for i in range(faces):
            w = width // (faces + 1)
            x = (i + 0.5) * width / faces - w / 2
            y, h = height * 0.2, w * 1.3
            draw.ellipse((x, y, x + w, y + h), fill=(230, 190, 160))
            for eye in (0.3, 0.6):
                ex, ey = x + eye * w, y + 0.35 * h
                draw.ellipse((ex, ey, ex + 0.12 * w, ey + 0.1 * h), fill=(40, 30, 20))
            draw.arc((x + 0.3 * w, y + 0.6 * h, x + 0.7 * w, y + 0.8 * h), 0, 180, fill=(150, 50, 50), width=max(2, w // 30))
        path = os.path.join(folder, f"faces_{width}x{height}.png")
        image.save(path)
        paths.append(path)
    return {"photos": paths, "labels": labels}


def expect(model, request):
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    tensor = np.asarray(request["tensor"]["data"], dtype=np.float32).reshape(request["tensor"]["shape"])
    output = session.run(None, {session.get_inputs()[0].name: tensor})[0][0]
    candidates = output.T  # [candidates, 4 + classes]
    scores = candidates[:, 4:].max(axis=1)
    classes = candidates[:, 4:].argmax(axis=1)
    keep = scores > request["confidence"]
    boxes = [[float(cx - w / 2), float(cy - h / 2), float(w), float(h)] for cx, cy, w, h in candidates[keep, :4]]
    scores, classes = scores[keep].tolist(), classes[keep].tolist()
    order = cv2.dnn.NMSBoxesBatched(boxes, scores, classes, request["confidence"], request["iou"])
    order = sorted(np.asarray(order).reshape(-1).tolist(), key=lambda i: -scores[i])[: request["max_detections"]]
    # ultralytics' scale_boxes: the letterbox's gain and margins, then clipped to the photo.
    (iw, ih), (pw, ph) = request["size"], request["photo"]
    gain = min(ih / ph, iw / pw)
    pad_x, pad_y = round((iw - pw * gain) / 2 - 0.1), round((ih - ph * gain) / 2 - 0.1)
    found = []
    for i in order:
        x, y, w, h = boxes[i]
        corners = [(x - pad_x) / gain, (y - pad_y) / gain, (x + w - pad_x) / gain, (y + h - pad_y) / gain]
        corners = [min(max(v, 0), side) for v, side in zip(corners, [pw, ph, pw, ph])]
        found.append({"class": classes[i], "score": scores[i], "box": corners})
    return found


def main():
    mode, argument = sys.argv[1].split(":", 1)
    request = json.load(sys.stdin)
    if mode == "photos":
        print(json.dumps(photos(argument, request["model"])))
    else:
        print(json.dumps(expect(argument, request)))


main()
