//! The `text` interface: tokenization and detokenization trident runs natively for guests in
//! any language, with the code of the tokenize and detokenize plugins (`trident-text`, safe
//! Rust), over a `tokenizer.json` the calling plugin has as an asset (`store` offers them to the
//! guest). Parsing a tokenizer costs
//! milliseconds, so each plugin keeps the last few it parsed ([`TextCache`], by asset and
//! settings) for its later calls; a tokenizer file may be at most an eighth of the plugin's
//! memory limit in bytes (the parsed tokenizer lives outside the guest's memory, in a few
//! times the file's size), a request's texts at most a sixty-fourth (the tokenizer's working
//! memory), and what a call returns is copied into the guest's memory, within its limit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use trident_text::body::Request;
use trident_text::request::{Parameters, Truncation};
use trident_text::settings::Datatype as Element;
use trident_text::{Encode, Tokenizer};

use crate::plugins::wit::bindings::types::{Datatype, PluginError, Tensor};

/// Tokenizers one plugin keeps parsed.
const KEPT: usize = 4;

/// Bytes of the plugin's memory limit one byte of a tokenizer file needs, for the ceiling.
const BYTES_PER_FILE_BYTE: u64 = 8;

/// Bytes of the plugin's memory limit one byte of text to tokenize needs, for the ceiling
/// (the tokenizer's working memory, outside the guest's).
const BYTES_PER_TEXT_BYTE: u64 = 64;

/// The tensors' names, in the order `tokenize` returns them.
const NAMES: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

/// The files a plugin's tokenizers are read from, by asset name: its verified assets, which the
/// sandbox's store holds.
pub trait TokenizerFiles {
    /// The bytes of the asset `name`, if the plugin has it.
    fn file(&self, name: &str) -> Option<&[u8]>;
}

/// The tokenizers one plugin's calls parsed, newest last, at most four; shared by every
/// call of the plugin.
#[derive(Clone, Default)]
pub struct TextCache {
    kept: Arc<Mutex<Vec<Kept>>>,
}

impl std::fmt::Debug for TextCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCache").finish_non_exhaustive()
    }
}

struct Kept {
    asset: String,
    settings: Vec<(String, String)>,
    tokenizer: Arc<Tokenizer>,
}

fn internal(what: &str, message: impl std::fmt::Display) -> PluginError {
    PluginError::Internal(format!("text.{what}: {message}"))
}

impl TextCache {
    /// The tokenizer of the asset `asset` under `settings` (sorted by key; `None`: any
    /// settings, for decoding), parsed now if it is not kept.
    fn tokenizer(
        &self,
        what: &str,
        assets: &dyn TokenizerFiles,
        memory_limit_bytes: u64,
        asset: &str,
        settings: Option<&[(String, String)]>,
    ) -> Result<Arc<Tokenizer>, PluginError> {
        let found = {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.iter()
                .rev()
                .find(|k| k.asset == asset && settings.is_none_or(|s| k.settings == s))
                .map(|k| Arc::clone(&k.tokenizer))
        };
        if let Some(tokenizer) = found {
            return Ok(tokenizer);
        }
        let bytes = assets
            .file(asset)
            .ok_or_else(|| internal(what, format!("the plugin has no asset '{asset}'")))?;
        let ceiling = memory_limit_bytes / BYTES_PER_FILE_BYTE;
        if bytes.len() as u64 > ceiling {
            return Err(internal(
                what,
                format!(
                    "asset '{asset}' is {} bytes, and a plugin of {} MiB may have tokenizers of at \
                     most {ceiling} bytes parsed for it",
                    bytes.len(),
                    memory_limit_bytes >> 20
                ),
            ));
        }
        let settings = settings.unwrap_or_default().to_vec();
        let map: BTreeMap<&str, &str> = settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let encode = Encode::from_config(|key| map.get(key).map(|v| (*v).to_owned()))
            .map_err(|e| internal(what, e))?;
        let tokenizer = Tokenizer::from_json(bytes, &encode)
            .map_err(|e| internal(what, format!("asset '{asset}': {e}")))?;
        let tokenizer = Arc::new(tokenizer);
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Kept {
            asset: asset.to_owned(),
            settings,
            tokenizer: Arc::clone(&tokenizer),
        });
        Ok(tokenizer)
    }
}

fn plugin_error(error: trident_text::Error) -> PluginError {
    match error {
        trident_text::Error::BadRequest(m) => PluginError::BadRequest(m),
        trident_text::Error::Unsupported(m) => PluginError::UnsupportedMediaType(m),
    }
}

/// What bounds a `tokenize` call beside its settings.
#[derive(Debug, Clone, Copy)]
pub(in crate::plugins) struct Bounds {
    /// The calling plugin's memory limit.
    pub(in crate::plugins) memory_limit_bytes: u64,
    /// The most rows the request's model takes (its `max_batch_size`), when known.
    pub(in crate::plugins) max_batch: Option<usize>,
}

/// The tensors of the `text` interface's `tokenize` and `tokenize-pairs` (`request`: rows, each
/// a text alone or a pair, and the request's own parameters), for a plugin with `assets`, its
/// `cache`, within `bounds`; `None` once `out_of_time` says so (asked between rows). A batch of
/// more rows than the model takes is refused before any is tokenized.
///
/// The texts are held to the plugin's own `max_text_bytes` first (so a refusal names the
/// setting the plugin's author chose), then to the host's ceiling, a sixty-fourth of the
/// plugin's memory limit (the tokenizer's working memory, outside the guest's).
pub(in crate::plugins) fn tokenize(
    cache: &TextCache,
    assets: &dyn TokenizerFiles,
    bounds: Bounds,
    asset: &str,
    request: &Request,
    settings: &[(String, String)],
    out_of_time: &dyn Fn() -> bool,
) -> Result<Option<Vec<Tensor>>, PluginError> {
    let rows = &request.inputs;
    if let Some((key, _)) = settings
        .iter()
        .find(|(key, _)| !trident_text::settings::KEYS.contains(&key.as_str()))
    {
        return Err(internal(
            "tokenize",
            format!(
                "'{key}' is not a setting ({})",
                trident_text::settings::KEYS.join(", ")
            ),
        ));
    }
    let mut sorted = settings.to_vec();
    sorted.sort();
    let map: BTreeMap<&str, &str> = sorted
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let limits = trident_text::Limits::from_config(|key| map.get(key).map(|v| (*v).to_owned()))
        .map_err(|e| internal("tokenize", e))?;
    let memory_limit_bytes = bounds.memory_limit_bytes;
    let bytes: u64 = rows.iter().map(|row| row.bytes() as u64).sum();
    let ceiling = memory_limit_bytes / BYTES_PER_TEXT_BYTE;
    if bytes > limits.max_text_bytes as u64 {
        return Err(PluginError::BadRequest(format!(
            "the texts are {bytes} bytes long; this endpoint takes at most {} bytes of text \
             per request (max_text_bytes)",
            limits.max_text_bytes
        )));
    }
    if bytes > ceiling {
        return Err(PluginError::BadRequest(format!(
            "the texts are {bytes} bytes long; this endpoint takes at most {ceiling} bytes of \
             text per request (a sixty-fourth of the plugin's memory limit of {} MiB, which the \
             tokenizer works in)",
            memory_limit_bytes >> 20
        )));
    }
    let tokenizer =
        cache.tokenizer("tokenize", assets, memory_limit_bytes, asset, Some(&sorted))?;
    if let Some(most) = bounds.max_batch.filter(|most| {
        tokenizer.settings().batch && rows.len() > *most && rows.len() <= limits.max_texts
    }) {
        return Err(PluginError::BadRequest(format!(
            "{} texts, and at most {most} a request are taken for this model (by its \
             max_batch_size: a larger batch is run as up to 64 requests of it)",
            rows.len()
        )));
    }
    let encoded = trident_text::encode::encode_request_within(
        &tokenizer,
        rows,
        &request.parameters,
        &limits,
        out_of_time,
    )
    .map_err(plugin_error)?;
    Ok(encoded.map(|encoded| tensors(&encoded, tokenizer.settings())))
}

/// The three tensors of `encoded`, named and in the order of [`NAMES`].
fn tensors(encoded: &trident_text::encode::Encoded, settings: &Encode) -> Vec<Tensor> {
    let element = settings.datatype;
    let shape = encoded.shape(settings.batch);
    let values = [
        &encoded.input_ids,
        &encoded.attention_mask,
        &encoded.token_type_ids,
    ];
    NAMES
        .iter()
        .zip(values)
        .map(|(name, values)| Tensor {
            name: (*name).to_owned(),
            datatype: match element {
                Element::Int64 => Datatype::Int64,
                Element::Int32 => Datatype::Int32,
            },
            shape: shape.clone(),
            data: trident_text::encode::tensor_bytes(values, element),
        })
        .collect()
}

/// A request's own parameters as `tokenize-pairs` gives them: `truncation` by its name
/// (`bad-request` for another), `max-length`.
pub(in crate::plugins) fn parameters(
    truncation: Option<&str>,
    max_length: Option<u32>,
) -> Result<Parameters, PluginError> {
    Ok(Parameters {
        truncation: truncation
            .map(Truncation::parse)
            .transpose()
            .map_err(plugin_error)?,
        max_length: max_length.map(|n| n as usize),
    })
}

/// The text of the `text` interface's `detokenize`.
pub(in crate::plugins) fn detokenize(
    cache: &TextCache,
    assets: &dyn TokenizerFiles,
    memory_limit_bytes: u64,
    asset: &str,
    ids: &[u32],
    skip_special: bool,
) -> Result<String, PluginError> {
    let tokenizer = cache.tokenizer("detokenize", assets, memory_limit_bytes, asset, None)?;
    trident_text::decode::decode(&tokenizer, ids, skip_special).map_err(plugin_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_text::request::Input;

    /// A word-level tokenizer of four words, splitting on white space.
    impl TokenizerFiles for BTreeMap<String, Vec<u8>> {
        fn file(&self, name: &str) -> Option<&[u8]> {
            self.get(name).map(Vec::as_slice)
        }
    }

    fn assets() -> BTreeMap<String, Vec<u8>> {
        let file = serde_json::json!({
            "pre_tokenizer": {"type": "Whitespace"},
            "model": {"type": "WordLevel", "vocab": {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3},
                      "unk_token": "[UNK]"}
        });
        BTreeMap::from([("tok".to_owned(), file.to_string().into_bytes())])
    }

    fn bounds(memory_limit_bytes: u64) -> Bounds {
        Bounds {
            memory_limit_bytes,
            max_batch: None,
        }
    }

    /// A request of `texts` alone, with no parameters of its own.
    fn plain(texts: &[String]) -> Request {
        Request {
            inputs: texts.iter().cloned().map(Input::single).collect(),
            parameters: Parameters::default(),
        }
    }

    fn setting(key: &str, value: &str) -> Vec<(String, String)> {
        vec![(key.to_owned(), value.to_owned())]
    }

    #[test]
    fn texts_become_the_three_tensors_and_ids_text_again() {
        let (cache, assets) = (TextCache::default(), assets());
        let texts = ["hello world".to_owned(), "world".to_owned()];
        let tensors = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &plain(&texts),
            &setting("max_length", "3"),
            &|| false,
        )
        .unwrap()
        .unwrap();
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, NAMES);
        assert_eq!(tensors[0].shape, [2, 3]);
        let ids: Vec<i64> = tensors[0]
            .data
            .as_chunks::<8>()
            .0
            .iter()
            .map(|b| i64::from_le_bytes(*b))
            .collect();
        assert_eq!(ids, [2, 3, 0, 3, 0, 0]);
        assert_eq!(
            detokenize(&cache, &assets, 64 << 20, "tok", &[2, 3], true).unwrap(),
            "hello world"
        );
        // Parsed once for both calls.
        assert_eq!(cache.kept.lock().unwrap().len(), 1);
        // A pair is one row; a request's truncation is named as `tokenize-pairs` names it.
        let pair = Request {
            inputs: vec![Input {
                text: "hello".to_owned(),
                pair: Some("world world".to_owned()),
            }],
            parameters: parameters(Some("only_second"), Some(2)).unwrap(),
        };
        let tensors = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &pair,
            &setting("max_length", "3"),
            &|| false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(tensors[0].shape, [1, 3]);
        assert_eq!(
            tensors[0].data[..16],
            [2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]
        );
        let error = parameters(Some("sideways"), None);
        assert!(matches!(error, Err(PluginError::BadRequest(m)) if m.contains("sideways")));
    }

    #[test]
    fn unknown_settings_missing_assets_and_files_past_the_memory_share_are_refused() {
        let (cache, assets) = (TextCache::default(), assets());
        let texts = ["hello".to_owned()];
        let error = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &plain(&texts),
            &setting("colour", "red"),
            &|| false,
        );
        assert!(matches!(error, Err(PluginError::Internal(m)) if m.contains("'colour'")));
        let error = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "other",
            &plain(&texts),
            &[],
            &|| false,
        );
        assert!(matches!(error, Err(PluginError::Internal(m)) if m.contains("no asset 'other'")));
        // A 1 KiB guest may not have the host parse a file of more than 128 bytes.
        let error = detokenize(&cache, &assets, 1 << 10, "tok", &[2], true);
        assert!(matches!(error, Err(PluginError::Internal(m)) if m.contains("at most 128 bytes")));
        let error = detokenize(&cache, &assets, 64 << 20, "tok", &[9], true);
        assert!(matches!(error, Err(PluginError::BadRequest(m)) if m.contains("id 9")));
        let error = tokenize(
            &cache,
            &assets,
            bounds(64 << 10),
            "tok",
            &plain(&["a".repeat(1025)]),
            &[],
            &|| false,
        );
        assert!(
            matches!(error, Err(PluginError::BadRequest(m)) if m.contains("at most 1024 bytes"))
        );
        let long = ["hello ".repeat(100)];
        let error = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &plain(&long),
            &setting("max_text_bytes", "10"),
            &|| false,
        );
        assert!(matches!(error, Err(PluginError::BadRequest(m)) if m.contains("at most 10 bytes")));
    }

    /// A text past both the plugin's `max_text_bytes` and the host's ceiling names the
    /// plugin's setting; a batch past the model's `max_batch_size` is refused before any text
    /// is tokenized; a call out of time before its first text has no answer.
    #[test]
    fn the_plugins_setting_and_the_models_batch_bound_are_named() {
        let (cache, assets) = (TextCache::default(), assets());
        let texts = ["hello".to_owned()];
        // Past both, the plugin's own setting is named, not the host's ceiling.
        let huge = ["a".repeat(6 << 20)];
        let error = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &plain(&huge),
            &[],
            &|| false,
        );
        assert!(
            matches!(&error, Err(PluginError::BadRequest(m)) if m.contains("262144 bytes of text per request (max_text_bytes)")),
            "{error:?}"
        );
        // Out of time before the first text: no answer.
        // More texts than the model's max_batch_size: refused before any is tokenized.
        let batch = vec!["hello".to_owned(); 3];
        let error = tokenize(
            &cache,
            &assets,
            Bounds {
                memory_limit_bytes: 64 << 20,
                max_batch: Some(2),
            },
            "tok",
            &plain(&batch),
            &setting("batch", "true"),
            &|| panic!("nothing is tokenized"),
        );
        assert!(
            matches!(&error, Err(PluginError::BadRequest(m)) if m.contains("3 texts, and at most 2 a request are taken for this model")),
            "{error:?}"
        );
        let stopped = tokenize(
            &cache,
            &assets,
            bounds(64 << 20),
            "tok",
            &plain(&texts),
            &[],
            &|| true,
        );
        assert!(matches!(stopped, Ok(None)), "{stopped:?}");
    }
}
