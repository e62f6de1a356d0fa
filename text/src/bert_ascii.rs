//! A tokenizer's normalizer and pre-tokenizer, run as `tokenizers` runs them, with one shortcut:
//! BERT's on ASCII text.
//!
//! `tokenizers`' `BertNormalizer` walks a text four times (clean, Chinese characters, accents
//! stripped through NFD, lowercase), each time looking every character up in Unicode tables and
//! rebuilding the alignments of every byte, and its `BertPreTokenizer` looks every character
//! that is not ASCII punctuation up in seven tables of Unicode punctuation: together about three
//! quarters of tokenizing a BERT text. On ASCII both are maps of bytes: control characters
//! removed (tab, newline and carriage return kept), those three made spaces, letters lowercased
//! (ASCII has no Chinese characters, no marks, and its NFD is itself); then words split at
//! whitespace, each ASCII punctuation character a word of its own (ASCII has no other
//! punctuation). [`Normalize`] and [`PreTokenize`] do that in one pass each and hand every other
//! text, and every other normalizer and pre-tokenizer, to `tokenizers`. The words they make are
//! the same (unit tests compare both on every ASCII byte under every setting); the normalized
//! text's offsets into the original are not kept, which trident never reads (its tensors are ids,
//! masks and segments).

use tokenizers::normalizer::Range;
use tokenizers::normalizers::{BertNormalizer, NormalizerWrapper};
use tokenizers::{
    NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
    PreTokenizerWrapper,
};

/// `tokenizers`' normalizer `inner`, with BERT's normalizer on ASCII text done as a byte map.
pub(crate) struct Normalize<'a>(pub(crate) &'a NormalizerWrapper);

impl Normalizer for Normalize<'_> {
    fn normalize(&self, normalized: &mut NormalizedString) -> tokenizers::Result<()> {
        if let NormalizerWrapper::BertNormalizer(bert) = self.0
            && let Some(ascii) = bert_ascii(bert, normalized.get())
        {
            // Original and normalized become the new text (its offsets are not kept).
            *normalized = NormalizedString::from(ascii);
            return Ok(());
        }
        self.0.normalize(normalized)
    }
}

/// `tokenizers`' pre-tokenizer `inner`, with BERT's on ASCII text done in one pass.
pub(crate) struct PreTokenize<'a>(pub(crate) &'a PreTokenizerWrapper);

impl PreTokenizer for PreTokenize<'_> {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        let ascii = || {
            pretokenized
                .get_splits(OffsetReferential::Normalized, OffsetType::None)
                .iter()
                .all(|(text, _, _)| text.is_ascii())
        };
        if matches!(self.0, PreTokenizerWrapper::BertPreTokenizer(_)) && ascii() {
            return pretokenized.split(|_, piece| Ok(ascii_words(&piece)));
        }
        self.0.pre_tokenize(pretokenized)
    }
}

/// The words `BertPreTokenizer` splits the ASCII `piece` into: whitespace removed, each ASCII
/// punctuation character a word of its own.
fn ascii_words(piece: &NormalizedString) -> Vec<NormalizedString> {
    let mut words = Vec::new();
    let mut word = |range: std::ops::Range<usize>| {
        if !range.is_empty() {
            words.extend(piece.slice(Range::Normalized(range)));
        }
    };
    let mut start = 0;
    for (at, byte) in piece.get().bytes().enumerate() {
        if char::from(byte).is_whitespace() {
            word(start..at);
            start = at + 1;
        } else if byte.is_ascii_punctuation() {
            word(start..at);
            word(at..at + 1);
            start = at + 1;
        }
    }
    word(start..piece.len());
    words
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
    use tokenizers::pre_tokenizers::bert::BertPreTokenizer;

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

    /// Every ASCII byte, alone, doubled and among letters, and every byte together, split into
    /// the words `BertPreTokenizer` makes, with the same offsets.
    #[test]
    fn bert_words_on_ascii_are_tokenizers_own() {
        let mut texts: Vec<String> = (0u8..0x80)
            .flat_map(|byte| {
                let c = char::from(byte);
                [
                    format!("{c}"),
                    format!("{c}{c}"),
                    format!("ab{c}cd"),
                    format!(" {c}x{c} "),
                ]
            })
            .collect();
        texts.push((0u8..0x80).map(char::from).collect());
        texts.push("Hey friend!     How are you?!? [CLS] it's $5.00\t<tab>\n".into());
        let bert = PreTokenizerWrapper::BertPreTokenizer(BertPreTokenizer);
        let words = |pretokenized: &PreTokenizedString| -> Vec<(String, (usize, usize))> {
            pretokenized
                .get_splits(OffsetReferential::Original, OffsetType::Byte)
                .into_iter()
                .map(|(text, offsets, _)| (text.to_owned(), offsets))
                .collect()
        };
        for text in &texts {
            let mut theirs = PreTokenizedString::from(text.as_str());
            bert.pre_tokenize(&mut theirs).unwrap();
            let mut ours = PreTokenizedString::from(text.as_str());
            PreTokenize(&bert).pre_tokenize(&mut ours).unwrap();
            assert_eq!(words(&ours), words(&theirs), "on {text:?}");
        }
        // Not ASCII: tokenizers' own, Unicode punctuation included.
        let mut ours = PreTokenizedString::from("¿qué? «sí»");
        PreTokenize(&bert).pre_tokenize(&mut ours).unwrap();
        let texts: Vec<String> = words(&ours).into_iter().map(|(text, _)| text).collect();
        assert_eq!(texts, ["¿", "qué", "?", "«", "sí", "»"]);
    }
}
