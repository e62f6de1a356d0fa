// {{name}}: a trident request adapter. A body of numbers separated by commas or white space
// becomes one FP32 tensor of shape `[1, n]`, named by the `input` config (default `INPUT0`).
// Change `adaptRequest` to read your payload; see trident's book, docs/plugins/writing.md.

import { config } from "trident:plugin/host@0.1.0";

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

export const lifecycle = {
  // Called once when trident loads the plugin: throw "why" to refuse the configuration. Read
  // every config key here: trident refuses a key check-config did not read (a misspelling).
  checkConfig() {
    config("input");
  },
};

export const requestAdapter = {
  adaptRequest(invocation) {
    // QuickJS has no TextDecoder; numbers are ASCII, so anything else is refused below.
    const text = String.fromCharCode(...invocation.body);
    const fields = text.split(/[,\s]+/).filter((field) => field);
    const values = fields.map((field) => {
      if (!NUMBER.test(field)) throw { tag: "bad-request", val: `'${field}' is not a number` };
      return Number(field);
    });
    if (values.length === 0) throw { tag: "bad-request", val: "the body has no numbers" };
    const data = new Uint8Array(values.length * 4);
    const view = new DataView(data.buffer);
    values.forEach((value, i) => view.setFloat32(i * 4, value, true));
    const tensor = { name: config("input") ?? "INPUT0", datatype: "fp32", shape: [1, values.length], data };
    return { tag: "tensors", val: { inputs: [tensor], outputs: [] } };
  },
};
