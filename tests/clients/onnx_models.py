"""The ONNX side of tests/onnx_models.rs, with ONNX's and ONNX Runtime's own Python packages.

  onnx_models.py build:DIR      writes the tests' small models into DIR (each DIR/<name>.onnx):
                                `types`: one Identity per type the backend carries (FP32, FP16,
                                INT8, INT32, INT64, BOOL, STRING), batchable; `unknown_op`: a
                                node whose operator no runtime has.
  onnx_models.py MODEL          reads {"inputs": {name: {"dtype", "shape", "b64"}}} on stdin,
                                runs MODEL in an onnxruntime.InferenceSession (the reference
                                every output of trident's backend is compared with) and prints
                                {"outputs": {name: {"dtype", "shape", "b64"}}} (raw little-endian
                                bytes; strings as a JSON list instead of b64).
"""

import base64
import json
import os
import sys

import numpy as np

TYPES = {
    "FP32": np.float32,
    "FP16": np.float16,
    "INT8": np.int8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
}


def build(folder):
    import onnx
    from onnx import TensorProto, helper

    onnx_types = {
        "FP32": TensorProto.FLOAT,
        "FP16": TensorProto.FLOAT16,
        "INT8": TensorProto.INT8,
        "INT32": TensorProto.INT32,
        "INT64": TensorProto.INT64,
        "BOOL": TensorProto.BOOL,
        "STRING": TensorProto.STRING,
    }
    inputs, outputs, nodes = [], [], []
    for name, kind in onnx_types.items():
        inputs.append(helper.make_tensor_value_info(f"in_{name}", kind, ["batch", 3]))
        outputs.append(helper.make_tensor_value_info(f"out_{name}", kind, ["batch", 3]))
        nodes.append(helper.make_node("Identity", [f"in_{name}"], [f"out_{name}"]))
    graph = helper.make_graph(nodes, "types", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(folder, "types.onnx"))

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    node = helper.make_node("NoSuchOperator", ["x"], ["y"])
    graph = helper.make_graph([node], "unknown_op", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(folder, "unknown_op.onnx"))


def run(model):
    import onnxruntime

    request = json.load(sys.stdin)
    feeds = {}
    for name, tensor in request["inputs"].items():
        if tensor["dtype"] == "BYTES":
            feeds[name] = np.array(tensor["strings"], dtype=object).reshape(tensor["shape"])
        else:
            data = base64.b64decode(tensor["b64"])
            feeds[name] = np.frombuffer(data, dtype=TYPES[tensor["dtype"]]).reshape(tensor["shape"])
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    outputs = {}
    for name, value in zip(names, results):
        if value.dtype == object:
            outputs[name] = {"dtype": "BYTES", "shape": list(value.shape),
                             "strings": [str(v) for v in value.reshape(-1)]}
        else:
            dtype = next(k for k, v in TYPES.items() if np.dtype(v) == value.dtype)
            outputs[name] = {"dtype": dtype, "shape": list(value.shape),
                             "b64": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()}
    json.dump({"outputs": outputs}, sys.stdout)


if __name__ == "__main__":
    argument = sys.argv[1]
    if argument.startswith("build:"):
        folder = argument[len("build:"):]
        build(folder)
        json.dump({"built": sorted(os.listdir(folder))}, sys.stdout)
    else:
        run(argument)
