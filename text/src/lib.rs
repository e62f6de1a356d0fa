//! Text pre- and post-processing as SageMaker customers write it for a language model: texts
//! become token ids the way Hugging Face `tokenizers` makes them, and ids become text again,
//! whole or one streamed event at a time.
//!
//! - [`tokenizer`]: a `tokenizer.json` (BPE, WordPiece, Unigram, WordLevel; normalizers,
//!   pre-tokenizers, post-processors, added and special tokens) loaded and checked once;
//! - [`body`]: which texts a request body holds (`text/plain`, or JSON: a string, a list, or a
//!   field naming them);
//! - [`settings`]: how texts become tensors (length, padding, truncation, element type) and how
//!   large they may be, from a plugin's configuration, with safe defaults;
//! - [`encode`]: texts to `input_ids`, `attention_mask` and `token_type_ids`;
//! - `bert_ascii`: the tokenizer's normalizer and pre-tokenizer, BERT's on ASCII text done in one
//!   pass each;
//! - [`pipeline`]: what a tokenizer's stages may be: how many steps, which regular expressions;
//! - [`scores`]: a Unigram model's scores read as Hugging Face's own builds read them;
//! - [`decode`]: ids to text, and [`decode::StreamDecoder`], which turns ids arriving a few at a
//!   time into exactly the new text each time, with state small enough to keep between calls.
//!
//! Every failure is an [`Error`] a client can read: 400 for a text that is too long or not
//! UTF-8, 415 for a body that holds no text this takes. Safe Rust only; the cost of a request is
//! bounded by its text's length, which is checked before anything is tokenized.

#![forbid(unsafe_code)]

mod bert_ascii;
pub mod body;
pub mod decode;
pub mod encode;
pub mod pipeline;
pub mod request;
pub mod scores;
pub mod settings;
pub mod tokenizer;

#[cfg(test)]
mod tests;

pub use settings::{Encode, Limits};
pub use tokenizer::Tokenizer;

/// Why a text cannot be made into tensors, or ids into text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The text is too long, not UTF-8, or the body malformed: 400.
    BadRequest(String),
    /// The body is not a kind of text this takes: 415.
    Unsupported(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadRequest(message) | Error::Unsupported(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}
