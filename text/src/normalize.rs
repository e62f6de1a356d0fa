//! A tokenizer's normalizer, run as `tokenizers` runs it, with one shortcut: BERT's normalizer on
//! ASCII text.
//!
//! `tokenizers`' `BertNormalizer` walks a text four times (clean, Chinese characters, accents
//! stripped through NFD, lowercase), each time looking every character up in Unicode tables and
//! rebuilding the alignments of every byte: more than half of tokenizing a BERT text. On ASCII
//! those steps are a map of bytes: control characters removed (tab, newline and carriage return
//! kept), those three made spaces, letters lowercased; nothing else changes (ASCII has no Chinese
//! characters, no marks, and its NFD is itself). [`Normalize`] does that map in one pass and
//! hands every other text, and every other normalizer, to `tokenizers`. The text it makes is
//! the same (a unit test compares both on every ASCII byte under every setting); the offsets of
//! the normalized pieces into the original text are not kept, which trident never reads (its
//! tensors are ids, masks and segments).

use tokenizers::normalizers::{BertNormalizer, NormalizerWrapper};
use tokenizers::{NormalizedString, Normalizer};

/// `tokenizers`' normalizer `inner`, with BERT's normalizer on ASCII text done as a byte map.
pub(crate) struct Normalize<'a>(pub(crate) &'a NormalizerWrapper);

impl Normalizer for Normalize<'_> {
    fn normalize(&self, normalized: &mut NormalizedString) -> tokenizers::Result<()> {
        if let NormalizerWrapper::BertNormalizer(bert) = self.0 {
            if let Some(ascii) = bert_ascii(bert, normalized.get()) {
                // Original and normalized become the new text (its offsets are not kept).
                *normalized = NormalizedString::from(ascii);
                return Ok(());
            }
        }
        self.0.normalize(normalized)
    }
}

/// What `bert` makes of `text` when `text` is ASCII (`None` otherwise): `tokenizers`' clean
/// (`clean_text`: NUL and the other control characters removed, tab, newline and carriage
/// return made spaces) and lowercase (`lowercase`); its Chinese characters and accents leave
/// ASCII as it is.
fn bert_ascii(bert: &BertNormalizer, text: &str) -> Option<String> {
    if !text.is_ascii() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        let byte = match byte {
            b'\t' | b'\n' | b'\r' if bert.clean_text => b' ',
            0..=0x1f | 0x7f if bert.clean_text => continue,
            _ if bert.lowercase => byte.to_ascii_lowercase(),
            _ => byte,
        };
        out.push(char::from(byte));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ASCII byte, alone and among letters, under every setting of BERT's normalizer: the
    /// shortcut's text is `tokenizers`' own.
    #[test]
    fn bert_on_ascii_is_tokenizers_own() {
        let mut texts: Vec<String> = (0u8..0x80)
            .map(|byte| format!("Ab{}Cd", char::from(byte)))
            .collect();
        texts.push((0u8..0x80).map(char::from).collect());
        texts.push(" \tHello,\r\nWORLD!\u{7f} [CLS]\u{0}x\u{b}\u{c}\u{1c}y ".into());
        texts.push(String::new());
        for clean_text in [false, true] {
            for handle_chinese_chars in [false, true] {
                for strip_accents in [None, Some(false), Some(true)] {
                    for lowercase in [false, true] {
                        let bert = BertNormalizer::new(
                            clean_text,
                            handle_chinese_chars,
                            strip_accents,
                            lowercase,
                        );
                        for text in &texts {
                            let mut theirs = NormalizedString::from(text.as_str());
                            bert.normalize(&mut theirs).unwrap();
                            let ours = bert_ascii(&bert, text).unwrap();
                            assert_eq!(ours, theirs.get(), "{bert:?} on {text:?}");
                        }
                    }
                }
            }
        }
        let bert = BertNormalizer::default();
        assert_eq!(bert_ascii(&bert, "café"), None);
        assert_eq!(bert_ascii(&bert, "中"), None);
    }
}
