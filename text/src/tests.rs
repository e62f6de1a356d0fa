//! Tests of encoding and streamed decoding on two small tokenizers written out as JSON: a BERT
//! WordPiece and a GPT-2 byte-level BPE. (Agreement with Hugging Face's Python library, id for
//! id on a real corpus, is checked by `tests/text_classification.rs` through the plugins.)

use serde_json::{Value, json};

use crate::decode::{MAX_CONTEXT, MAX_PENDING, StreamDecoder, decode, output_ids};
use crate::encode::{encode, tensor_bytes};
use crate::settings::{Datatype, Padding};
use crate::{Encode, Error, Limits, Tokenizer};

fn special(id: u32, content: &str) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false,
           "rstrip": false, "normalized": false, "special": true})
}

/// A BERT tokenizer of thirteen tokens.
fn wordpiece(encode: &Encode) -> Tokenizer {
    let words = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "play", "##ing", "the", "game", ".", ",", "hello",
        "world", "!",
    ];
    let vocab: serde_json::Map<String, Value> = words
        .iter()
        .enumerate()
        .map(|(id, word)| ((*word).to_owned(), json!(id)))
        .collect();
    let file = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    });
    Tokenizer::from_json(file.to_string().as_bytes(), encode).unwrap()
}

/// GPT-2's map of bytes to the characters that stand for them in a byte-level vocabulary.
fn byte_chars() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut shifted = 256;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                shifted += 1;
                char::from_u32(shifted - 1).unwrap()
            }
        })
        .collect()
}

/// A byte-level BPE (GPT-2's layout) of the 256 bytes, `hello` merged, and `<|endoftext|>`.
fn byte_level(encode: &Encode) -> Tokenizer {
    let mut vocab: serde_json::Map<String, Value> = byte_chars()
        .iter()
        .enumerate()
        .map(|(id, c)| (c.to_string(), json!(id)))
        .collect();
    let merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o")];
    for (a, b) in merges {
        let id = vocab.len();
        vocab.insert(format!("{a}{b}"), json!(id));
    }
    let end = u32::try_from(vocab.len()).unwrap();
    let level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let file = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(end, "<|endoftext|>")],
        "normalizer": null, "pre_tokenizer": level, "post_processor": level, "decoder": level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab,
                  "merges": merges.iter().map(|(a, b)| format!("{a} {b}")).collect::<Vec<_>>()}
    });
    Tokenizer::from_json(file.to_string().as_bytes(), encode).unwrap()
}

fn settings(max_length: usize, padding: Padding, truncation: bool) -> Encode {
    Encode {
        max_length,
        padding,
        truncation,
        ..Encode::default()
    }
}

#[test]
fn texts_become_padded_rows_of_ids_masks_and_types() {
    let tokenizer = wordpiece(&settings(8, Padding::MaxLength, true));
    let encoded = encode(
        &tokenizer,
        &["Hello, world!", "playing"],
        &Limits::default(),
    )
    .unwrap();
    assert_eq!((encoded.rows, encoded.length), (2, 8));
    assert_eq!(
        encoded.input_ids,
        [2, 10, 9, 11, 12, 3, 0, 0, 2, 4, 5, 3, 0, 0, 0, 0]
    );
    assert_eq!(
        encoded.attention_mask,
        [1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]
    );
    assert_eq!(encoded.token_type_ids, [0; 16]);
    assert_eq!(encoded.shape(true), [2, 8]);
    assert_eq!(tensor_bytes(&[1, 258], Datatype::Int64), {
        let mut b = 1i64.to_le_bytes().to_vec();
        b.extend(258i64.to_le_bytes());
        b
    });
    assert_eq!(tensor_bytes(&[258], Datatype::Int32), 258i32.to_le_bytes());

    // Truncation keeps the special tokens; the longest padding pads to the longest row.
    let short = wordpiece(&settings(4, Padding::Longest, true));
    let encoded = encode(&short, &["the game, the game", "play"], &Limits::default()).unwrap();
    assert_eq!(encoded.input_ids, [2, 6, 7, 3, 2, 4, 3, 0]);
}

#[test]
fn texts_past_a_limit_are_refused_before_they_are_tokenized() {
    let strict = wordpiece(&settings(4, Padding::MaxLength, false));
    let error = encode(&strict, &["the game, the game"], &Limits::default()).unwrap_err();
    assert_eq!(
        error,
        Error::BadRequest(
            "the text is 7 tokens long; this model takes at most 4 (and the endpoint does not \
             truncate)"
                .into()
        )
    );
    let limits = Limits {
        max_text_bytes: 10,
        max_texts: 2,
    };
    let error = encode(&strict, &["play", "the game, the"], &limits).unwrap_err();
    assert!(
        matches!(&error, Error::BadRequest(m) if m == "the texts are 17 bytes long; this endpoint takes at most 10 bytes of text per request"),
        "{error}"
    );
    assert!(encode(&strict, &["a", "b", "c"], &limits).is_err());
    let single = Encode {
        batch: false,
        ..Encode::default()
    };
    assert!(encode(&wordpiece(&single), &["a", "b"], &limits).is_err());
}

#[test]
fn settings_the_tokenizer_cannot_serve_are_refused_at_load() {
    let error = Tokenizer::from_json(b"{\"model\": 1}", &Encode::default()).unwrap_err();
    assert!(error.starts_with("not a tokenizer.json"), "{error}");
    let unknown = Encode {
        pad_token: Some("<nothing>".into()),
        ..Encode::default()
    };
    let file = json!({"model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"}});
    let error = Tokenizer::from_json(file.to_string().as_bytes(), &unknown).unwrap_err();
    assert_eq!(
        error,
        "pad_token = '<nothing>': the tokenizer has no such token"
    );
    let error = Tokenizer::from_json(b"", &settings(2, Padding::MaxLength, true));
    assert!(error.is_err());
    let short = settings(2, Padding::MaxLength, true);
    let file = serde_json::to_vec(wordpiece(&Encode::default()).inner()).unwrap();
    let error = Tokenizer::from_json(&file, &short).unwrap_err();
    assert!(
        error.starts_with("max_length = 2: the tokenizer adds 2 special tokens"),
        "{error}"
    );
}

/// Every way of cutting `ids` into steps gives the whole sequence's text.
fn assert_streams_like_the_whole(tokenizer: &Tokenizer, ids: &[u32], skip_special: bool) {
    let whole = decode(tokenizer, ids, skip_special).unwrap();
    for step in 1..=3 {
        let mut stream = StreamDecoder::new();
        let mut text = String::new();
        for chunk in ids.chunks(step) {
            // Each step goes through its bytes, as it does between plugin calls.
            let mut kept = StreamDecoder::from_bytes(&stream.to_bytes()).unwrap();
            text += &kept.step(tokenizer, chunk, skip_special).unwrap();
            stream = kept;
        }
        text += &stream.finish(tokenizer, skip_special).unwrap();
        assert_eq!(text, whole, "steps of {step} ids");
    }
}

#[test]
fn streamed_text_is_the_whole_text_across_characters_merges_and_pieces() {
    let gpt = byte_level(&settings(512, Padding::Longest, true));
    let text = "hello wörld 👋🏽 終わり hello";
    let ids = gpt.inner().encode(text, false).unwrap().get_ids().to_vec();
    assert_eq!(decode(&gpt, &ids, false).unwrap(), text);
    assert_streams_like_the_whole(&gpt, &ids, false);

    // The emoji's four bytes are four tokens: nothing is sent until the last one.
    let wave: Vec<u32> = gpt.inner().encode("👋", false).unwrap().get_ids().to_vec();
    assert_eq!(wave.len(), 4);
    let mut stream = StreamDecoder::new();
    let sent: Vec<String> = wave
        .iter()
        .map(|id| stream.step(&gpt, &[*id], false).unwrap())
        .collect();
    assert_eq!(sent, ["", "", "", "👋"]);

    let bert = wordpiece(&settings(512, Padding::Longest, true));
    let ids = bert
        .inner()
        .encode("Hello, playing the game.", true)
        .unwrap()
        .get_ids()
        .to_vec();
    assert_eq!(
        decode(&bert, &ids, true).unwrap(),
        "hello, playing the game."
    );
    assert_streams_like_the_whole(&bert, &ids, true);
    assert_streams_like_the_whole(&bert, &ids, false);
}

#[test]
fn a_stream_holds_back_a_bounded_number_of_ids() {
    let gpt = byte_level(&settings(512, Padding::Longest, true));
    let end = u32::try_from(gpt.vocabulary() - 1).unwrap();
    let mut stream = StreamDecoder::new();
    // A byte's id is the byte.
    assert_eq!(stream.step(&gpt, &[0x48], true).unwrap(), "H");
    for _ in 0..1000 {
        assert_eq!(stream.step(&gpt, &[end], true).unwrap(), "");
        assert!(stream.to_bytes().len() <= 4 * (2 * MAX_PENDING + 3));
    }
    // A lone continuation byte never completes a character: it is sent as it stands.
    let mut text = String::new();
    for _ in 0..=MAX_PENDING {
        text += &stream.step(&gpt, &[0x80], true).unwrap();
    }
    assert!(!text.is_empty() && stream.to_bytes().len() <= 4 * (2 * MAX_PENDING + 3));
    let error = stream.step(&gpt, &[end + 1], true).unwrap_err();
    assert!(matches!(error, Error::BadRequest(m) if m.contains(&format!("id {}", end + 1))));
    assert_eq!(StreamDecoder::from_bytes(&[1, 0, 0]), None);
    assert_eq!(StreamDecoder::from_bytes(&[9, 0, 0, 0, 1, 0, 0, 0]), None);
}

/// A step of many ids (an event of 16,384) is sent whole and keeps only its last ids as the
/// next step's context: the state stays a few dozen ids (it was every id of the event, which
/// passed a stream state's 64 KiB and ended the stream), and the steps after it still add up
/// to the whole text.
#[test]
fn a_step_of_many_ids_keeps_a_bounded_context() {
    let gpt = byte_level(&settings(1 << 20, Padding::Longest, false));
    let text = "hello wörld 👋🏽 終わり ".repeat(700);
    let ids = gpt
        .inner()
        .encode(text.as_str(), false)
        .unwrap()
        .get_ids()
        .to_vec();
    assert!(ids.len() > 16_384, "{} ids", ids.len());
    let (event, rest) = ids.split_at(16_384);
    let mut stream = StreamDecoder::new();
    let mut streamed = stream.step(&gpt, event, false).unwrap();
    assert!(stream.to_bytes().len() <= 4 * (MAX_CONTEXT + MAX_PENDING + 2));
    for chunk in rest.chunks(3) {
        let mut kept = StreamDecoder::from_bytes(&stream.to_bytes()).unwrap();
        streamed += &kept.step(&gpt, chunk, false).unwrap();
        stream = kept;
        assert!(stream.to_bytes().len() <= 4 * (MAX_CONTEXT + MAX_PENDING + 2));
    }
    streamed += &stream.finish(&gpt, false).unwrap();
    let differs = streamed.bytes().zip(text.bytes()).position(|(a, b)| a != b);
    assert!(
        streamed == text,
        "{} bytes streamed, {} whole; first difference at {differs:?}",
        streamed.len(),
        text.len()
    );
}

#[test]
fn a_stream_resumes_from_its_kept_state_and_reads_ids_from_a_response() {
    let gpt = byte_level(&settings(512, Padding::Longest, true));
    let mut first = StreamDecoder::resume(None).unwrap();
    // "é" is two bytes, so two ids: the first sends nothing and is kept.
    assert_eq!(first.step(&gpt, &[0xc3], true).unwrap(), "");
    let mut resumed = StreamDecoder::resume(Some(&first.to_bytes())).unwrap();
    assert_eq!(resumed.step(&gpt, &[0xa9], true).unwrap(), "é");
    let error = StreamDecoder::resume(Some(&[1, 2, 3])).unwrap_err();
    assert!(error.contains("not a decoder's"), "{error}");

    let response = |json: &str| match serde_json::from_str(json).unwrap() {
        Value::Object(map) => map,
        _ => unreachable!(),
    };
    assert_eq!(
        output_ids(&response(r#"{"ids": [1, 2]}"#), "ids"),
        Ok(vec![1, 2])
    );
    assert_eq!(output_ids(&response(r#"{"ids": 7}"#), "ids"), Ok(vec![7]));
    for (json, wrong) in [
        (r#"{"other": 1}"#, "no output 'ids'"),
        (r#"{"ids": [1, -1]}"#, "holds -1"),
        (r#"{"ids": 4294967296}"#, "holds 4294967296"),
        (r#"{"ids": "1"}"#, "which is not a token id"),
        (r#"{"ids": [1.5]}"#, "holds 1.5"),
    ] {
        let error = output_ids(&response(json), "ids").unwrap_err();
        assert!(error.contains(wrong), "{json}: {error}");
    }
}

#[test]
fn unigram_scores_are_read_as_the_default_build_of_tokenizers_reads_them() {
    use crate::scores::{as_tokenizers_reads_them, default_build_f64};
    // Scores of a Unigram model trained by the Python library, and the doubles it reads them
    // as (its `to_str()`): one unit in the last place off the nearest double.
    for (text, read) in [
        ("-7.5814494909640935", "-7.581449490964093"),
        ("-7.6079815764572984", "-7.607981576457299"),
        ("-7.7652540159543655", "-7.765254015954365"),
    ] {
        let read: f64 = read.parse().unwrap();
        assert_eq!(default_build_f64(text), Some(read), "{text}");
        assert_ne!(
            text.parse::<f64>().unwrap(),
            read,
            "{text}: the nearest double"
        );
    }
    for (text, value) in [
        ("0", Some(0.0)),
        ("-2.5", Some(-2.5)),
        ("1e3", Some(1000.0)),
        ("12345678901234567890123", Some(1.2345678901234567e22)),
        ("1e400", None),
        ("1e-400", Some(0.0)),
        ("abc", None),
        ("1.", None),
        ("--1", None),
    ] {
        assert_eq!(default_build_f64(text), value, "{text}");
    }

    let file = |scores: &[&str]| {
        let vocab: Vec<String> = scores
            .iter()
            .enumerate()
            .map(|(i, score)| format!("[\"p{i}\", {score}]"))
            .collect();
        format!(
            "{{\"version\": \"1.0\", \"model\": {{\"type\": \"Unigram\", \"unk_id\": 0, \
             \"vocab\": [{}]}}}}",
            vocab.join(", ")
        )
    };
    let scores = ["0.0", "-7.5814494909640935", "-3.25", "-7.6079815764572984"];
    let original = file(&scores);
    let read = as_tokenizers_reads_them(original.as_bytes());
    // Whatever this build's serde_json does with floats, it now reads what the default reads.
    let value: Value = serde_json::from_slice(&read).unwrap();
    let got: Vec<f64> = value["model"]["vocab"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry[1].as_f64().unwrap())
        .collect();
    let wanted: Vec<f64> = scores
        .iter()
        .map(|s| default_build_f64(s).unwrap())
        .collect();
    assert_eq!(got, wanted);
    // Other models, and files that are not tokenizers, are left as they are.
    let bpe = original.replace("Unigram", "BPE");
    assert!(matches!(
        as_tokenizers_reads_them(bpe.as_bytes()),
        std::borrow::Cow::Borrowed(_)
    ));
    assert!(matches!(
        as_tokenizers_reads_them(b"[1, 2"),
        std::borrow::Cow::Borrowed(_)
    ));
}

/// A pair as `tokenizers`' `post_process` makes it (0.23.3 and Python's: the texts tokenized
/// whole by `raw`, a tokenizer without truncation or padding, then its `truncate_encodings` and
/// its template), for an oracle that is not this crate's arithmetic. (0.23.2's own `encode`
/// stops tokenizing each text at the length, and decides a pair's cut on the shortened texts.)
fn oracle(
    raw: &tokenizers::Tokenizer,
    a: &str,
    b: Option<&str>,
    params: &tokenizers::TruncationParams,
) -> tokenizers::Result<tokenizers::Encoding> {
    use tokenizers::PostProcessor;
    let processor = raw.get_post_processor().unwrap();
    let first = raw.encode_fast(a, false)?;
    let second = b
        .map(|b| {
            let mut e = raw.encode_fast(b, false)?;
            e.set_type_ids(vec![1; e.len()]);
            tokenizers::Result::Ok(e)
        })
        .transpose()?;
    let added = processor.added_tokens(second.is_some());
    let params = tokenizers::TruncationParams {
        max_length: params
            .max_length
            .checked_sub(added)
            .ok_or("shorter than the special tokens")?,
        ..*params
    };
    let (first, second) =
        tokenizers::utils::truncation::truncate_encodings(first, second, &params)?;
    processor.process(first, second, true)
}

/// Pairs and a request's own truncation give `tokenizers`' own rows ([`oracle`]), for two
/// tokenizers, five texts, every pair of them and each alone, five lengths, three strategies.
#[test]
fn pairs_and_request_parameters_give_the_rows_tokenizers_gives() {
    use crate::encode::encode_request_within;
    use crate::request::{Input, Parameters, Truncation};
    use tokenizers::{TruncationParams, TruncationStrategy};

    let texts = [
        "",
        "play",
        "hello world",
        "the game, the game, the game!",
        "playing the game playing the game playing the game playing",
    ];
    let strategies = [
        (Truncation::LongestFirst, TruncationStrategy::LongestFirst),
        (Truncation::OnlyFirst, TruncationStrategy::OnlyFirst),
        (Truncation::OnlySecond, TruncationStrategy::OnlySecond),
    ];
    for make in [wordpiece, byte_level] {
        let configured = make(&settings(16, Padding::Longest, true));
        let raw = make(&settings(100, Padding::Longest, false)).inner;
        for max_length in [3, 4, 5, 7, 16] {
            for (ours, theirs) in strategies {
                let params = TruncationParams {
                    max_length,
                    strategy: theirs,
                    ..TruncationParams::default()
                };
                for a in texts {
                    for b in texts.iter().map(|b| Some(*b)).chain([None]) {
                        let input = Input {
                            text: a.to_owned(),
                            pair: b.map(str::to_owned),
                        };
                        let parameters = Parameters {
                            truncation: Some(ours),
                            max_length: Some(max_length),
                        };
                        let ours = encode_request_within(
                            &configured,
                            &[input],
                            &parameters,
                            &Limits::default(),
                            &|| false,
                        );
                        let theirs = oracle(&raw, a, b, &params);
                        let case = format!("{a:?} + {b:?}, {parameters:?}");
                        match (ours, theirs) {
                            (Ok(Some(ours)), Ok(theirs)) => {
                                assert_eq!(ours.input_ids, theirs.get_ids(), "{case}");
                                assert_eq!(ours.token_type_ids, theirs.get_type_ids(), "{case}");
                                assert!(ours.attention_mask.iter().all(|m| *m == 1), "{case}");
                            }
                            (Err(Error::BadRequest(_)), Err(_)) => {}
                            (ours, theirs) => panic!("{case}: {ours:?} against {theirs:?}"),
                        }
                    }
                }
            }
        }
        // Without parameters a pair is truncated by the settings.
        let pair = Input {
            text: texts[3].to_owned(),
            pair: Some(texts[4].to_owned()),
        };
        let ours = encode_request_within(
            &make(&settings(7, Padding::Longest, true)),
            &[pair],
            &Parameters::default(),
            &Limits::default(),
            &|| false,
        )
        .unwrap()
        .unwrap();
        let params = TruncationParams {
            max_length: 7,
            ..TruncationParams::default()
        };
        let theirs = oracle(&raw, texts[3], Some(texts[4]), &params).unwrap();
        assert_eq!(ours.input_ids, theirs.get_ids());
    }
}

/// A request may shorten its rows, never lengthen them, and may refuse to be cut; a row too
/// long then is 400 naming its length, and the settings' padding still applies.
#[test]
fn request_parameters_stay_within_the_settings() {
    use crate::encode::encode_request_within;
    use crate::request::{Input, Parameters, Truncation};

    let tokenizer = wordpiece(&settings(8, Padding::MaxLength, true));
    let run = |inputs: &[Input], parameters: Parameters| {
        encode_request_within(&tokenizer, inputs, &parameters, &Limits::default(), &|| {
            false
        })
    };
    let one = [Input::single("the game, the game, the game".to_owned())];
    let longer = Parameters {
        max_length: Some(9),
        ..Parameters::default()
    };
    assert!(matches!(run(&one, longer), Err(Error::BadRequest(m)) if m.contains("at most 8")));
    let refuse = Parameters {
        truncation: Some(Truncation::Refuse),
        ..Parameters::default()
    };
    assert!(
        matches!(run(&one, refuse), Err(Error::BadRequest(m)) if m.contains("is 10 tokens long")),
    );
    let shorter = Parameters {
        max_length: Some(4),
        ..Parameters::default()
    };
    let encoded = run(&one, shorter).unwrap().unwrap();
    assert_eq!(encoded.input_ids, [2, 6, 7, 3, 0, 0, 0, 0]);
    assert_eq!(encoded.attention_mask, [1, 1, 1, 1, 0, 0, 0, 0]);
    let pair = [Input {
        text: "play".to_owned(),
        pair: Some("the game".to_owned()),
    }];
    let encoded = run(&pair, Parameters::default()).unwrap().unwrap();
    assert_eq!(encoded.input_ids, [2, 4, 3, 6, 7, 3, 0, 0]);
    assert_eq!(encoded.token_type_ids, [0, 0, 0, 1, 1, 1, 0, 0]);
    let tight = Parameters {
        max_length: Some(2),
        ..Parameters::default()
    };
    assert!(matches!(run(&pair, tight), Err(Error::BadRequest(m)) if m.contains("adds 3")));
}
