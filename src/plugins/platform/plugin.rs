//! One loaded plugin: its name, limits and hooks, and the media types it takes and serves.

use std::sync::Arc;

use crate::plugins::runtime::hooks::Hooks;
use crate::plugins::runtime::store::Limits;

/// A plugin, compiled and pre-instantiated.
pub struct LoadedPlugin {
    /// The plugin's name in the manifest's `[plugins]`.
    pub name: Arc<str>,
    pub(in crate::plugins) limits: Limits,
    pub(in crate::plugins) content_types: Vec<String>,
    pub(in crate::plugins) accept: Vec<String>,
    /// Lower-cased names of the request headers the plugin may see.
    pub headers: Vec<String>,
    /// The worlds it exports, each ready to call ([`hooks`]).
    pub(in crate::plugins) hooks: Hooks,
    /// The component, compiled and linked: for the exports no world names alone
    /// ([`super::model_check`]).
    pub(in crate::plugins) pre:
        wasmtime::component::InstancePre<crate::plugins::runtime::store::PluginState>,
    /// Whether each instance runs `check-config` when it is made ([`crate::plugins::runtime::snapshot`]).
    pub(in crate::plugins) init_each: bool,
    /// Its golden cases, run before it serves ([`super::cases`]).
    pub cases: Option<Arc<super::cases::Cases>>,
    /// What its calls cost, by hook ([`super::accounting`]); the account of the plugin it
    /// replaced when a reload left it as it was ([`LoadedPlugin::continue_from`]).
    pub account: arc_swap::ArcSwap<super::accounting::PluginAccount>,
    /// Its name and manifest entry (file and digest, limits, media types, configuration,
    /// assets and their digests): two loads of the same identity are the same plugin.
    pub(in crate::plugins) identity: String,
    /// Its `.wasm` file's SHA-256, as the manifest pins it (lower-case hex).
    pub sha256: String,
    /// The trusted key (hex) whose signature it carries; `None` when signatures are not
    /// required.
    pub signer: Option<String>,
}

impl LoadedPlugin {
    /// Whether `other` is this plugin loaded again unchanged (a reload of the same manifest
    /// entry, with the same file, configuration and assets).
    pub fn same_as(&self, other: &LoadedPlugin) -> bool {
        self.identity == other.identity
    }

    /// Goes on counting in `earlier`'s account when it is this plugin loaded before
    /// ([`LoadedPlugin::same_as`]): a reload that leaves a plugin as it was keeps its series.
    /// Calls still running on `earlier` count in the same account.
    pub fn continue_from(&self, earlier: &LoadedPlugin) {
        if self.same_as(earlier) {
            self.account.store(earlier.account.load_full());
        }
    }
}

/// A plugin that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The plugin's name in the manifest; `*` when what failed is no one plugin's (the
    /// WebAssembly runtime could not start, the plugins together are past their budget).
    pub plugin: String,
    /// Why it cannot be loaded.
    pub message: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.plugin.as_str() {
            "*" => f.write_str(&self.message),
            plugin => write!(f, "plugin '{plugin}': {}", self.message),
        }
    }
}

impl std::error::Error for LoadError {}

/// `message` as `plugin`'s load error unless it `exported` what its role calls.
pub fn refuse_unless(
    plugin: &Option<Arc<LoadedPlugin>>,
    exported: bool,
    message: String,
) -> Result<(), LoadError> {
    if exported {
        return Ok(());
    }
    Err(LoadError {
        plugin: plugin
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_default(),
        message,
    })
}

/// Whether a header value (`Content-Type`, or an `Accept` list) names a media type of `list`
/// (every type when `list` is empty). Types compare without their parameters and case: an entry
/// `text/csv` takes `text/csv; charset=utf-8` but not `text/csvx`; `type/*` takes any subtype
/// and `*/*` anything. Each media range of an `Accept` list counts, except those with `q=0`
/// (refused by the client).
fn media_matches(list: &[String], value: Option<&str>) -> bool {
    if list.is_empty() {
        return true;
    }
    let value = value.unwrap_or("");
    value.split(',').any(|range| {
        let mut parts = range.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.split_once('=').is_some_and(|(name, q)| {
                name.trim().eq_ignore_ascii_case("q") && q.trim().parse::<f32>() == Ok(0.0)
            })
        });
        !refused
            && list.iter().any(|entry| {
                let entry = entry.to_ascii_lowercase();
                entry == "*/*"
                    || entry == essence
                    || entry
                        .strip_suffix('*')
                        .is_some_and(|kind| kind.ends_with('/') && essence.starts_with(kind))
            })
    })
}

impl LoadedPlugin {
    /// The manifest's `content_types` for this plugin (empty: every type).
    pub fn content_types(&self) -> &[String] {
        &self.content_types
    }

    /// Whether the manifest's `content_types` for this plugin include `content_type` (every
    /// type when it lists none).
    pub fn accepts_content_type(&self, content_type: Option<&str>) -> bool {
        media_matches(&self.content_types, content_type)
    }

    /// Whether this request adapter takes a body of `content_type`.
    pub fn serves_content_type(&self, content_type: Option<&str>) -> bool {
        self.hooks.request.is_some() && media_matches(&self.content_types, content_type)
    }

    /// Whether this request adapter names the media types it takes (its `content_types`): an
    /// adapter of formats of its own, which a KServe v2 request in JSON passes by
    /// ([`crate::protocol::v2_sniff`]); one that names none takes every body, v2's included.
    pub fn names_content_types(&self) -> bool {
        !self.content_types.is_empty()
    }

    /// Whether this response adapter's `accept` list explicitly names `accept`.
    pub fn claims_accept(&self, accept: Option<&str>) -> bool {
        self.hooks.response.is_some()
            && !self.accept.is_empty()
            && accept.is_some()
            && media_matches(&self.accept, accept)
    }

    /// Whether this response adapter answers a request that accepts `accept`.
    pub fn serves_accept(&self, accept: Option<&str>) -> bool {
        self.hooks.response.is_some() && (accept.is_none() || media_matches(&self.accept, accept))
    }
    /// What trident withheld from this plugin since it was loaded.
    pub fn counters(&self) -> &crate::plugins::runtime::counters::PluginCounters {
        &self.limits.counters
    }
}

/// Which hooks a plugin exports.
impl LoadedPlugin {
    /// Whether the plugin exports `hook`.
    pub fn exports(&self, hook: super::accounting::Hook) -> bool {
        use super::accounting::Hook;
        match hook {
            Hook::Request => self.hooks.request.is_some(),
            Hook::Response => self.hooks.response.is_some(),
            Hook::Oom => self.hooks.oom.is_some(),
            Hook::GenerateRequest => self.hooks.generate_request.is_some(),
            Hook::GenerateResponse => self.hooks.generate_response.is_some(),
            Hook::Stream => self.hooks.stream.is_some(),
            Hook::Pipeline => self.hooks.pipeline.is_some(),
        }
    }

    /// Whether its manifest entry names models its calls may call (`trident:models`).
    pub fn calls_models(&self) -> bool {
        !self.limits.models.models.is_empty()
    }

    /// The versions of `trident:plugin` whose worlds it exports: `0.1.0` (request, response,
    /// OOM), `0.2.0` (the generate and stream hooks), or both, joined by `+`; and
    /// `models-0.1.0` for a pipeline (`trident:models`, whose worlds include 0.1.0's imports).
    pub fn versions(&self) -> &'static str {
        use super::accounting::Hook;
        let old = [Hook::Request, Hook::Response, Hook::Oom]
            .into_iter()
            .any(|h| self.exports(h));
        let new = [Hook::GenerateRequest, Hook::GenerateResponse, Hook::Stream]
            .into_iter()
            .any(|h| self.exports(h));
        match (old, new, self.exports(Hook::Pipeline)) {
            (_, _, true) => "models-0.1.0",
            (true, true, false) => "0.1.0+0.2.0",
            (false, true, false) => "0.2.0",
            _ => "0.1.0",
        }
    }

    /// Whether the plugin exports the generate request adapter.
    pub fn adapts_generate_requests(&self) -> bool {
        self.hooks.generate_request.is_some()
    }

    /// Whether the plugin exports the generate response adapter.
    pub fn adapts_generate_responses(&self) -> bool {
        self.hooks.generate_response.is_some()
    }

    /// Whether the plugin exports the stream adapter.
    pub fn adapts_streams(&self) -> bool {
        self.hooks.stream.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::media_matches;

    #[test]
    fn media_types_match_without_parameters_and_not_by_prefix() {
        let csv = vec!["text/csv".to_owned()];
        assert!(media_matches(&csv, Some("text/csv")));
        assert!(media_matches(&csv, Some("Text/CSV; charset=utf-8")));
        assert!(!media_matches(&csv, Some("text/csvx")));
        assert!(!media_matches(&csv, Some("text/cs")));
        assert!(!media_matches(&csv, None));
        assert!(media_matches(&[], None));
        let json = vec!["application/json".to_owned()];
        assert!(!media_matches(&json, Some("application/jsonlines")));
        // Accept lists: any range counts, except one the client refuses with q=0.
        assert!(media_matches(
            &csv,
            Some("application/json, text/csv;q=0.5")
        ));
        assert!(!media_matches(&csv, Some("application/json, text/csv;q=0")));
        assert!(!media_matches(&csv, Some("*/*")));
        // Wildcards on the plugin's side.
        assert!(media_matches(&["text/*".to_owned()], Some("text/plain")));
        assert!(!media_matches(
            &["text/*".to_owned()],
            Some("textual/plain")
        ));
        assert!(media_matches(&["*/*".to_owned()], Some("image/png")));
    }
}
