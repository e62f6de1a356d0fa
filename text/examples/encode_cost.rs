//! What tokenizing one text costs, natively: the floor under the tokenize plugin's work (its
//! default runs this same code in trident, through the `text` primitives, with the server's
//! allocator). One thread, after a warm-up; prints the microseconds per text.
//!
//!     cargo run --release -p trident-text --example encode_cost -- TOKENIZER_JSON TEXT_FILE MAX_LENGTH
//!
//! `scripts/bench --only text` runs it beside the classification rows, with the Python
//! `tokenizers` library's time for the same text (what the ensemble's preprocess step calls).

use std::time::Instant;

/// trident's server allocates through mimalloc, and so does this.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [tokenizer, text, max_length] = args.as_slice() else {
        return Err("usage: encode_cost TOKENIZER_JSON TEXT_FILE MAX_LENGTH".into());
    };
    let json = std::fs::read(tokenizer).map_err(|e| format!("{tokenizer}: {e}"))?;
    let text = std::fs::read_to_string(text).map_err(|e| format!("{text}: {e}"))?;
    let encode =
        trident_text::Encode::from_config(|key| (key == "max_length").then(|| max_length.clone()))?;
    let limits = trident_text::Limits::from_config(|_| None)?;
    let tokenizer = trident_text::Tokenizer::from_json(&json, &encode)?;
    let texts = [text];
    let run = |times: u32| -> Result<(), String> {
        for _ in 0..times {
            let encoded = trident_text::encode::encode(&tokenizer, &texts, &limits)
                .map_err(|e| e.to_string())?;
            std::hint::black_box(encoded);
        }
        Ok(())
    };
    run(200)?;
    let times = 2000;
    let started = Instant::now();
    run(times)?;
    let micros = started.elapsed().as_secs_f64() * 1e6 / f64::from(times);
    println!("{micros:.1}");
    Ok(())
}
