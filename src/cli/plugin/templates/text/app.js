// {{name}}: a trident request adapter for text. The body (UTF-8 text) becomes the tensors a
// transformer takes, `input_ids`, `attention_mask` and `token_type_ids`, made by trident's native
// text primitives (`tokenize`) with the model's `tokenizer.json` (the asset `tokenizer`) and the
// tokenize plugin's configuration keys (defaults: 512 tokens, padded and truncated, INT64, a
// batch dimension). Add your own steps around it; see trident's book, docs/plugins/writing.md.

import { config } from "trident:plugin/host@0.1.0";
import { tokenize } from "trident:plugin/text@0.1.0";

// The configuration keys handed to tokenize (see docs/plugins/images-and-text.md, "Text in, text out").
const KEYS = ["max_length", "padding", "truncation", "add_special_tokens", "datatype", "batch", "pad_token",
  "max_text_bytes", "max_texts"];

let settings = [];

// QuickJS has no TextDecoder: the body decoded as UTF-8 by the URI functions, which throw on
// bytes that are not.
function utf8(bytes) {
  let latin1 = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    latin1 += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return decodeURIComponent(escape(latin1));
}

export const lifecycle = {
  // Called once for each instance (JavaScript components are not snapshotted): throw "why" to
  // refuse the configuration.
  checkConfig() {
    settings = KEYS.flatMap((key) => {
      const value = config(key);
      return value == null ? [] : [[key, value]];
    });
  },
};

export const requestAdapter = {
  adaptRequest(invocation) {
    let body;
    try {
      body = utf8(invocation.body);
    } catch {
      throw { tag: "bad-request", val: "the body is not UTF-8" };
    }
    // A text too long throws its { tag, val } error, which answers the request.
    const tensors = tokenize("tokenizer", [body], settings);
    return { tag: "tensors", val: { inputs: tensors, outputs: [] } };
  },
};
