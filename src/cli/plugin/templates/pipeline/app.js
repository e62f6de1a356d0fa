// {{name}}: a trident pipeline, a plugin that answers a request whole by calling the
// endpoint's models. The body, a JSON array of numbers, goes to the model named by the `model`
// config (default `affine`, which the manifest entry's `models` must name) as `INPUT0`, FP32
// `[1, n]`; the reply is the model's FP32 outputs as JSON, `{"OUTPUT0": [...]}`. A model's
// refusal is passed on with its status. Call more models, or one in a loop, from `handle`; see
// trident's book, docs/plugins/pipelines.md.

import { config } from "trident:plugin/host@0.1.0";
import { infer } from "trident:models/models@0.1.0";

// The status each kind of model refusal is passed on with.
const STATUS = { "not-allowed": 403, "bad-request": 400, "unavailable": 503, "failed": 500 };

// QuickJS has no TextEncoder or TextDecoder: UTF-8 through the URI functions.
function utf8(bytes) {
  let latin1 = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    latin1 += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return decodeURIComponent(escape(latin1));
}

function encoded(text) {
  const latin1 = unescape(encodeURIComponent(text));
  return Uint8Array.from(latin1, (c) => c.charCodeAt(0));
}

function reply(status, value) {
  return { status, contentType: "application/json", headers: [], body: encoded(JSON.stringify(value)) };
}

function numbers(body) {
  let values;
  try {
    values = JSON.parse(utf8(body));
  } catch {
    values = null;
  }
  if (!Array.isArray(values) || values.length === 0 || !values.every((v) => typeof v === "number" && Number.isFinite(v))) {
    throw { tag: "bad-request", val: "send a JSON array of numbers" };
  }
  return values;
}

export const lifecycle = {
  // Called once for each instance: throw "why" to refuse the configuration. Read every config
  // key here: trident refuses a key check-config did not read.
  checkConfig() {
    config("model");
  },
};

export const pipeline = {
  handle(invocation) {
    const values = numbers(invocation.body);
    const model = config("model") ?? "affine";
    const input = {
      name: "INPUT0",
      datatype: "fp32",
      shape: [1, values.length],
      data: new Uint8Array(new Float32Array(values).buffer),
    };
    let response;
    try {
      response = infer({ model, inputs: [input], outputs: [] });
    } catch (error) {
      // The model's refusal: { tag: "not-allowed" | "bad-request" | "unavailable" | "failed", val }.
      const refusal = error && error.payload ? error.payload : error;
      return reply(STATUS[refusal.tag] ?? 500, { error: `model '${model}': ${refusal.val}` });
    }
    const outputs = {};
    for (const output of response.outputs) {
      if (output.datatype === "fp32") {
        const data = output.data;
        outputs[output.name] = Array.from(new Float32Array(data.buffer, data.byteOffset, data.byteLength / 4));
      }
    }
    return reply(200, outputs);
  },
};
