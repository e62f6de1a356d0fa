//! Guests for wasmtime's own advisories (the 50.0.2 release's; the note on issue 36 lists each
//! with whether trident is exposed): each is refused when the plugin loads, and the process that
//! loads it carries on (an abort would end this test binary). Written in WebAssembly text:
//! no Rust guest can express them.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] =
    checks![guests_for_wasmtime_advisories_are_refused_at_load,];

/// GHSA-rc4p-x33f-vpr2: a `call_indirect` through a non-final (subtypable) function type, in
/// the lifecycle's `check-config`, which runs at load. In a wasmtime without its `gc` feature
/// before 50.0.2 this aborted the process; trident's engine has no GC proposal, so the
/// component does not compile.
const SUBTYPED_CALL: &str = r#"
(component
  (core module $m
    (type $t (sub (func)))
    (type $u (func (param i32)))
    (memory (export "memory") 1)
    (table 1 funcref)
    (elem (i32.const 0) func $victim)
    (func $victim (type $u))
    (func $boom (call_indirect (type $t) (i32.const 0)))
    (func (export "check-config") (result i32) (call $boom) (i32.const 0))
    (func (export "is-oom") (param i32 i32) (result i32) (call $boom) (i32.const 0))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (func $check (result (result (error string)))
    (canon lift (core func $i "check-config") (memory (core memory $i "memory")) (realloc (core func $i "realloc"))))
  (func $oom (param "message" string) (result bool)
    (canon lift (core func $i "is-oom") (memory (core memory $i "memory")) (realloc (core func $i "realloc"))))
  (instance $lc (export "check-config" (func $check)))
  (instance $oc (export "is-out-of-memory" (func $oom)))
  (export "trident:plugin/lifecycle@0.1.0" (instance $lc))
  (export "trident:plugin/oom-classifier@0.1.0" (instance $oc)))
"#;

/// GHSA-2674-w29h-wqvj: shared memory and atomics, which aborted a wasmtime without its
/// `threads` feature once enabled; trident never enables them.
const ATOMICS: &str = r#"
(component
  (core module $m
    (memory 1 1 shared)
    (func (export "f") (result i32) (memory.atomic.notify (i32.const 0) (i32.const 1))))
  (core instance (instantiate $m)))
"#;

/// GHSA-xrvr-8678-5wp8: a stream of the component model's async ABI, whose cancellation on the
/// wrong end panicked the host; trident builds wasmtime without `component-model-async`.
const ASYNC_STREAM: &str = r#"
(component
  (type $s (stream u8))
  (core func $new (canon stream.new $s)))
"#;

fn guests_for_wasmtime_advisories_are_refused_at_load(f: &Fixture) -> Result<(), Failed> {
    let dir = f.manifests.path();
    let load = |name: &str, wasm: &Path| -> Result<(), String> {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!("oom = \"{name}\"\n{}", plugin_at(name, wasm, "")),
        )
        .unwrap();
        let manifest = Manifest::load(&path).map_err(|e| e.to_string())?;
        f.runtime
            .block_on(PluginHost::load(&manifest))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for (name, text, expected) in [
        (
            "subtyped_call",
            SUBTYPED_CALL,
            "gc proposal must be enabled",
        ),
        ("atomics", ATOMICS, "threads must be enabled"),
        (
            "async_stream",
            ASYNC_STREAM,
            "requires the component model async feature",
        ),
    ] {
        let wasm = dir.join(format!("{name}.wasm"));
        std::fs::write(
            &wasm,
            wat::parse_str(text).map_err(|e| format!("{name}: {e}"))?,
        )?;
        let error = load(name, &wasm).err().ok_or(format!("{name} loaded"))?;
        ensure!(error.contains(expected), "{name}: {error}");
    }
    // The process that refused them loads and serves a plugin as before.
    let good = dir.join("good.toml");
    std::fs::write(&good, plugin("csv", "csv_request", ""))?;
    f.runtime
        .block_on(PluginHost::load(&Manifest::load(&good)?))
        .map_err(|e| format!("after the hostile guests: {e}"))?;
    Ok(())
}
