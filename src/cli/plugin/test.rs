//! `trident plugin test`: a plugin's golden cases, run through the host the server uses, each
//! case's result printed with the differences of those that fail. The server runs the same
//! cases at every load ([`crate::plugins::platform::cases`]) and refuses a plugin whose case fails; this
//! runs every case to the end, so that an author sees them all.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use super::run::{Settings, file_entry, single_plugin_manifest};
use crate::plugins::host::PluginHost;
use crate::plugins::host::cases::run_plugin;
use crate::plugins::platform::cases::Cases;
use crate::plugins::platform::manifest::{
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIME_LIMIT_MS, Manifest,
};

/// What to test.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The plugin's `.wasm` file (or give `--manifest`).
    #[arg(required_unless_present = "manifest", conflicts_with = "manifest")]
    pub plugin: Option<PathBuf>,
    /// The plugin's golden cases file.
    #[arg(
        long,
        required_unless_present = "manifest",
        conflicts_with = "manifest"
    )]
    pub cases: Option<PathBuf>,
    /// A `config` entry, `KEY=VALUE` (repeat for several).
    #[arg(long = "config", value_parser = super::key_value)]
    pub config: Vec<(String, String)>,
    /// The linear memory a call may use, in MiB (the manifest's `memory_limit_mb`).
    #[arg(long, default_value_t = DEFAULT_MEMORY_LIMIT_MB)]
    pub memory_limit_mb: u64,
    /// How long a call may run, in milliseconds (the manifest's `time_limit_ms`).
    #[arg(long, default_value_t = DEFAULT_TIME_LIMIT_MS)]
    pub time_limit_ms: u64,
    /// An asset the plugin reads, `NAME=PATH` (repeat for several).
    #[arg(long = "asset", value_parser = super::name_path)]
    pub assets: Vec<(String, PathBuf)>,
    /// A request header the plugin may see (the manifest's `headers`; repeat for several).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// A model the plugin may call (the manifest's `models`; repeat for several): its cases
    /// answer the calls (`models = [{ model, outputs }]`).
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// A plugin manifest: every plugin in it that carries cases, loaded as the server loads
    /// it (digests, signatures, limits).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
}

/// Runs the cases and prints the report; `Ok(false)` when a case failed, `Err` when the plugin
/// or its cases cannot be loaded.
pub fn test(args: TestArgs, out: &mut impl Write) -> Result<bool, String> {
    let manifest = match &args.manifest {
        Some(path) => {
            crate::plugins::platform::manifest::Manifest::load(path).map_err(|e| e.to_string())?
        }
        None => plugin_manifest(&args)?,
    };
    if manifest.plugins.values().all(|spec| spec.cases.is_none()) {
        return Err("no plugin here carries golden cases (cases = { path, sha256 })".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let host = PluginHost::load_untested(&manifest)
            .await
            .map_err(|e| e.to_string())?;
        let mut passed = true;
        for plugin in host.plugins() {
            let Some(cases) = plugin.cases.clone() else {
                continue;
            };
            // A manifest's plugins by their names; a plugin given alone by its file.
            let label = match &args.plugin {
                Some(path) => path.display().to_string(),
                None => format!("plugin {}", plugin.name),
            };
            passed &= report(&host, plugin, &cases, &label, out).await?;
        }
        Ok(passed)
    })
}

async fn report(
    host: &PluginHost,
    plugin: &std::sync::Arc<crate::plugins::LoadedPlugin>,
    cases: &Cases,
    label: &str,
    out: &mut impl Write,
) -> Result<bool, String> {
    let write = |e: std::io::Error| e.to_string();
    let report = run_plugin(host, plugin, cases, true).await;
    writeln!(out, "{label}:").map_err(write)?;
    let mut failed = 0;
    for (name, differences) in &report.results {
        if differences.is_empty() {
            writeln!(out, "  ok    {name}").map_err(write)?;
            continue;
        }
        failed += 1;
        writeln!(out, "  FAIL  {name}").map_err(write)?;
        for difference in differences {
            writeln!(out, "        {difference}").map_err(write)?;
        }
    }
    writeln!(
        out,
        "{} passed, {failed} failed, in {:.1?}",
        report.results.len() - failed,
        report.took
    )
    .map_err(write)?;
    Ok(failed == 0)
}

/// A manifest holding only the plugin the arguments name, with its cases.
fn plugin_manifest(args: &TestArgs) -> Result<Manifest, String> {
    let (Some(plugin), Some(cases)) = (&args.plugin, &args.cases) else {
        return Err("give the plugin and --cases, or --manifest".into());
    };
    let config: BTreeMap<String, String> = args.config.iter().cloned().collect();
    let assets: BTreeMap<String, PathBuf> = args.assets.iter().cloned().collect();
    let settings = Settings {
        config: &config,
        memory_limit_mb: args.memory_limit_mb,
        time_limit_ms: args.time_limit_ms,
        assets: &assets,
    };
    single_plugin_manifest(plugin, &settings, |entry, _| {
        entry.insert("cases".into(), file_entry(cases, "cases")?);
        let headers = args.headers.iter().cloned().map(toml::Value::String);
        entry.insert("headers".into(), toml::Value::Array(headers.collect()));
        let models = args.models.iter().cloned().map(toml::Value::String);
        entry.insert("models".into(), toml::Value::Array(models.collect()));
        Ok(())
    })
}
