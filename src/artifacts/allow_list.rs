//! Secure Mode's allow-list: the kinds of file an artifact may hold, each known by its name and
//! confirmed by its first bytes, since a name can lie. Under Secure Mode (any control) every
//! file of an artifact is one of these kinds or the artifact is refused, naming the file.
//!
//! | kind | names | contents |
//! |---|---|---|
//! | text and metadata | `.txt .md .csv .tsv .yaml .yml .toml .pbtxt .jsonl .tiktoken .vocab .merges .sig .xml .metadata .lock`, no extension | no NUL byte, no `#!`, no binary signature, no pickle ([`super::pickle`]) |
//! | JSON | `.json` | text that starts with `{` or `[` |
//! | ONNX, TensorFlow graphs, sentencepiece | `.onnx .pb .graphdef .model .pbtxt` | a protocol buffer's first field tag |
//! | tensor data | `.safetensors` | a safetensors header (its length, then `{`) |
//! | ONNX Runtime models | `.ort` | the FlatBuffer identifier `ORTM` |
//! | raw weights | `.data .onnx_data .index .plan .engine .data-*` (ONNX external data, TensorFlow variables, TensorRT plans), and any file that something of the artifact names as tensor bytes ([`mark_raw_data`]) | no binary signature of code, pickles, archives or compression |
//! | NumPy arrays | `.npy` | the NumPy magic (object arrays are the pickle control's) |
//! | images | `.png .jpg .jpeg .gif .bmp .webp` | their magic numbers |
//! | plugins | `.wasm` | the WebAssembly magic (plugins are held to the platform's keys too) |
//!
//! Kinds a control names (Python scripts, pickle-based files, `requirements.txt`, templates,
//! native code) are the rows' to refuse under their control; under Secure Mode without that
//! control they are let through here, as the operator chose. Everything else is refused:
//! archives and compressed files (what they hold cannot be held to the controls), executables,
//! unknown extensions, and any file whose first bytes say it is not what its name says.

use std::path::{Path, PathBuf};

use super::walk::Entry;

/// Why `entry` is not a kind of file Secure Mode allows, or `None` when it is.
pub fn refusal(entry: &Entry) -> Option<String> {
    if is_controlled(&entry.name) {
        return None;
    }
    let head = entry.head.as_slice();
    if let Some(what) = signature(head) {
        return Some(format!("is {what}"));
    }
    let extension = extension(&entry.name);
    let kind = match extension {
        // Tensor bytes a configuration or a model file names (`mark_raw_data`).
        _ if entry.raw_data => Kind::Raw,
        None => Kind::Text,
        Some(extension) => match KINDS
            .iter()
            .find(|(extensions, _)| extensions.contains(&extension))
        {
            Some((_, kind)) => *kind,
            None if extension.starts_with("data-") => Kind::Raw,
            None => {
                return Some(format!(
                    "is not a kind of file Secure Mode allows (.{extension}; see SECURITY.md)"
                ));
            }
        },
    };
    kind.check(head).err().map(|why| match extension {
        Some(extension) => format!("is named .{extension} but {why}"),
        None => why.to_owned(),
    })
}

/// What a kind of file must start with.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Json,
    Protobuf,
    Safetensors,
    /// ONNX Runtime's own format (a FlatBuffer whose identifier is `ORTM`).
    Ort,
    Raw,
    Numpy,
    Png,
    Jpeg,
    Gif,
    Bmp,
    Webp,
    Wasm,
}

#[rustfmt::skip]
const KINDS: &[(&[&str], Kind)] = &[
    // `xml`: OpenVINO's IR; `metadata` and `lock`: what `huggingface-cli download --local-dir`
    // leaves under `.cache/huggingface/`.
    (&["txt", "md", "csv", "tsv", "yaml", "yml", "toml", "jsonl", "tiktoken", "vocab", "merges", "sig", "xml", "metadata", "lock"], Kind::Text),
    (&["json"], Kind::Json),
    (&["onnx", "pb", "graphdef", "model", "pbtxt"], Kind::Protobuf),
    (&["safetensors"], Kind::Safetensors),
    (&["ort"], Kind::Ort),
    (&["data", "onnx_data", "index", "plan", "engine"], Kind::Raw),
    (&["npy"], Kind::Numpy),
    (&["png"], Kind::Png),
    (&["jpg", "jpeg"], Kind::Jpeg),
    (&["gif"], Kind::Gif),
    (&["bmp"], Kind::Bmp),
    (&["webp"], Kind::Webp),
    (&["wasm"], Kind::Wasm),
];

impl Kind {
    fn check(self, head: &[u8]) -> Result<(), &'static str> {
        let starts = |magic: &[u8], what| {
            if head.starts_with(magic) {
                Ok(())
            } else {
                Err(what)
            }
        };
        match self {
            Kind::Text => text(head),
            Kind::Json => {
                text(head)?;
                let first = head
                    .strip_prefix(b"\xef\xbb\xbf")
                    .unwrap_or(head)
                    .iter()
                    .find(|b| !b.is_ascii_whitespace());
                match first {
                    Some(b'{' | b'[') => Ok(()),
                    _ => Err("is not JSON"),
                }
            }
            // A `.pbtxt` other than a model's configuration is text too.
            Kind::Protobuf if is_text_pickle(head) => Err("is a pickle (protocol 0)"),
            Kind::Protobuf if text(head).is_ok() => Ok(()),
            Kind::Protobuf => match head.first() {
                Some(&tag) if matches!(tag & 7, 0 | 2 | 5) && (1..=15).contains(&(tag >> 3)) => {
                    Ok(())
                }
                _ => Err("does not start as a protocol buffer"),
            },
            Kind::Safetensors => {
                let length = head
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
                match (length, head.get(8)) {
                    (Some(1..=100_000_000), Some(b'{')) => Ok(()),
                    _ => Err("has no safetensors header"),
                }
            }
            Kind::Ort if head.get(4..8) == Some(b"ORTM") => Ok(()),
            Kind::Ort => Err("is not an ONNX Runtime model"),
            Kind::Raw => Ok(()),
            Kind::Numpy => starts(b"\x93NUMPY", "has no NumPy header"),
            Kind::Png => starts(b"\x89PNG\r\n\x1a\n", "is not a PNG image"),
            Kind::Jpeg => starts(b"\xff\xd8\xff", "is not a JPEG image"),
            Kind::Gif => starts(b"GIF8", "is not a GIF image"),
            Kind::Bmp => starts(b"BM", "is not a BMP image"),
            Kind::Webp
                if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" =>
            {
                Ok(())
            }
            Kind::Webp => Err("is not a WebP image"),
            Kind::Wasm => starts(b"\0asm", "is not WebAssembly"),
        }
    }
}

/// Text: no NUL byte, not a script, not a text pickle.
fn text(head: &[u8]) -> Result<(), &'static str> {
    if head.contains(&0) {
        Err("is not text")
    } else if head.starts_with(b"#!") {
        Err("is a script (#!)")
    } else if is_text_pickle(head) {
        Err("is a pickle (protocol 0)")
    } else {
        Ok(())
    }
}

/// A pickle of any protocol, by the structure of its first bytes ([`super::pickle`]).
pub fn is_text_pickle(head: &[u8]) -> bool {
    let whole = head.len() < super::walk::HEAD_BYTES as usize;
    super::pickle::is_pickle(head, whole)
}

/// What a file's first bytes say it is, when that is code, a pickle, an archive or compressed.
pub fn signature(head: &[u8]) -> Option<&'static str> {
    #[rustfmt::skip]
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x7fELF", "native code (ELF)"),
        (b"MZ\x90\x00", "a Windows executable"),
        (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
        (b"PK\x03\x04", "a zip archive (what it holds cannot be held to the controls)"),
        (b"PK\x05\x06", "a zip archive (what it holds cannot be held to the controls)"),
        (b"\x1f\x8b", "gzip-compressed (what it holds cannot be checked)"),
        (b"BZh", "bzip2-compressed (what it holds cannot be checked)"),
        (b"\xfd7zXZ\x00", "xz-compressed (what it holds cannot be checked)"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed (what it holds cannot be checked)"),
        (b"\x04\x22\x4d\x18", "lz4-compressed (what it holds cannot be checked)"),
        (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive (what it holds cannot be held to the controls)"),
    ];
    if head.first() == Some(&0x80) && head.get(1).is_some_and(|v| (1..=5).contains(v)) {
        return Some("a pickle");
    }
    if head.get(257..262) == Some(b"ustar") {
        return Some("a tar archive (what it holds cannot be held to the controls)");
    }
    SIGNATURES
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, what)| *what)
}

/// Kinds of file a control names: its row refuses them under it.
pub fn is_controlled(name: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "py", "pyc", "pyo", "pyw", "pyz", "bin", "pt", "pth", "ckpt", "pkl", "pickle", "joblib",
        "jinja", "jinja2", "j2", "so",
    ];
    name == "requirements.txt"
        || name.contains(".so.")
        || extension(name).is_some_and(|e| EXTENSIONS.contains(&e))
}

/// Whether `name` has an extension, and it is one of a kind this list knows.
pub fn names_a_kind(name: &str) -> bool {
    extension(name).is_some_and(|e| KINDS.iter().any(|(extensions, _)| extensions.contains(&e)))
}

/// The part of `name` after its last dot, when it has one (not a leading dot).
fn extension(name: &str) -> Option<&str> {
    match name.rsplit_once('.') {
        Some(("", _)) | None => None,
        Some((_, extension)) => Some(extension),
    }
}

/// Marks the files of `entries` that hold raw tensor bytes by what names them: a warm-up
/// sample's `input_data_file` and a sequence state's `initial_state` `data_file` (the core
/// reads them from the model's `warmup/` and `initial_state/` folders), the files beside an
/// ONNX model that no kind names (its external data: `onnx__MatMul_215`,
/// `decoder.layers.0.weight`), and an OpenVINO IR's `.bin` beside its `.xml`.
pub fn mark_raw_data(entries: &mut [Entry]) {
    use std::collections::BTreeSet;
    let mut named: BTreeSet<PathBuf> = BTreeSet::new();
    for entry in entries.iter() {
        let (Some(tree), Some(folder)) = (&entry.config_tree, entry.path.parent()) else {
            continue;
        };
        let samples = tree
            .messages("model_warmup")
            .flat_map(|w| w.messages("inputs"))
            .filter_map(|input| input.message("value"))
            .flat_map(|value| value.texts("input_data_file"));
        named.extend(samples.map(|file| folder.join("warmup").join(file)));
        let states = tree
            .messages("sequence_batching")
            .flat_map(|b| b.messages("state"))
            .flat_map(|state| state.messages("initial_state"))
            .flat_map(|initial| initial.texts("data_file"));
        named.extend(states.map(|file| folder.join("initial_state").join(file)));
    }
    let onnx_folders: BTreeSet<PathBuf> = entries
        .iter()
        .filter(|e| e.name.ends_with(".onnx"))
        .filter_map(|e| e.path.parent().map(Path::to_path_buf))
        .collect();
    let ir_weights: BTreeSet<PathBuf> = entries
        .iter()
        .filter(|e| e.name.ends_with(".xml"))
        .map(|e| e.path.with_extension("bin"))
        .collect();
    for entry in entries.iter_mut() {
        let external = entry
            .path
            .parent()
            .is_some_and(|folder| onnx_folders.contains(folder))
            && !names_a_kind(&entry.name)
            && !is_controlled(&entry.name);
        if external || named.contains(&entry.path) || ir_weights.contains(&entry.path) {
            entry.raw_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(name: &str, head: &[u8]) -> Option<String> {
        refusal(&Entry {
            name: name.into(),
            head: head.to_vec(),
            ..Entry::default()
        })
    }

    #[test]
    fn the_kinds_of_a_model_artifact_are_allowed() {
        let mut safetensors = 64u64.to_le_bytes().to_vec();
        safetensors.extend(b"{\"w\":{}}");
        for (name, head) in [
            ("config.pbtxt", &b"backend: \"onnxruntime\""[..]),
            ("model.onnx", b"\x08\x07\x12\x07pytorch"),
            ("model.onnx.data", b"\x00\x00\x80\x3f"),
            ("model.safetensors", &safetensors),
            ("tokenizer.json", b"\xef\xbb\xbf {\"version\": \"1.0\"}"),
            ("vocab.txt", b"[PAD]\n[UNK]\n"),
            ("labels", b"cat\ndog\n"),
            ("labels.txt", b"cat\ndog\nparrot\nquail\n(unknown)\n"),
            ("spiece.model", b"\x0a\x0b\x0a\x05<unk>"),
            ("saved_model.pb", b"\x08\x01\x12"),
            ("saved_model.pbtxt", b"saved_model_schema_version: 1"),
            ("variables.data-00000-of-00001", b"\x00\x01"),
            ("model.plan", b"ftrt\x00\x00"),
            ("mean.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '<f4'"),
            ("example.png", b"\x89PNG\r\n\x1a\n\x00"),
            ("example.jpg", b"\xff\xd8\xff\xe0"),
            ("adapter.wasm", b"\0asm\x0d\x00\x01\x00"),
            ("adapter.wasm.sig", b"ab12"),
            ("empty.txt", b""),
            // Kinds a control names: its row's to refuse.
            ("model.py", b"#!/usr/bin/env python\nimport os"),
            ("weights.bin", b"\x80\x04"),
        ] {
            assert_eq!(verdict(name, head), None, "{name}");
        }
    }

    #[test]
    fn archives_compression_code_and_lying_names_are_refused() {
        let mut tar = vec![b'a'; 512];
        tar[257..262].copy_from_slice(b"ustar");
        for (name, head, said) in [
            ("weights.dat", &b"\x00"[..], "not a kind of file"),
            ("model.onnx", b"\x7fELF\x02", "native code"),
            ("model.onnx", b"(dp0\nS'x'", "pickle"),
            (
                "notes.txt",
                b"cos\nsystem\n(S'touch /tmp/x'\ntR.",
                "pickle (protocol 0)",
            ),
            ("labels", b"#!/bin/sh\ntouch /tmp/x", "script"),
            ("stub", b"\x7fELF", "native code"),
            ("data.json", b"\x80\x02}q\x00.", "a pickle"),
            ("archive.npz", b"PK\x03\x04", "zip archive"),
            ("model.onnx.gz", b"\x1f\x8b\x08", "gzip"),
            ("model.data", b"\x28\xb5\x2f\xfd", "zstd"),
            ("env.tar", &tar, "tar archive"),
            (
                "model.safetensors",
                b"\x08\x00\x00\x00\x00\x00\x00\x00[",
                "safetensors",
            ),
            ("config.json", b"backend: x", "not JSON"),
            ("cat.png", b"\xff\xd8\xff", "not a PNG"),
            ("a.wasm", b"\x7fELF", "native code"),
        ] {
            let refused = verdict(name, head).unwrap_or_else(|| panic!("{name} passed"));
            assert!(refused.contains(said), "{name}: {refused}");
        }
    }
}
