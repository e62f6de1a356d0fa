"""The ONNX side of tests/onnx_models.rs, with ONNX's and ONNX Runtime's own Python packages.

  onnx_models.py build:DIR      writes the tests' small models into DIR (each DIR/<name>.onnx):
                                `types`: one Identity per type the backend carries (FP32, FP16,
                                INT8, INT32, INT64, BOOL, STRING), batchable; `unknown_op`: a
                                node whose operator no runtime has; `external.onnx` with its
                                weights in `weights.bin` beside it (y = x + [0, 1, 2, 3]), and
                                `escape.onnx`, whose weights are named `../weights.bin`;
                                `spin.onnx`: y = x + n, one Loop iteration per unit of `n`
                                (INT64 [1]: a client's n of 10^15 computes for days).
  onnx_models.py resnet50:FILE  writes ResNet-50 (He et al. 2015, torchvision's layout: 7x7 stem,
                                bottlenecks [3, 4, 6, 3], batch norm folded into the convolutions,
                                1000 classes) with seeded random weights: input `input`
                                [N, 3, 224, 224], output `logits` [N, 1000]. torch's Linux wheels
                                are CUDA builds (2.8 GiB with their dependencies), so the graph is
                                written with `onnx`'s helpers instead of torch.onnx.export.
  onnx_models.py bert:FILE      writes a BERT-base-sized encoder (12 layers, hidden 768, 12 heads,
                                feed-forward 3072, a 30522-word vocabulary, 512 positions; about
                                110 M weights, seeded): inputs `input_ids` and `attention_mask`,
                                INT64 [N, S]; output `last_hidden_state` [N, S, 768].
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

    np.arange(4, dtype=np.float32).tofile(os.path.join(folder, "weights.bin"))
    for file, location in [("external.onnx", "weights.bin"), ("escape.onnx", "../weights.bin")]:
        weights = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4],
                                   data_location=TensorProto.EXTERNAL)
        entry = weights.external_data.add()
        entry.key, entry.value = "location", location
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
        graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "external", [x], [y], [weights])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        with open(os.path.join(folder, file), "wb") as out:
            out.write(model.SerializeToString())

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    graph = helper.make_graph(
        [helper.make_node("Squeeze", ["n"], ["trips"]),
         helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        "spin",
        [helper.make_tensor_value_info("n", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(folder, "spin.onnx"))


def resnet50(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(50)
    nodes, weights = [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def conv(x, cin, cout, k, stride, relu=True):
        w, b, y = name("w"), name("b"), name("conv")
        # He initialisation keeps activations in range through 50 layers.
        weights.append(numpy_helper.from_array(
            (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)) * 0.5).astype(np.float32), w))
        weights.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.01).astype(np.float32), b))
        nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))
        if not relu:
            return y
        out = name("relu")
        nodes.append(helper.make_node("Relu", [y], [out]))
        return out

    x = conv("input", 3, 64, 7, 2)
    pooled = name("pool")
    nodes.append(helper.make_node("MaxPool", [x], [pooled], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = pooled, 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for block in range(blocks):
            s = stride if block == 0 else 1
            y = conv(x, cin, width, 1, 1)
            y = conv(y, width, width, 3, s)
            y = conv(y, width, width * 4, 1, 1, relu=False)
            shortcut = conv(x, cin, width * 4, 1, s, relu=False) if block == 0 else x
            added, out = name("add"), name("relu")
            nodes.append(helper.make_node("Add", [y, shortcut], [added]))
            nodes.append(helper.make_node("Relu", [added], [out]))
            x, cin = out, width * 4
    gap, flat = name("gap"), name("flat")
    nodes.append(helper.make_node("GlobalAveragePool", [x], [gap]))
    nodes.append(helper.make_node("Flatten", [gap], [flat], axis=1))
    weights.append(numpy_helper.from_array((rng.standard_normal((1000, 2048)) * 0.02).astype(np.float32), "fc_w"))
    weights.append(numpy_helper.from_array(np.zeros(1000, np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", [flat, "fc_w", "fc_b"], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes, "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def bert(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(110)
    hidden, heads, layers, ffn, vocab, positions = 768, 12, 12, 3072, 30522, 512
    nodes, weights = [], []

    def weight(name, shape, scale=0.02):
        weights.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def constant(name, value):
        weights.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, output, **attributes):
        nodes.append(helper.make_node(op, inputs, [output], **attributes))
        return output

    def layer_norm(x, prefix):
        gamma = constant(f"{prefix}.gamma", np.ones(hidden, np.float32))
        beta = constant(f"{prefix}.beta", np.zeros(hidden, np.float32))
        return node("LayerNormalization", [x, gamma, beta], f"{prefix}.out", axis=-1, epsilon=1e-12)

    def dense(x, prefix, cin, cout):
        product = node("MatMul", [x, weight(f"{prefix}.w", (cin, cout))], f"{prefix}.mm")
        return node("Add", [product, constant(f"{prefix}.b", np.zeros(cout, np.float32))], f"{prefix}.out")

    # Embeddings: words plus positions 0..S-1, normalised.
    words = node("Gather", [weight("embeddings.words", (vocab, hidden)), "input_ids"], "embeddings.w")
    shape = node("Shape", ["input_ids"], "ids.shape")
    length = node("Gather", [shape, constant("one", np.array(1, np.int64))], "ids.length")
    ids = node("Range", [constant("zero", np.array(0, np.int64)), length, constant("step", np.array(1, np.int64))],
               "positions")
    position = node("Gather", [weight("embeddings.positions", (positions, hidden)), ids], "embeddings.p")
    x = layer_norm(node("Add", [words, position], "embeddings.sum"), "embeddings.norm")
    # The mask as an additive bias: 0 where attended, -10000 where padded, [N, 1, 1, S].
    mask = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inverted = node("Sub", [constant("mask.one", np.array(1.0, np.float32)), mask], "mask.inv")
    bias = node("Mul", [inverted, constant("mask.big", np.array(-10000.0, np.float32))], "mask.bias")
    bias = node("Unsqueeze", [bias, constant("mask.axes", np.array([1, 2], np.int64))], "mask.4d")
    split = constant("heads.shape", np.array([0, 0, heads, hidden // heads], np.int64))
    merge = constant("merge.shape", np.array([0, 0, hidden], np.int64))
    scale = constant("scale", np.array(1.0 / np.sqrt(hidden // heads), np.float32))
    for i in range(layers):
        p = f"layer{i}"

        def heads_of(name):
            projected = dense(x, f"{p}.{name}", hidden, hidden)
            reshaped = node("Reshape", [projected, split], f"{p}.{name}.split")
            return node("Transpose", [reshaped], f"{p}.{name}.heads", perm=[0, 2, 1, 3])

        q, k, v = heads_of("q"), heads_of("k"), heads_of("v")
        kt = node("Transpose", [k], f"{p}.kt", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [q, kt], f"{p}.qk"), scale], f"{p}.scaled")
        probabilities = node("Softmax", [node("Add", [scores, bias], f"{p}.masked")], f"{p}.p", axis=-1)
        context = node("Transpose", [node("MatMul", [probabilities, v], f"{p}.ctx")], f"{p}.ctx.t",
                       perm=[0, 2, 1, 3])
        context = node("Reshape", [context, merge], f"{p}.ctx.merged")
        attended = dense(context, f"{p}.o", hidden, hidden)
        x = layer_norm(node("Add", [attended, x], f"{p}.res1"), f"{p}.norm1")
        up = dense(x, f"{p}.up", hidden, ffn)
        # GELU, as BERT has it: x * (1 + erf(x / sqrt 2)) / 2.
        erf = node("Erf", [node("Div", [up, constant(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))],
                                f"{p}.scaled.up")], f"{p}.erf")
        gelu = node("Mul", [node("Mul", [up, node("Add", [erf, constant(f"{p}.one", np.array(1.0, np.float32))],
                                                   f"{p}.erf1")], f"{p}.gx"),
                            constant(f"{p}.half", np.array(0.5, np.float32))], f"{p}.gelu")
        down = dense(gelu, f"{p}.down", ffn, hidden)
        x = layer_norm(node("Add", [down, x], f"{p}.res2"), f"{p}.norm2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes, "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


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
    if argument.startswith(("resnet50:", "bert:")):
        builder, path = argument.split(":", 1)
        {"resnet50": resnet50, "bert": bert}[builder](path)
        json.dump({"built": path}, sys.stdout)
    elif argument.startswith("build:"):
        folder = argument[len("build:"):]
        build(folder)
        json.dump({"built": sorted(os.listdir(folder))}, sys.stdout)
    else:
        run(argument)
