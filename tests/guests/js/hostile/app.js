// A hostile JavaScript guest; the request body picks how it misbehaves:
// - `loop`: never returns (its time limit must stop it);
// - `hog`: allocates until something gives (its memory limit must stop it);
// - `throw`: throws an `Error`, which the bindings turn into a trap;
// - anything else: counts its calls and remembers every body in module state, and refuses the
//   request with what it counted. checkConfig starts the count at 100 (the state every call
//   starts from), so a fresh instance per call always says `calls=101 seen=1`.

let calls = 0;
const seen = [];

export const lifecycle = {
  checkConfig() {
    calls = 100;
  },
};

export const requestAdapter = {
  adaptRequest(invocation) {
    const body = String.fromCharCode(...invocation.body).trim();
    if (body === "loop") {
      for (;;) {}
    }
    if (body === "hog") {
      const kept = [];
      for (;;) kept.push(new Array(1 << 16).fill(kept.length));
    }
    if (body === "throw") {
      throw new Error("hostile: thrown on purpose");
    }
    calls += 1;
    seen.push(body);
    throw { tag: "bad-request", val: `count: calls=${calls} seen=${seen.length}` };
  },
};
