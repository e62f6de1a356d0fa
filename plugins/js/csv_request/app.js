// CSV request adapter in JavaScript: `text/csv` rows of numbers become one `[rows, columns]`
// tensor, handed to the model as typed data. The same behaviour as the Rust `csv-request` and
// the Python `csv_request` examples.
//
// Config (manifest `config` table): `input` (tensor name, default `INPUT0`), `datatype` (`FP32`
// default, or `FP64`, `INT32`, `INT64`), `outputs` (comma-separated output names to ask for;
// default all), `header` (`true` when the first line is a header to skip).
//
// Build: componentize-qjs --wit wit --js plugins/js/csv_request/app.js \
//            --world request-adapter-plugin --sync --output csv_request_js.wasm

import { config, log } from "trident:plugin/host@0.1.0";

// A decimal number as Rust's and Python's parsers read one (no hex, no empty field).
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const SPECIAL = /^[+-]?(inf|infinity|nan)$/i;
const INTEGER = /^[+-]?\d+$/;

// Element type -> the WIT enum case, bytes per element, and how a field is parsed and stored.
const DATATYPES = {
  FP32: { wit: "fp32", size: 4, parse: float, store: (view, at, v) => view.setFloat32(at, v, true) },
  FP64: { wit: "fp64", size: 8, parse: float, store: (view, at, v) => view.setFloat64(at, v, true) },
  INT32: {
    wit: "int32",
    size: 4,
    parse: (field) => integer(field, -(2n ** 31n), 2n ** 31n - 1n),
    store: (view, at, v) => view.setInt32(at, Number(v), true),
  },
  INT64: {
    wit: "int64",
    size: 8,
    parse: (field) => integer(field, -(2n ** 63n), 2n ** 63n - 1n),
    store: (view, at, v) => view.setBigInt64(at, v, true),
  },
};

function float(field) {
  if (DECIMAL.test(field)) return Number(field);
  if (SPECIAL.test(field)) return /nan/i.test(field) ? NaN : field.startsWith("-") ? -Infinity : Infinity;
  return undefined;
}

function integer(field, min, max) {
  if (!INTEGER.test(field)) return undefined;
  const value = BigInt(field);
  return value < min || value > max ? undefined : value;
}

// QuickJS has no `TextDecoder`: the body's text, or undefined when the bytes are not UTF-8
// (overlong forms, surrogates and code points past U+10FFFF are not).
function utf8(bytes) {
  let text = "";
  let points = [];
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i];
    let point;
    let length;
    if (lead < 0x80) [point, length] = [lead, 1];
    else if (lead >= 0xc2 && lead < 0xe0) [point, length] = [lead & 0x1f, 2];
    else if (lead >= 0xe0 && lead < 0xf0) [point, length] = [lead & 0x0f, 3];
    else if (lead >= 0xf0 && lead < 0xf5) [point, length] = [lead & 0x07, 4];
    else return undefined;
    if (i + length > bytes.length) return undefined;
    for (let k = 1; k < length; k++) {
      const next = bytes[i + k];
      if ((next & 0xc0) !== 0x80) return undefined;
      point = (point << 6) | (next & 0x3f);
    }
    const overlong = (length === 3 && point < 0x800) || (length === 4 && point < 0x10000);
    if (overlong || (point >= 0xd800 && point < 0xe000) || point > 0x10ffff) return undefined;
    points.push(point);
    if (points.length === 4096) {
      text += String.fromCodePoint(...points);
      points = [];
    }
    i += length;
  }
  return text + String.fromCodePoint(...points);
}

// An error the host reports with its status: `bad-request` (400), `unsupported-media-type`
// (415) or `internal` (500). A thrown value that is not an `Error` becomes the call's `err`.
function refuse(tag, message) {
  throw { tag, val: message };
}

function datatype() {
  const name = config("datatype") ?? "FP32";
  const found = DATATYPES[name];
  if (!found) throw `datatype '${name}' is not supported (FP32, FP64, INT32, INT64)`;
  return [name, found];
}

export const lifecycle = {
  checkConfig() {
    // Every key this plugin reads is read here: trident refuses a key check-config did not
    // read, so a misspelled one fails the load instead of leaving its default serving.
    for (const key of ["input", "outputs", "header"]) config(key);
    datatype();
  },
};

export const requestAdapter = {
  adaptRequest(invocation) {
    const contentType = invocation.contentType ?? "text/csv";
    if (!contentType.startsWith("text/csv")) {
      refuse("unsupported-media-type", `this endpoint takes text/csv, not ${contentType}`);
    }
    let name, dtype;
    try {
      [name, dtype] = datatype();
    } catch (message) {
      refuse("internal", message);
    }
    const text = utf8(invocation.body);
    if (text === undefined) refuse("bad-request", "the CSV body is not UTF-8");
    const values = [];
    let rows = 0;
    let columns;
    const lines = text.split(/\r\n|\n|\r/);
    const skip = config("header") === "true" ? 1 : 0;
    for (let index = skip; index < lines.length; index++) {
      const line = lines[index].trim();
      if (!line) continue;
      const fields = line.split(",").map((field) => field.trim());
      for (const field of fields) {
        const value = dtype.parse(field);
        if (value === undefined) {
          refuse("bad-request", `line ${index + 1}: '${field}' is not a valid ${name} number`);
        }
        values.push(value);
      }
      if (columns === undefined) {
        columns = fields.length;
      } else if (columns !== fields.length) {
        refuse("bad-request", `line ${index + 1} has ${fields.length} fields, the first row has ${columns}`);
      }
      rows += 1;
    }
    if (columns === undefined) refuse("bad-request", "the CSV body has no rows");
    const data = new Uint8Array(values.length * dtype.size);
    const view = new DataView(data.buffer);
    values.forEach((value, i) => dtype.store(view, i * dtype.size, value));
    log("debug", `${rows}x${columns} CSV for ${invocation.model}`);
    const outputs = (config("outputs") ?? "")
      .split(",")
      .map((output) => output.trim())
      .filter((output) => output);
    const tensor = {
      name: config("input") ?? "INPUT0",
      datatype: dtype.wit,
      shape: [rows, columns],
      data,
    };
    return { tag: "tensors", val: { inputs: [tensor], outputs } };
  },
};
