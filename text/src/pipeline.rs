//! What a `tokenizer.json` may ask a tokenizer to do, checked before it is built: its stages
//! (normalizer, pre-tokenizer, post-processor, decoder) at most [`MAX_STEPS`] steps each, and
//! every regular expression in them (a `Split` pre-tokenizer's, a `Replace` normalizer's or
//! decoder's) one whose matching time this understands.
//!
//! `tokenizers` matches with `fancy-regex`: a pattern without look-arounds or back-references
//! goes to the `regex` crate, whose matching is linear in the text, and is taken as it is. A
//! pattern with them runs in a backtracking machine whose time can grow exponentially with the
//! text (`((a+)+)\2c` took 150 s over 256 KB), and which nothing can stop from outside. Such a
//! pattern is taken only in the shape real tokenizers use (GPT-2's `\s+(?!\S)`, Llama 3's and
//! Qwen's `\p{N}{1,3}`): no back-reference, conditional or subroutine call, no repetition inside a repetition,
//! no repeated alternation, and look-arounds of bounded length. Anything else is refused,
//! naming the pattern and why.

use serde_json::Value;

/// The most steps one stage of a tokenizer may have (a `Sequence`'s members, nested ones
/// counted in full). Real tokenizers have one to six.
pub const MAX_STEPS: usize = 16;

/// The stages of a `tokenizer.json`, by key.
const STAGES: [&str; 4] = ["normalizer", "pre_tokenizer", "post_processor", "decoder"];

/// The keys under which a `Sequence` lists its steps.
const SEQUENCE_KEYS: [&str; 4] = ["normalizers", "pretokenizers", "processors", "decoders"];

/// Checks `file` (a parsed `tokenizer.json`): an error names the stage or the pattern at fault.
pub fn check(file: &Value) -> Result<(), String> {
    for stage in STAGES {
        let Some(value) = file.get(stage) else {
            continue;
        };
        let steps = steps(value);
        if steps > MAX_STEPS {
            return Err(format!(
                "its {stage} has {steps} steps; a tokenizer may have at most {MAX_STEPS} per stage"
            ));
        }
        let mut patterns = Vec::new();
        regexes(value, &mut patterns);
        for pattern in patterns {
            check_regex(pattern).map_err(|why| {
                format!(
                    "its {stage} matches the regular expression {pattern:?}, which {why}; \
                     its matching time could grow without bound"
                )
            })?;
        }
    }
    Ok(())
}

/// How many steps a stage has: one, or a `Sequence`'s members' steps.
fn steps(value: &Value) -> usize {
    let nested = SEQUENCE_KEYS
        .iter()
        .find_map(|key| value.get(key).and_then(Value::as_array));
    match nested {
        Some(members) => members.iter().map(steps).sum(),
        None => usize::from(!value.is_null()),
    }
}

/// Every `{"Regex": pattern}` in `value`, at any depth.
fn regexes<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::Object(object) => {
            for (key, member) in object {
                match (key.as_str(), member) {
                    ("Regex", Value::String(pattern)) => found.push(pattern),
                    _ => regexes(member, found),
                }
            }
        }
        Value::Array(members) => members.iter().for_each(|m| regexes(m, found)),
        _ => {}
    }
}

/// Whether `pattern`'s matching time is one this understands; why not, otherwise.
pub fn check_regex(pattern: &str) -> Result<(), String> {
    let tree = fancy_regex::Expr::parse_tree(pattern)
        .map_err(|error| format!("does not parse ({error})"))?;
    if !fancy(&tree.expr) {
        return Ok(());
    }
    shape(&tree.expr, false)
}

/// Whether `expr` needs the backtracking machine.
fn fancy(expr: &fancy_regex::Expr) -> bool {
    use fancy_regex::Expr;
    match expr {
        Expr::LookAround(..)
        | Expr::Backref { .. }
        | Expr::BackrefWithRelativeRecursionLevel { .. }
        | Expr::BackrefExistsCondition(_)
        | Expr::Conditional { .. }
        | Expr::SubroutineCall(_)
        | Expr::UnresolvedNamedSubroutineCall { .. }
        | Expr::AtomicGroup(_)
        | Expr::KeepOut
        | Expr::ContinueFromPreviousMatchEnd => true,
        Expr::Concat(members) | Expr::Alt(members) => members.iter().any(fancy),
        Expr::Group(inner) => fancy(inner),
        Expr::Repeat { child, .. } => fancy(child),
        Expr::Empty
        | Expr::Any { .. }
        | Expr::Assertion(_)
        | Expr::Literal { .. }
        | Expr::Delegate { .. } => false,
    }
}

/// The shape rules of a backtracking pattern; `looking`: inside a look-around.
fn shape(expr: &fancy_regex::Expr, looking: bool) -> Result<(), String> {
    use fancy_regex::Expr;
    match expr {
        Expr::Backref { .. }
        | Expr::BackrefWithRelativeRecursionLevel { .. }
        | Expr::BackrefExistsCondition(_)
        | Expr::Conditional { .. } => Err("has a back-reference".into()),
        // A subroutine call may recurse: its cost has no bound the shape rules could state.
        Expr::SubroutineCall(_) | Expr::UnresolvedNamedSubroutineCall { .. } => {
            Err("calls a subroutine".into())
        }
        Expr::Concat(members) | Expr::Alt(members) => {
            members.iter().try_for_each(|m| shape(m, looking))
        }
        Expr::Group(inner) | Expr::AtomicGroup(inner) => shape(inner, looking),
        Expr::LookAround(inner, _) => shape(inner, true),
        Expr::Repeat { child, hi, .. } => {
            if looking && *hi == usize::MAX {
                return Err("repeats without bound inside a look-around".into());
            }
            if *hi > 1 && repeats(child) {
                return Err("repeats a repetition".into());
            }
            if *hi > 1 && alternates(child) {
                return Err("repeats an alternation".into());
            }
            shape(child, looking)
        }
        Expr::Empty
        | Expr::Any { .. }
        | Expr::Assertion(_)
        | Expr::Literal { .. }
        | Expr::Delegate { .. }
        | Expr::KeepOut
        | Expr::ContinueFromPreviousMatchEnd => Ok(()),
    }
}

/// Whether `expr` holds a repetition of more than one.
fn repeats(expr: &fancy_regex::Expr) -> bool {
    use fancy_regex::Expr;
    match expr {
        Expr::Repeat { hi, child, .. } => *hi > 1 || repeats(child),
        Expr::Concat(members) | Expr::Alt(members) => members.iter().any(repeats),
        Expr::Group(inner) | Expr::AtomicGroup(inner) | Expr::LookAround(inner, _) => {
            repeats(inner)
        }
        _ => false,
    }
}

/// Whether `expr` holds an alternation of more than one branch.
fn alternates(expr: &fancy_regex::Expr) -> bool {
    use fancy_regex::Expr;
    match expr {
        Expr::Alt(members) => members.len() > 1,
        Expr::Repeat { child, .. } => alternates(child),
        Expr::Concat(members) => members.iter().any(alternates),
        Expr::Group(inner) | Expr::AtomicGroup(inner) | Expr::LookAround(inner, _) => {
            alternates(inner)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pre-tokenizer patterns of GPT-2, Llama 3 (cl100k), Qwen 2 and GPT-4o (o200k), and
    /// a plain one.
    const REAL: [&str; 5] = [
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(a+)+b|\w+",
    ];

    #[test]
    fn the_patterns_of_real_tokenizers_are_taken() {
        for pattern in REAL {
            assert_eq!(check_regex(pattern), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn backtracking_shapes_are_refused_with_why() {
        for (pattern, why) in [
            (r"((a+)+)\2c", "repeats a repetition"),
            (r"(a)\1", "back-reference"),
            (r"(a+)+(?=c)", "repeats a repetition"),
            (r"(?:a|aa)*(?!b)", "repeats an alternation"),
            (r"a(?=[^x]*x)", "inside a look-around"),
            (r"(?<x>a)\k<x>", "back-reference"),
            // fancy-regex 0.17's subroutine calls recurse.
            (r"(a|b\g<1>)c", "calls a subroutine"),
            (r"(?<x>a|b\g<x>)c", "calls a subroutine"),
        ] {
            let error = check_regex(pattern).unwrap_err();
            assert!(error.contains(why), "{pattern}: {error}");
        }
    }

    #[test]
    fn long_pipelines_and_bad_patterns_are_named() {
        let step = serde_json::json!({"type": "Lowercase"});
        let long = serde_json::json!({
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Sequence", "normalizers": vec![step.clone(); 10]},
                {"type": "Sequence", "normalizers": vec![step; 7]},
            ]}
        });
        let error = check(&long).unwrap_err();
        assert!(error.contains("normalizer has 17 steps"), "{error}");
        let hostile = serde_json::json!({
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": r"((a+)+)\2c"}, "behavior": "Isolated", "invert": false}
            ]}
        });
        let error = check(&hostile).unwrap_err();
        assert!(
            error.contains("pre_tokenizer") && error.contains(r"((a+)+)\\2c"),
            "{error}"
        );
        assert_eq!(check(&serde_json::json!({"normalizer": null})), Ok(()));
    }
}
