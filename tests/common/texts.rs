//! Tokenizers and texts for the text plugins' tests, from Hugging Face's Python `tokenizers`
//! (`tests/clients/texts.py`, over `scripts/train_tokenizer.py`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::process::python_client;

/// The tokenizer families `scripts/train_tokenizer.py` trains, each with the token it pads with.
pub const FAMILIES: [(&str, &str); 5] = [
    ("bert", "[PAD]"),
    ("gpt2", "<|endoftext|>"),
    ("llama3", "<|end_of_text|>"),
    ("llama", "<unk>"),
    ("t5", "<pad>"),
];

/// A tokenizer of `family`'s layout trained into `dir`; its path.
pub fn train(family: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("{family}.json"));
    python_client(
        "texts.py",
        &format!("train:{family}:{}", path.display()),
        &Value::Null,
    );
    path
}

/// The first `n` lines of the corpus.
pub fn corpus(n: usize) -> Vec<String> {
    serde_json::from_value(python_client(
        "texts.py",
        &format!("corpus:{n}"),
        &Value::Null,
    ))
    .unwrap()
}
