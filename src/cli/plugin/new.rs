//! `trident plugin new`: a request-adapter or pipeline project in Rust, Python or JavaScript that
//! builds as it is, with a copy of trident's WIT, a README saying how to build, try and test it,
//! and (for the numbers adapter and the pipeline) golden cases it passes. The templates are in
//! `templates/`; request adapters and pipelines, the hooks most plugins start with (the examples
//! in `plugins/` show the others).

use std::path::{Path, PathBuf};

/// The languages a project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// Rust, built with cargo for `wasm32-wasip2`.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-qjs.
    Js,
}

/// What a project's adapter does to start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Numbers in the body become one FP32 tensor.
    Numbers,
    /// JPEG, PNG, WebP, BMP, GIF or TIFF images become one normalized tensor, through trident's native image
    /// primitives (`images.to-tensor`).
    Image,
    /// A text becomes `input_ids`, `attention_mask` and `token_type_ids` by the model's
    /// `tokenizer.json`, through trident's native text primitives (`text.tokenize`).
    Text,
    /// A pipeline (`trident:models`): numbers go to a model of the endpoint, called from the
    /// plugin, and its outputs come back as JSON.
    Pipeline,
}

/// trident's plugin interfaces, which every project builds against.
const WIT: &str = include_str!("../../../wit/plugin.wit");
/// The model-calling interfaces a pipeline builds against (beside `WIT`, as its dependency).
const MODELS_WIT: &str = include_str!("../../../wit/models/models.wit");
const README: &str = include_str!("templates/README.md");
/// The numbers adapter's golden cases (the same for the three languages).
const NUMBER_CASES: &str = include_str!("templates/numbers/cases.toml");
/// The pipeline's golden cases, the model stood in for (the same for the three languages).
const PIPELINE_CASES: &str = include_str!("templates/pipeline/cases.toml");

/// The tool versions `scripts/install-guest-tools` pins (the ones trident's tests build with).
const COMPONENTIZE_PY: &str = "0.25.1";
const COMPONENTIZE_QJS: &str = "0.4.5";

/// A project's files (path in the project, contents with `{{name}}` still in them), how it is
/// built, and where the build puts the component.
struct Template {
    files: Vec<(&'static str, &'static str)>,
    language: &'static str,
    build: String,
    wasm: String,
}

fn template(language: Language, kind: Kind, name: &str) -> Template {
    let source = |numbers: &'static str,
                  image: &'static str,
                  text: &'static str,
                  pipeline: &'static str| match kind {
        Kind::Numbers => numbers,
        Kind::Image => image,
        Kind::Text => text,
        Kind::Pipeline => pipeline,
    };
    let world = world(kind);
    match language {
        Language::Rust => Template {
            files: vec![
                ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
                (
                    "src/lib.rs",
                    source(
                        include_str!("templates/rust/lib.rs"),
                        include_str!("templates/image/lib.rs"),
                        include_str!("templates/text/lib.rs"),
                        include_str!("templates/pipeline/lib.rs"),
                    ),
                ),
            ],
            language: "Rust",
            build: "rustup target add wasm32-wasip2\ncargo build --release --target wasm32-wasip2"
                .into(),
            wasm: format!(
                "target/wasm32-wasip2/release/{}.wasm",
                name.replace('-', "_")
            ),
        },
        Language::Python => Template {
            files: vec![(
                "app.py",
                source(
                    include_str!("templates/python/app.py"),
                    include_str!("templates/image/app.py"),
                    include_str!("templates/text/app.py"),
                    include_str!("templates/pipeline/app.py"),
                ),
            )],
            language: "Python",
            build: format!(
                "python3 -m venv .venv && .venv/bin/pip install componentize-py=={COMPONENTIZE_PY}\n\
                 .venv/bin/componentize-py -d wit -w {world} componentize -p . app -o {name}.wasm"
            ),
            wasm: format!("{name}.wasm"),
        },
        Language::Js => Template {
            files: vec![(
                "app.js",
                source(
                    include_str!("templates/js/app.js"),
                    include_str!("templates/image/app.js"),
                    include_str!("templates/text/app.js"),
                    include_str!("templates/pipeline/app.js"),
                ),
            )],
            language: "JavaScript",
            build: format!(
                "npm install componentize-qjs@{COMPONENTIZE_QJS}\n\
                 npx componentize-qjs --wit wit --js app.js --world {world} --sync --output {name}.wasm"
            ),
            wasm: format!("{name}.wasm"),
        },
    }
}

/// The world a project of `kind` is built for.
fn world(kind: Kind) -> &'static str {
    match kind {
        Kind::Pipeline => "pipeline-plugin",
        Kind::Numbers | Kind::Image | Kind::Text => "request-adapter-plugin",
    }
}

/// A project name: lower-case letters, digits and dashes, starting with a letter, at most 64
/// characters (a valid Cargo package and file name, nothing a shell or path could misread).
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 64;
    if valid {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a plugin name: lower-case letters, digits and '-', starting with a \
             letter, at most 64 characters"
        ))
    }
}

/// What the README says of testing the project: how to run the golden cases the project comes
/// with (numbers), or how to write some.
fn test_section(kind: Kind, wasm: &str) -> String {
    match kind {
        Kind::Numbers => format!(
            "Test it against its golden cases (`cases.toml`: each payload and what the adapter must \
             answer), which trident also runs every time it loads the plugin:\n\n```sh\n\
             trident plugin test {wasm} --cases cases.toml\n```"
        ),
        Kind::Pipeline => format!(
            "Its golden cases (`cases.toml`) stand in for the model it calls (each call's answer, \
             in order), so they run where you build, without the model:\n\n```sh\n\
             trident plugin test {wasm} --cases cases.toml --model affine\n```\n\n\
             `--model` gives it the models the manifest entry will name (`models = [\"affine\"]`)."
        ),
        Kind::Image | Kind::Text => format!(
            "Write golden cases for it (trident's book, docs/plugins/writing.md, \"Golden cases\") and run them \
             with `trident plugin test {wasm} --cases cases.toml` and the same `--asset` and \
             `--config` as above."
        ),
    }
}

/// What the README says the project does, and how it says to try it.
fn what_and_try(kind: Kind, wasm: &str) -> (&'static str, String) {
    match kind {
        Kind::Numbers => (
            "a body of numbers separated by commas or white space becomes one FP32 tensor `[1, n]`",
            format!(
                "echo \"1, 2, 3\" | trident plugin run {wasm} --hook request --body - --content-type text/plain"
            ),
        ),
        Kind::Image => (
            "an image (JPEG, PNG, WebP, BMP, GIF or TIFF; raw, or base64 in JSON) becomes one normalized image tensor, made by \
             trident's native image primitives (`images.to-tensor`)",
            format!(
                "trident plugin run {wasm} --hook request --body photo.jpg --content-type image/jpeg \
                 --memory-limit-mb 128"
            ),
        ),
        Kind::Pipeline => (
            "the body, a JSON array of numbers, goes to the model named by the \
             `model` config (default `affine`) as `INPUT0`, FP32 `[1, n]`, called from the plugin \
             through `trident:models`, and the reply is the model's FP32 outputs as JSON",
            format!(
                "trident serve --model-repository examples/models --plugins plugins.toml\n\
                 # with plugins.toml:\n\
                 # [plugins.{{{{name}}}}]\n\
                 # path = \"{wasm}\"\n\
                 # sha256 = \"...\"  (trident plugin inspect {wasm})\n\
                 # content_types = [\"application/json\"]\n\
                 # models = [\"affine\"]\n\
                 # [models.affine]\n\
                 # pipeline = \"{{{{name}}}}\"\n\
                 curl -s -d '[1, 2]' -H 'Content-Type: application/json' 127.0.0.1:8080/invocations"
            ),
        ),
        Kind::Text => (
            "a UTF-8 text becomes `input_ids`, `attention_mask` and `token_type_ids` by the model's \
             `tokenizer.json` (the asset `tokenizer`), made by trident's native text primitives \
             (`text.tokenize`)",
            format!(
                "echo \"Hello world\" | trident plugin run {wasm} --hook request --body - \
                 --content-type text/plain --asset tokenizer=tokenizer.json --config max_length=16"
            ),
        ),
    }
}

/// Writes the project `name` in `parent/name` (which must not exist), an adapter of `kind`; its
/// folder, and how to build it.
pub fn create(
    name: &str,
    language: Language,
    kind: Kind,
    parent: &Path,
) -> Result<(PathBuf, String), String> {
    check_name(name)?;
    let dir = parent.join(name);
    if dir.exists() {
        return Err(format!("{} already exists", dir.display()));
    }
    let template = template(language, kind, name);
    let (what, try_it) = what_and_try(kind, &template.wasm);
    let (kind_name, wit, try_intro) = match kind {
        Kind::Pipeline => (
            "pipeline",
            "`wit/models.wit` (`trident:models`) and `wit/deps/plugin/plugin.wit` are the copies \
             of trident's interfaces it builds against.",
            "Try it on the example `affine` model (`OUTPUT0 = 2 * INPUT0 + 1`):",
        ),
        _ => (
            "request adapter",
            "`wit/plugin.wit` is the copy of trident's plugin interfaces it builds against.",
            "Try it without a model, with the limits the server applies:",
        ),
    };
    let readme = README
        .replace("{{kind}}", kind_name)
        .replace("{{wit}}", wit)
        .replace("{{try_intro}}", try_intro)
        .replace("{{what}}", what)
        .replace("{{try}}", &try_it)
        .replace("{{test}}", &test_section(kind, &template.wasm))
        .replace("{{language}}", template.language)
        .replace("{{build}}", &template.build)
        .replace("{{wasm}}", &template.wasm);
    let mut files: Vec<(&str, String)> = template
        .files
        .iter()
        .map(|(path, text)| (*path, (*text).to_owned()))
        .collect();
    match kind {
        Kind::Pipeline => {
            files.push(("wit/models.wit", MODELS_WIT.to_owned()));
            files.push(("wit/deps/plugin/plugin.wit", WIT.to_owned()));
            files.push(("cases.toml", PIPELINE_CASES.to_owned()));
        }
        Kind::Numbers => {
            files.push(("wit/plugin.wit", WIT.to_owned()));
            files.push(("cases.toml", NUMBER_CASES.to_owned()));
        }
        Kind::Image | Kind::Text => files.push(("wit/plugin.wit", WIT.to_owned())),
    }
    files.push(("README.md", readme));
    for (path, text) in files {
        let path = dir.join(path);
        let write = std::fs::create_dir_all(path.parent().unwrap_or(&dir))
            .and_then(|()| std::fs::write(&path, text.replace("{{name}}", name)));
        write.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok((dir, template.build))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_a_path_or_shell_could_misread_are_refused() {
        for bad in [
            "",
            "../x",
            "a/b",
            "Caps",
            "1st",
            "a b",
            "a;b",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["csv", "my-adapter-2"] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn an_existing_folder_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("taken")).unwrap();
        let error = create("taken", Language::Rust, Kind::Numbers, dir.path()).unwrap_err();
        assert!(error.contains("already exists"), "{error}");
    }
}
