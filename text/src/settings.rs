//! What a plugin's configuration says about its texts: how they become tensors ([`Encode`]) and
//! how large they may be ([`Limits`]). Every key is optional; the defaults are a BERT
//! classifier's (512 tokens, padded to that length, truncated, special tokens added, INT64, a
//! batch dimension first) and limits that fit a 128 MiB plugin.

/// The element type of the id tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datatype {
    /// 64-bit integers (PyTorch's and ONNX's exports of Hugging Face models).
    Int64,
    /// 32-bit integers (TensorRT engines).
    Int32,
}

impl Datatype {
    /// Triton's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Datatype::Int64 => "INT64",
            Datatype::Int32 => "INT32",
        }
    }
}

/// How the texts of one request are brought to one length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Every row padded to `max_length`: a model whose sequence dimension is fixed.
    MaxLength,
    /// Rows padded to the longest of the request: a model whose sequence dimension is `-1`.
    Longest,
}

/// How texts become tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encode {
    /// Tokens of one row at most (special tokens included).
    pub max_length: usize,
    /// How rows are padded.
    pub padding: Padding,
    /// Whether a longer text is cut to `max_length` (else it is refused with 400).
    pub truncation: bool,
    /// Whether the tokenizer's post-processor adds its special tokens (`[CLS]`, `[SEP]`, `<s>`).
    pub add_special_tokens: bool,
    /// The element type of the tensors.
    pub datatype: Datatype,
    /// Whether the tensors have a batch dimension first (one row per text); without one a
    /// request carries exactly one text.
    pub batch: bool,
    /// The token rows are padded with; `None`: the tokenizer file's padding token, else the
    /// first of `[PAD]`, `<pad>`, `<|endoftext|>`, `</s>` it has, else id 0.
    pub pad_token: Option<String>,
}

impl Default for Encode {
    fn default() -> Encode {
        Encode {
            max_length: 512,
            padding: Padding::MaxLength,
            truncation: true,
            add_special_tokens: true,
            datatype: Datatype::Int64,
            batch: true,
            pad_token: None,
        }
    }
}

/// How large a request's texts may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of text in one request (all its texts together), checked before anything is
    /// tokenized: the tokenizer's memory and time grow with it.
    pub max_text_bytes: usize,
    /// Texts in one request.
    pub max_texts: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_text_bytes: 256 << 10,
            max_texts: 64,
        }
    }
}

/// The longest `max_length` a configuration may ask for.
pub const MAX_LENGTH: usize = 1 << 20;

/// The most bytes of text a configuration may allow at once.
pub const MAX_TEXT_BYTES: usize = 8 << 20;

/// The most texts a configuration may allow in one request.
pub const MAX_TEXTS: usize = 4096;

/// The value of `key` as a number in `1..=max`, or `default`.
fn number(value: Option<String>, key: &str, default: usize, max: usize) -> Result<usize, String> {
    let Some(value) = value else {
        return Ok(default);
    };
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{key} = '{value}': give a whole number from 1 to {max}"
        )),
    }
}

/// The value of `key` as `true` or `false`, or `default`.
fn boolean(value: Option<String>, key: &str, default: bool) -> Result<bool, String> {
    match value.as_deref().map(str::trim) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(format!("{key} = '{other}': give true or false")),
    }
}

/// Every configuration key [`Encode::from_config`] and [`Limits::from_config`] read: what a
/// plugin's configuration (or a guest's settings for the host's `text` primitives) may hold.
pub const KEYS: [&str; 9] = [
    "max_length",
    "padding",
    "truncation",
    "add_special_tokens",
    "datatype",
    "batch",
    "pad_token",
    "max_text_bytes",
    "max_texts",
];

impl Encode {
    /// The settings `config` gives (`max_length`, `padding`, `truncation`,
    /// `add_special_tokens`, `datatype`, `batch`, `pad_token`); an error names the key at fault.
    pub fn from_config(config: impl Fn(&str) -> Option<String>) -> Result<Encode, String> {
        let defaults = Encode::default();
        Ok(Encode {
            max_length: number(
                config("max_length"),
                "max_length",
                defaults.max_length,
                MAX_LENGTH,
            )?,
            padding: match config("padding").as_deref().map(str::trim) {
                None | Some("max_length") => Padding::MaxLength,
                Some("longest") => Padding::Longest,
                Some(other) => {
                    return Err(format!("padding = '{other}': give max_length or longest"));
                }
            },
            truncation: boolean(config("truncation"), "truncation", defaults.truncation)?,
            add_special_tokens: boolean(
                config("add_special_tokens"),
                "add_special_tokens",
                defaults.add_special_tokens,
            )?,
            datatype: match config("datatype")
                .map(|d| d.trim().to_ascii_uppercase())
                .as_deref()
            {
                None | Some("INT64") => Datatype::Int64,
                Some("INT32") => Datatype::Int32,
                Some(other) => return Err(format!("datatype = '{other}': give INT64 or INT32")),
            },
            batch: boolean(config("batch"), "batch", defaults.batch)?,
            pad_token: config("pad_token"),
        })
    }
}

impl Limits {
    /// The limits `config` gives (`max_text_bytes`, `max_texts`); an error names the key at
    /// fault.
    pub fn from_config(config: impl Fn(&str) -> Option<String>) -> Result<Limits, String> {
        let defaults = Limits::default();
        Ok(Limits {
            max_text_bytes: number(
                config("max_text_bytes"),
                "max_text_bytes",
                defaults.max_text_bytes,
                MAX_TEXT_BYTES,
            )?,
            max_texts: number(
                config("max_texts"),
                "max_texts",
                defaults.max_texts,
                MAX_TEXTS,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KEYS` is exactly what the two readers ask for: a key read but not listed would be
    /// refused by the host's primitives, one listed but not read would be accepted and ignored.
    #[test]
    fn keys_are_exactly_the_keys_read() {
        let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
        let config = |key: &str| {
            asked.borrow_mut().insert(key.to_owned());
            None
        };
        super::Encode::from_config(config).unwrap();
        super::Limits::from_config(config).unwrap();
        let listed: std::collections::BTreeSet<String> =
            super::KEYS.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(asked.into_inner(), listed);
    }

    fn config<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn defaults_are_a_bert_classifier_and_every_key_is_checked() {
        assert_eq!(Encode::from_config(config(&[])).unwrap(), Encode::default());
        let encode = Encode::from_config(config(&[
            ("max_length", "128"),
            ("padding", "longest"),
            ("truncation", "false"),
            ("datatype", "int32"),
            ("batch", "false"),
        ]))
        .unwrap();
        assert_eq!(encode.max_length, 128);
        assert_eq!(encode.padding, Padding::Longest);
        assert!(!encode.truncation && !encode.batch);
        assert_eq!(encode.datatype, Datatype::Int32);
        for (key, value) in [
            ("max_length", "0"),
            ("max_length", "2000000"),
            ("padding", "left"),
            ("truncation", "yes"),
            ("datatype", "FP32"),
        ] {
            let error = Encode::from_config(config(&[(key, value)])).unwrap_err();
            assert!(error.starts_with(&format!("{key} = '{value}'")), "{error}");
        }
        let error = Limits::from_config(config(&[("max_texts", "-1")])).unwrap_err();
        assert!(error.contains("max_texts"), "{error}");
    }
}
