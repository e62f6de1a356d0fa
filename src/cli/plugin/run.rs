//! `trident plugin run`: one hook of one plugin, without Triton or a model, through the code
//! path the server uses (the plugin's digest, its configuration check, a fresh instance, the
//! same memory and time limits), printing what it returns. For authors iterating on a plugin.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::engine::{InferRequest, InferResponse, OutputTensor};
use crate::plugins::host::PluginHost;
use crate::plugins::platform::cases::outcome::{
    answered, inputs_json, output_tensors, refusal_line, responses,
};
use crate::plugins::platform::loading::sha256_hex;
use crate::plugins::platform::manifest::Manifest;
use crate::plugins::platform::plugin::LoadedPlugin;
use crate::plugins::{
    AdaptedRequest, GenerateInputs, HookResult, PluginInvocation, PluginReply, StreamPosition,
};
use crate::protocol::v2_request::decode_infer_request;

/// Which hook to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Hook {
    /// The request adapter.
    Request,
    /// The response adapter, on `--outputs` (the model's outputs).
    Response,
    /// 0.2.0: the generate request adapter.
    GenerateRequest,
    /// 0.2.0: the generate response adapter, on `--outputs` (the model's responses).
    GenerateResponse,
    /// 0.2.0: the stream adapter, once per response of `--outputs` and once at the end.
    Stream,
}

/// What to call the hook with.
pub struct RunOptions<'a> {
    /// The plugin's `.wasm` file.
    pub plugin: &'a Path,
    /// The hook to call.
    pub hook: Hook,
    /// The request body the plugin sees.
    pub body: Vec<u8>,
    /// The request's Content-Type, as the plugin sees it.
    pub content_type: Option<String>,
    /// The request's Accept, as the plugin sees it.
    pub accept: Option<String>,
    /// For the response hook: the model's outputs, as a KServe v2 response (`{"outputs": [...]}`).
    pub outputs: Option<Vec<u8>>,
    /// The manifest's `config` table for the plugin.
    pub config: BTreeMap<String, String>,
    /// The linear memory the call may use, in MiB (the manifest's `memory_limit_mb`).
    pub memory_limit_mb: u64,
    /// How long the call may run, in milliseconds (the manifest's `time_limit_ms`).
    pub time_limit_ms: u64,
    /// The plugin's assets, by name: the files it reads (the manifest's `assets`).
    pub assets: BTreeMap<String, std::path::PathBuf>,
}

/// The model name the invocation carries.
const MODEL: &str = "model";

/// Runs the hook and writes its result to `out`; `Err` (the message and the HTTP status a
/// client would get) when loading or the call fails or the plugin refuses.
pub fn run(options: RunOptions<'_>, out: &mut impl Write) -> Result<(), String> {
    let manifest = manifest(&options)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let host = PluginHost::load(&manifest)
            .await
            .map_err(|e| e.to_string())?;
        let selection = host.select(MODEL, None, None).ok_or("no plugin selected")?;
        let invocation = crate::invocation::Invocation {
            content_type: options.content_type.clone(),
            accept: options.accept.clone(),
            ..Default::default()
        };
        let wit = PluginInvocation::new(
            "/invocations",
            MODEL,
            &invocation,
            &http::HeaderMap::new(),
            &[],
            &options.body,
            None,
        );
        match options.hook {
            Hook::Request => {
                let plugin = selection
                    .request
                    .ok_or("the plugin does not export request-adapter")?;
                request_hook(&host, &plugin, &wit, out).await
            }
            Hook::Response => {
                let plugin = selection
                    .response
                    .ok_or("the plugin does not export response-adapter")?;
                let outputs = options
                    .outputs
                    .as_deref()
                    .ok_or("the response hook needs --outputs FILE (a KServe v2 response)")?;
                response_hook(&host, &plugin, &wit, outputs, out).await
            }
            Hook::GenerateRequest => {
                let plugin = selection
                    .request
                    .filter(|p| p.adapts_generate_requests())
                    .ok_or("the plugin does not export generate-request-adapter")?;
                generate_request_hook(&host, &plugin, &wit, out).await
            }
            Hook::GenerateResponse | Hook::Stream => {
                let plugin = selection.response.ok_or("no response plugin selected")?;
                let responses = generate_responses(options.outputs.as_deref())?;
                if options.hook == Hook::Stream {
                    if !plugin.adapts_streams() {
                        return Err("the plugin does not export stream-adapter".into());
                    }
                    stream_hook(&host, &plugin, &wit, &responses, out).await
                } else {
                    if !plugin.adapts_generate_responses() {
                        return Err("the plugin does not export generate-response-adapter".into());
                    }
                    let reply = host.adapt_generate_response(&plugin, &wit, responses);
                    print_reply(refused(timed(reply, out).await?)?, out)
                }
            }
        }
    })
}

/// Calls the generate request adapter and prints the generate request it made.
async fn generate_request_hook(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    wit: &PluginInvocation,
    out: &mut impl Write,
) -> Result<(), String> {
    let adapted = timed(host.adapt_generate_request(plugin, wit), out).await?;
    let adapted = refused(adapted)?;
    let stream = match adapted.stream {
        Some(true) => "yes (generate_stream)",
        Some(false) => "no (generate)",
        None => "as the endpoint's inference type says",
    };
    writeln!(out, "stream: {stream}").map_err(write_error)?;
    match adapted.inputs {
        GenerateInputs::Json(json) => {
            writeln!(out, "a generate body:").map_err(write_error)?;
            out.write_all(&json).map_err(write_error)?;
            writeln!(out).map_err(write_error)
        }
        GenerateInputs::Tensors(inputs) => {
            let mut request = InferRequest::new(MODEL);
            request.inputs = inputs;
            print_request(&request, out)
        }
    }
}

/// Calls the stream adapter once per response and once at the end, printing the events the
/// server would send (and, as it would, stopping at the first failure).
async fn stream_hook(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    wit: &PluginInvocation,
    responses: &[Vec<u8>],
    out: &mut impl Write,
) -> Result<(), String> {
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let events = responses.iter().map(|r| Some(r.as_slice())).chain([None]);
    // The stream's state, kept between its calls as the server keeps it. Each call gets a fresh
    // instance, as the server's calls do past its budget of kept instances: a plugin that
    // relies on its memory between calls fails here first.
    let state = Arc::new(crate::plugins::StreamState::new());
    for (index, event) in (0u64..).zip(events) {
        let position = StreamPosition {
            stream_id: "plugin-run".into(),
            created,
            index,
        };
        let payloads = refused(
            host.adapt_stream(
                plugin,
                wit,
                &position,
                event.map(<[u8]>::to_vec),
                &state,
                None,
            )
            .await,
        )?;
        for payload in payloads {
            if payload.contains(['\n', '\r']) {
                return Err("500: an event payload holds a line break".into());
            }
            writeln!(out, "data: {payload}\n").map_err(write_error)?;
        }
    }
    Ok(())
}

/// `--outputs` for the generate hooks: a JSON list of the model's responses, each an object.
fn generate_responses(outputs: Option<&[u8]>) -> Result<Vec<Vec<u8>>, String> {
    let outputs = outputs.ok_or("this hook needs --outputs FILE (a JSON list of responses)")?;
    let list: serde_json::Value =
        serde_json::from_slice(outputs).map_err(|e| format!("--outputs: not a JSON list: {e}"))?;
    responses(&list).map_err(|e| format!("--outputs: {e}"))
}

/// Awaits a hook's call and prints how long it took.
async fn timed<T>(
    call: impl std::future::Future<Output = T>,
    out: &mut impl Write,
) -> Result<T, String> {
    let started = Instant::now();
    let result = call.await;
    writeln!(out, "call: {:.2?}", started.elapsed()).map_err(write_error)?;
    Ok(result)
}

fn write_error(error: std::io::Error) -> String {
    error.to_string()
}

/// Calls the request adapter and prints the request it made.
async fn request_hook(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    wit: &PluginInvocation,
    out: &mut impl Write,
) -> Result<(), String> {
    let adapted = timed(host.adapt_request(plugin, wit), out).await?;
    let request = match refused(adapted)? {
        AdaptedRequest::Tensors { inputs, outputs } => {
            let mut request = InferRequest::new(MODEL);
            request.inputs = inputs;
            request.requested_outputs = outputs;
            request
        }
        AdaptedRequest::V2Json(json) => {
            writeln!(out, "a KServe v2 request body:").map_err(write_error)?;
            decode_infer_request(MODEL, &Bytes::from(json), None)
                .map_err(|e| format!("400: {e}"))?
                .0
        }
    };
    print_request(&request, out)
}

/// Calls the response adapter on `outputs` (a KServe v2 response) and prints its reply.
async fn response_hook(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    wit: &PluginInvocation,
    outputs: &[u8],
    out: &mut impl Write,
) -> Result<(), String> {
    let response = InferResponse {
        model_name: MODEL.into(),
        model_version: 1,
        id: None,
        parameters: Vec::new(),
        outputs: read_outputs(outputs)?,
    };
    let reply = timed(host.adapt_response(plugin, wit, &response), out).await?;
    print_reply(refused(reply)?, out)
}

/// A reply as the client would get it: status, content type, headers, body.
fn print_reply(reply: PluginReply, out: &mut impl Write) -> Result<(), String> {
    writeln!(out, "status: {}", reply.status).map_err(write_error)?;
    writeln!(out, "content-type: {}", reply.content_type).map_err(write_error)?;
    for (name, value) in &reply.headers {
        writeln!(out, "{name}: {value}").map_err(write_error)?;
    }
    writeln!(out).map_err(write_error)?;
    out.write_all(&reply.body).map_err(write_error)?;
    if !reply.body.ends_with(b"\n") {
        writeln!(out).map_err(write_error)?;
    }
    Ok(())
}

/// A manifest holding only this plugin, for [`MODEL`]'s chosen hook.
fn manifest(options: &RunOptions<'_>) -> Result<Manifest, String> {
    let hook = match options.hook {
        Hook::Request | Hook::GenerateRequest => "request",
        Hook::Response | Hook::GenerateResponse | Hook::Stream => "response",
    };
    let settings = Settings {
        config: &options.config,
        memory_limit_mb: options.memory_limit_mb,
        time_limit_ms: options.time_limit_ms,
        assets: &options.assets,
    };
    single_plugin_manifest(options.plugin, &settings, |_, table| {
        let mut model = toml::Table::new();
        model.insert(hook.into(), toml::Value::String("plugin".into()));
        table.insert(
            "models".into(),
            toml::Value::Table(toml::Table::from_iter([(
                MODEL.into(),
                toml::Value::Table(model),
            )])),
        );
        Ok(())
    })
}

/// What the author's tools give a plugin that its manifest entry would.
pub struct Settings<'a> {
    /// The manifest's `config` table for the plugin.
    pub config: &'a BTreeMap<String, String>,
    /// The manifest's `memory_limit_mb`.
    pub memory_limit_mb: u64,
    /// The manifest's `time_limit_ms`.
    pub time_limit_ms: u64,
    /// The manifest's `assets`, by name.
    pub assets: &'a BTreeMap<String, std::path::PathBuf>,
}

/// A manifest holding only the plugin at `path`, named `plugin`, with `settings`; `more` adds to
/// its plugin entry and to the whole table (routes, cases) before it is read.
pub fn single_plugin_manifest(
    path: &Path,
    settings: &Settings<'_>,
    more: impl FnOnce(&mut toml::Table, &mut toml::Table) -> Result<(), String>,
) -> Result<Manifest, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let config: toml::Table = settings
        .config
        .iter()
        .map(|(key, value)| (key.clone(), toml::Value::String(value.clone())))
        .collect();
    let mut table = toml::Table::new();
    let mut plugin = toml::Table::new();
    plugin.insert("path".into(), toml::Value::String(whole_path(path)?));
    plugin.insert("sha256".into(), toml::Value::String(sha256_hex(&bytes)));
    plugin.insert(
        "memory_limit_mb".into(),
        toml::Value::Integer(i64::try_from(settings.memory_limit_mb).unwrap_or(i64::MAX)),
    );
    plugin.insert(
        "time_limit_ms".into(),
        toml::Value::Integer(i64::try_from(settings.time_limit_ms).unwrap_or(i64::MAX)),
    );
    plugin.insert("config".into(), toml::Value::Table(config));
    plugin.insert(
        "assets".into(),
        toml::Value::Table(assets(settings.assets)?),
    );
    more(&mut plugin, &mut table)?;
    table.insert(
        "plugins".into(),
        toml::Value::Table(toml::Table::from_iter([(
            "plugin".into(),
            toml::Value::Table(plugin),
        )])),
    );
    // Read as if it lay in `/`, so that every file, named by its whole path, is beside it.
    Manifest::from_text(
        Path::new("/plugin-run.toml"),
        &toml::to_string(&table).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.message)
}

/// `path`, made whole.
fn whole_path(path: &Path) -> Result<String, String> {
    std::path::absolute(path)
        .map(|path| path.display().to_string())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// A file given on the command line as a manifest entry (`{ path, sha256 }`): its whole path
/// with links resolved, without the leading `/` (relative to the manifest's folder, `/`), and
/// its digest.
pub fn file_entry(path: &Path, what: &str) -> Result<toml::Value, String> {
    let real = path
        .canonicalize()
        .map_err(|e| format!("{what}: cannot read {}: {e}", path.display()))?;
    let bytes =
        std::fs::read(&real).map_err(|e| format!("{what}: cannot read {}: {e}", path.display()))?;
    let relative = real
        .strip_prefix("/")
        .unwrap_or(&real)
        .display()
        .to_string();
    Ok(toml::Value::Table(toml::Table::from_iter([
        ("path".to_owned(), toml::Value::String(relative)),
        ("sha256".to_owned(), toml::Value::String(sha256_hex(&bytes))),
    ])))
}

/// The manifest's `assets` for the files `--asset` names.
fn assets(files: &BTreeMap<String, std::path::PathBuf>) -> Result<toml::Table, String> {
    files
        .iter()
        .map(|(name, path)| Ok((name.clone(), file_entry(path, &format!("asset '{name}'"))?)))
        .collect()
}

/// The value of a call the plugin completed, or what the client would have been answered.
fn refused<T>(result: HookResult<T>) -> Result<T, String> {
    answered(result).map_err(|refusal| refusal_line(&refusal))
}

/// The tensors of a request (checked by the rule the server applies before the model), as
/// KServe v2 JSON, one per line, and the outputs it asks for.
fn print_request(request: &InferRequest, out: &mut impl Write) -> Result<(), String> {
    let inputs = inputs_json(&request.inputs).map_err(|e| format!("400: {e}"))?;
    writeln!(out, "inputs:").map_err(write_error)?;
    for tensor in inputs.as_array().into_iter().flatten() {
        writeln!(out, "  {tensor}").map_err(write_error)?;
    }
    let outputs = if request.requested_outputs.is_empty() {
        "every output of the model".to_owned()
    } else {
        request.requested_outputs.join(", ")
    };
    writeln!(out, "outputs: {outputs}").map_err(write_error)
}

/// The outputs of a KServe v2 response body, typed (read by the server's request decoder, as if
/// they were inputs).
fn read_outputs(json: &[u8]) -> Result<Vec<OutputTensor>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("--outputs: not JSON: {e}"))?;
    if value.get("outputs").is_none() {
        return Err("--outputs: no \"outputs\" array".into());
    }
    output_tensors(&value).map_err(|e| format!("--outputs: {e}"))
}
