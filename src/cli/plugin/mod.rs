//! `trident plugin ...`: keys, signatures and inspection for platform teams vetting plugins, and
//! a project, running one hook and running its golden cases for authors (`new`, with its
//! `templates/`, `run` and `test`). The
//! server never runs this folder; it uses the runtime like the server does.

pub mod new;
pub mod run;
pub mod test;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use wasmtime::component::Component;

use self::new::{Kind, Language, create};
use self::run::{Hook, RunOptions, run};
use crate::plugins::platform::loading::sha256_hex;
use crate::plugins::platform::manifest::{DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIME_LIMIT_MS};
use crate::plugins::platform::signing;

/// The subcommands of `trident plugin`.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Create an ed25519 key pair: the secret key file (hex) and its public key (printed).
    Keygen {
        /// Where to write the secret key (created with mode 0600).
        secret_key: PathBuf,
    },
    /// Sign a plugin (with the assets it reads, which the signature then covers): writes
    /// `<plugin>.sig` (hex) next to it.
    Sign {
        /// The plugin's `.wasm` file.
        plugin: PathBuf,
        /// The secret key file written by `keygen`.
        #[arg(long)]
        key: PathBuf,
        /// An asset the plugin reads, `NAME=PATH` as the manifest's `assets` names it (repeat
        /// for several).
        #[arg(long = "asset", value_parser = name_path)]
        assets: Vec<(String, PathBuf)>,
        /// The plugin's golden cases file, which the signature then covers.
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Check a plugin's signature against trusted public keys (hex); exits 1 when it fails.
    Verify {
        /// The plugin's `.wasm` file.
        plugin: PathBuf,
        /// A trusted public key (repeat for several).
        #[arg(long = "trusted-key", required = true)]
        trusted_keys: Vec<String>,
        /// The signature (hex); by default `<plugin>.sig`.
        #[arg(long)]
        signature: Option<String>,
        /// An asset the plugin reads, `NAME=PATH` (repeat for several).
        #[arg(long = "asset", value_parser = name_path)]
        assets: Vec<(String, PathBuf)>,
        /// The plugin's golden cases file.
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Run a plugin's golden cases through the host the server uses (its limits, a fresh
    /// instance per call) and print each case's result, with the differences of those that
    /// fail; exits 1 when one fails. Either a plugin and its cases file, with its settings
    /// given as `run` takes them, or `--manifest`: every plugin of a manifest that carries cases,
    /// exactly as the server loads it.
    Test(test::TestArgs),
    /// Show a plugin's digest, size, imports, exports and the trident hooks it implements.
    Inspect {
        /// The plugin's `.wasm` file.
        plugin: PathBuf,
    },
    /// Write a request-adapter project in Rust, Python or JavaScript that builds as it is (numbers
    /// in the body, or `--template image` or `--template text`).
    New {
        /// The project's name: lower-case letters, digits and '-'.
        name: String,
        /// The language the project is written in.
        #[arg(long, value_enum)]
        lang: Language,
        /// The folder to create the project in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// What the adapter does to start with: numbers in the body, images (through
        /// trident's native image primitives), or a text tokenized (through its text
        /// primitives).
        #[arg(long, value_enum, default_value = "numbers")]
        template: Kind,
    },
    /// Run one hook of a plugin on a body, without Triton or a model, with the server's limits,
    /// and print what it returns (tensors as KServe v2 JSON, or the reply); exits 1 with the
    /// status a client would get when the plugin refuses or fails.
    Run {
        /// The plugin's `.wasm` file.
        plugin: PathBuf,
        /// The hook to call.
        #[arg(long, value_enum)]
        hook: Hook,
        /// The request body (`-` for standard input).
        #[arg(long)]
        body: PathBuf,
        /// The request's Content-Type, as the plugin sees it.
        #[arg(long)]
        content_type: Option<String>,
        /// The request's Accept, as the plugin sees it.
        #[arg(long)]
        accept: Option<String>,
        /// For `--hook response`: the model's outputs, a KServe v2 response (`{"outputs": [...]}`);
        /// for `generate-response` and `stream`: the model's responses, a JSON list of generate
        /// answers (`[{"TEXT": "..."}, ...]`).
        #[arg(long)]
        outputs: Option<PathBuf>,
        /// A `config` entry, `KEY=VALUE` (repeat for several).
        #[arg(long = "config", value_parser = key_value)]
        config: Vec<(String, String)>,
        /// The linear memory the call may use, in MiB (the manifest's `memory_limit_mb`).
        #[arg(long, default_value_t = DEFAULT_MEMORY_LIMIT_MB)]
        memory_limit_mb: u64,
        /// How long the call may run, in milliseconds (the manifest's `time_limit_ms`).
        #[arg(long, default_value_t = DEFAULT_TIME_LIMIT_MS)]
        time_limit_ms: u64,
        /// An asset the plugin reads, `NAME=PATH` (repeat for several).
        #[arg(long = "asset", value_parser = name_path)]
        assets: Vec<(String, PathBuf)>,
    },
}

fn name_path(text: &str) -> Result<(String, PathBuf), String> {
    key_value(text).map(|(name, path)| (name, PathBuf::from(path)))
}

/// What the signature of `plugin` with `assets` and `cases` covers: the `.wasm`'s bytes, each
/// asset's digest by name (sorted), the cases file's digest ([`signing::signed_message`]).
type Bundle = (Vec<u8>, Vec<(String, String)>, Option<String>);

fn bundle(
    plugin: &Path,
    assets: &[(String, PathBuf)],
    cases: Option<&Path>,
) -> Result<Bundle, String> {
    let wasm = read(plugin)?;
    let mut digests = Vec::new();
    for (name, path) in assets {
        digests.push((name.clone(), sha256_hex(&read(path)?)));
    }
    digests.sort();
    let cases = cases
        .map(|path| read(path).map(|bytes| sha256_hex(&bytes)))
        .transpose()?;
    Ok((wasm, digests, cases))
}

/// What the signature of `plugin` with `assets` and `cases` signs
/// ([`signing::signed_message`]).
fn signed_bytes(
    plugin: &Path,
    assets: &[(String, PathBuf)],
    cases: Option<&Path>,
) -> Result<Vec<u8>, String> {
    let (wasm, digests, cases) = bundle(plugin, assets, cases)?;
    let digests = digests.iter().map(|(n, d)| (n.as_str(), d.as_str()));
    Ok(signing::signed_message(&wasm, digests, cases.as_deref()).into_owned())
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("'{text}' is not KEY=VALUE"))
}

type CliResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

impl PluginCommand {
    /// Runs the subcommand, writing what it reports to standard output.
    pub fn run(self) -> CliResult {
        let mut out = std::io::stdout().lock();
        match self {
            PluginCommand::Keygen { secret_key } => {
                let mut seed = [0u8; 32];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
                    .map_err(|e| format!("no randomness: {e}"))?;
                let secret = hex::encode(seed);
                write_secret(&secret_key, &secret)?;
                writeln!(out, "secret key: {}", secret_key.display())?;
                writeln!(out, "public key: {}", signing::public_key(&secret)?)?;
            }
            PluginCommand::Sign {
                plugin,
                key,
                assets,
                cases,
            } => sign(&plugin, &key, &assets, cases.as_deref(), &mut out)?,
            PluginCommand::Verify {
                plugin,
                trusted_keys,
                signature,
                assets,
                cases,
            } => {
                let (wasm, digests, cases) = bundle(&plugin, &assets, cases.as_deref())?;
                let digests: Vec<(&str, &str)> = digests
                    .iter()
                    .map(|(n, d)| (n.as_str(), d.as_str()))
                    .collect();
                signing::verify_bundle(
                    &wasm,
                    &digests,
                    cases.as_deref(),
                    &plugin,
                    signature.as_deref(),
                    &trusted_keys,
                )
                .map_err(|e| format!("{}: {e}", plugin.display()))?;
                writeln!(out, "{}: signature valid", plugin.display())?;
            }
            PluginCommand::Inspect { plugin } => inspect(&plugin, &mut out)?,
            PluginCommand::Test(args) => {
                if !test::test(args, &mut out)? {
                    return Err("a golden case failed".into());
                }
            }
            PluginCommand::New {
                name,
                lang,
                dir,
                template,
            } => {
                let (project, build) = create(&name, lang, template, &dir)?;
                writeln!(out, "created {}", project.display())?;
                writeln!(out, "build it there with:\n{build}")?;
            }
            command @ PluginCommand::Run { .. } => command.run_hook(&mut out)?,
        }
        Ok(())
    }
}

impl PluginCommand {
    /// `trident plugin run`.
    fn run_hook(self, out: &mut impl Write) -> CliResult {
        let PluginCommand::Run {
            plugin,
            hook,
            body,
            content_type,
            accept,
            outputs,
            config,
            memory_limit_mb,
            time_limit_ms,
            assets,
        } = self
        else {
            return Ok(());
        };
        let body = if body.as_os_str() == "-" {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)?;
            bytes
        } else {
            read(&body)?
        };
        let options = RunOptions {
            plugin: &plugin,
            hook,
            body,
            content_type,
            accept,
            outputs: outputs.as_deref().map(read).transpose()?,
            config: config.into_iter().collect(),
            memory_limit_mb,
            time_limit_ms,
            assets: assets.into_iter().collect(),
        };
        run(options, out)?;
        Ok(())
    }
}

/// Signs `plugin` (and `assets`, and `cases`) with the secret key in `key`, writing
/// `<plugin>.sig`.
fn sign(
    plugin: &Path,
    key: &Path,
    assets: &[(String, PathBuf)],
    cases: Option<&Path>,
    out: &mut impl Write,
) -> CliResult {
    let secret =
        std::fs::read_to_string(key).map_err(|e| format!("cannot read {}: {e}", key.display()))?;
    let signature = signing::sign(&signed_bytes(plugin, assets, cases)?, secret.trim())?;
    let sig_path = plugin.with_extension("wasm.sig");
    std::fs::write(&sig_path, format!("{signature}\n"))?;
    writeln!(out, "signature: {signature}")?;
    writeln!(out, "written to {}", sig_path.display())?;
    writeln!(out, "public key: {}", signing::public_key(secret.trim())?)?;
    Ok(())
}

fn write_secret(path: &Path, secret: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    writeln!(file, "{secret}").map_err(|e| e.to_string())
}

fn inspect(path: &Path, out: &mut impl Write) -> CliResult {
    let bytes = read(path)?;
    let limit = usize::try_from(crate::plugins::platform::manifest::DEFAULT_MEMORY_LIMIT_MB << 20)
        .unwrap_or(usize::MAX);
    let runtime = crate::plugins::runtime::engine::Runtime::new(
        limit,
        None,
        crate::plugins::runtime::engine::Pool::Container,
    )?;
    let component =
        Component::new(runtime.engine(), &bytes).map_err(|e| format!("not a component: {e}"))?;
    let ty = component.component_type();
    writeln!(out, "plugin:  {}", path.display())?;
    writeln!(out, "sha256:  {}", sha256_hex(&bytes))?;
    writeln!(out, "size:    {} bytes", bytes.len())?;
    writeln!(out, "imports:")?;
    for (name, _) in ty.imports(runtime.engine()) {
        writeln!(out, "  {name}")?;
    }
    writeln!(out, "exports:")?;
    let mut hooks = Vec::new();
    for (name, _) in ty.exports(runtime.engine()) {
        writeln!(out, "  {name}")?;
        for (interface, hook) in [
            ("trident:plugin/request-adapter", "request adapter"),
            ("trident:plugin/response-adapter", "response adapter"),
            ("trident:plugin/oom-classifier", "OOM classifier"),
            (
                "trident:plugin/generate-request-adapter",
                "generate request adapter",
            ),
            (
                "trident:plugin/generate-response-adapter",
                "generate response adapter",
            ),
            ("trident:plugin/stream-adapter", "stream adapter"),
        ] {
            if name.starts_with(interface) {
                hooks.push(hook);
            }
        }
    }
    let usable = runtime.linker().instantiate_pre(&component).is_ok();
    writeln!(
        out,
        "hooks:   {}",
        if hooks.is_empty() {
            "none".into()
        } else {
            hooks.join(", ")
        }
    )?;
    writeln!(
        out,
        "imports satisfied by trident: {}",
        if usable { "yes" } else { "no" }
    )?;
    Ok(())
}
