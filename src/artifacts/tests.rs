use std::collections::BTreeSet;
use std::path::Path;

use super::*;

fn write(root: &Path, relative: &str, bytes: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn image() -> Arc<ImageBackends> {
    Arc::new(ImageBackends {
        names: ["onnxruntime", "openvino", "python", "pytorch", "trident"]
            .map(String::from)
            .into(),
        files: [
            ("onnxruntime", "libtriton_onnxruntime.so"),
            ("trident", "libtriton_trident.so"),
        ]
        .map(|(backend, file)| (backend.to_owned(), file.to_owned()))
        .into(),
    })
}

fn secure(controls: &[Control]) -> ArtifactPolicy {
    ArtifactPolicy {
        secure_mode: Some(SecureMode {
            controls: controls.iter().copied().collect(),
            untrusted_channels: Vec::new(),
            plugin_keys: Vec::new(),
            plugin_require_cases: false,
        }),
        image: image(),
        ..ArtifactPolicy::default()
    }
}

fn native_boundary() -> ArtifactPolicy {
    ArtifactPolicy {
        native_code: NativeCode::Refused,
        image: image(),
        ..ArtifactPolicy::default()
    }
}

/// The one finding of checking an artifact holding `files` under `policy`.
fn refusal_of(policy: &ArtifactPolicy, files: &[(&str, &[u8])]) -> Option<(String, Gate)> {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "m/config.pbtxt", b"backend: \"onnxruntime\"\n");
    write(root.path(), "m/1/model.onnx", b"\x08\x07onnx");
    for (path, bytes) in files {
        write(root.path(), path, bytes);
        // Each model folder has a configuration, unless the case is about it.
        let folder = Path::new(path).components().next().unwrap().as_os_str();
        let config = root.path().join(folder).join("config.pbtxt");
        if !config.exists()
            && !files
                .iter()
                .any(|(p, _)| Path::new(p) == config.strip_prefix(root.path()).unwrap())
        {
            write(
                root.path(),
                config.strip_prefix(root.path()).unwrap().to_str().unwrap(),
                b"backend: \"onnxruntime\"",
            );
        }
    }
    match policy.check(root.path()) {
        Ok(()) => None,
        Err(ArtifactRefusal::Forbidden { findings, .. }) => {
            let finding = &findings[0];
            let relative = finding.path.strip_prefix(root.path()).unwrap();
            Some((relative.display().to_string(), finding.gate))
        }
        Err(other) => panic!("unexpected {other}"),
    }
}

const ALL: &[Control] = &Control::ALL;

#[test]
fn a_plain_onnx_artifact_passes_every_control_and_the_boundary() {
    assert_eq!(refusal_of(&secure(ALL), &[]), None);
    assert_eq!(refusal_of(&native_boundary(), &[]), None);
    // safetensors and a tokenizer without a template are fine too.
    let files: &[(&str, &[u8])] = &[
        (
            "m/1/model.safetensors",
            b"\x02\x00\x00\x00\x00\x00\x00\x00{}",
        ),
        ("m/tokenizer_config.json", b"{\"model_max_length\": 10}"),
    ];
    assert_eq!(refusal_of(&secure(ALL), files), None);
}

#[test]
fn each_control_refuses_its_own_files_and_only_under_itself() {
    use Control::*;
    let cases: &[(Control, &str, &[u8])] = &[
        (CustomInferenceScripts, "m/1/model.py", b"import os"),
        (CustomInferenceScripts, "m/helpers/util.pyc", b"\x00"),
        (CustomInferenceScripts, "m/libcustom.so.1", b"\x7fELF"),
        (CustomInferenceScripts, "m/1/weights.dat", b"\x7fELF\x02\x01"),
        (CustomInferenceScripts, "p/config.pbtxt", b"backend: 'py' \"thon\""),
        (CustomInferenceScripts, "p/config.pbtxt", b"backend: \"\\x70ython\""),
        (CustomInferenceScripts, "e/config.pbtxt", b"backend: \"onnxruntime\"\nparameters: { key: \"EXECUTION_ENV_PATH\" value: { string_value: \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } }"),
        (PickleFiles, "m/1/model.PT", b"x"),
        (PickleFiles, "m/1/weights.ckpt", b"x"),
        (PickleFiles, "m/1/model.onnx.bak", b"\x80\x04\x95"),
        (PickleFiles, "m/1/archive.zip", b"PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00archive/data.pkl"),
        (PickleFiles, "m/1/array.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False}"),
        (PickleFiles, "t/config.pbtxt", b"platform: \"pytorch_libtorch\"\ndefault_model_filename: \"model.ts\""),
        (RequirementsTxt, "m/requirements.txt", b"torch"),
        (TrustRemoteCode, "v/1/model.json", b"{\"model\": \"x\", \"trust_remote_code\": true}"),
        (TrustRemoteCode, "v/1/config.json", b"{\"trust_remote_code\": \"false\"}"),
        (ChatTemplate, "m/processor_config.json", b"{\"chat_template\": \"{{ x }}\"}"),
        (PickleFiles, "m/1/weights.dat", b"cos\nsystem\n(S'touch /tmp/x'\ntR."),
        (PickleFiles, "m/1/old.data", b"\x80\x01}q\x00."),
        // Issue 56: pickles the first-bytes checks missed.
        (PickleFiles, "m/1/zero.data", b"\x80\x00cos\nsystem\n(S'id'\ntR."),
        (PickleFiles, "m/labels.txt", b"cos\nsystem\nS'touch /tmp/x'\n\x85R."),
        (PickleFiles, "m/1/inst.onnx", b"(ios\nsystem\nS'id'\no."),
        (PickleFiles, "m/1/bare.npy", b"\x93NUMPY\x01\x00\x2a\x00{'descr': 'O', 'shape': (2,), }          \n"),
        (PickleFiles, "m/1/quoted.npy", b"\x93NUMPY\x01\x00\x2a\x00{\"descr\": \"|O\", 'shape': (2,), }        \n"),
        (TrustRemoteCode, "v/config.pbtxt", b"backend: \"onnxruntime\"\nparameters [{ key: \"trust_remote_code\" value { string_value: \"True\" } }]"),
        (ChatTemplate, "m/tokenizer_config.json", b"{\"chat_template\": \"{{ messages }}\"}"),
        (ChatTemplate, "m/templates/chat.jinja", b"{{ x }}"),
    ];
    for (control, path, bytes) in cases {
        let found = refusal_of(&secure(&[*control]), &[(path, bytes)]);
        assert_eq!(
            found,
            Some((path.to_string(), Gate::Secure(*control))),
            "{path}"
        );
        // Under the other controls no row refuses it; Secure Mode's allow-list still refuses
        // what is not a kind of file it knows (native code under another name). Native code by
        // its contents is refused under every gate (the next test).
        if bytes.starts_with(b"\x7fELF") {
            continue;
        }
        let others: Vec<Control> = ALL.iter().copied().filter(|c| c != control).collect();
        let other = refusal_of(&secure(&others), &[(path, bytes)]);
        assert!(
            other
                .as_ref()
                .is_none_or(|(_, gate)| *gate == Gate::AllowList),
            "{path} under the other controls: {other:?}"
        );
    }
}

#[test]
fn the_native_boundary_refuses_what_the_core_would_load_and_lets_python_models_be() {
    let refused: &[(&str, &[u8])] = &[
        ("evil/libtriton_evil.so", b"\x7fELF"),
        // Native code by its contents, whatever its name or place (a python model's vendored
        // extension included), and the core's custom batching routes.
        ("p/1/vendored/_speedups.so", b"\x7fELF"),
        ("m/1/weights.dat", b"\x7fELF\x02\x01"),
        ("m/batchstrategy.so", b"not even ELF"),
        (
            "b/config.pbtxt",
            b"backend: \"onnxruntime\"\nparameters { key: \"TRITON_BATCH_STRATEGY_PATH\" value: { string_value: \"x/lib.so\" } }",
        ),
        ("p/triton_python_backend_stub", b"#!/bin/sh\ntouch /tmp/marker\n"),
        (
            "e/config.pbtxt",
            b"backend: \"python\"\nparameters { value: { string_value: \"env.tar.gz\" } key: \"EXECUTION_ENV_PATH\" }",
        ),
        ("evil/config.pbtxt", b"backend: \"evil\""),
        (
            "r/config.pbtxt",
            b"backend: \"onnxruntime\"\nruntime: \"../../tmp/x.so\"",
        ),
        (
            "o/config.pbtxt",
            b"backend: \"onnxruntime\"\nmodel_operations { op_library_filename: \"ops.so\" }",
        ),
        // Another backend's file as this one's runtime.
        (
            "x/config.pbtxt",
            b"backend: \"python\"\nruntime: \"libtriton_trident.so\"",
        ),
    ];
    for (path, bytes) in refused {
        assert_eq!(
            refusal_of(&native_boundary(), &[(path, bytes)]),
            Some((path.to_string(), Gate::NativeCode)),
            "{path}"
        );
        assert_eq!(
            refusal_of(
                &ArtifactPolicy {
                    image: image(),
                    ..ArtifactPolicy::default()
                },
                &[(path, bytes)]
            ),
            None
        );
    }
    let allowed: &[(&str, &[u8])] = &[
        ("p/config.pbtxt", b"backend: \"python\""),
        ("p/1/model.py", b"import numpy"),
        (
            "r/config.pbtxt",
            b"backend: \"onnxruntime\"\nruntime: \"libtriton_onnxruntime.so\"",
        ),
    ];
    for control in ALL {
        let elf: &[(&str, &[u8])] = &[("m/1/weights.dat", b"\x7fELF\x02\x01")];
        assert_eq!(
            refusal_of(&secure(&[*control]), elf),
            Some(("m/1/weights.dat".to_owned(), Gate::Secure(*control))),
            "ELF under {control:?}"
        );
    }
    for (path, bytes) in allowed {
        assert_eq!(
            refusal_of(&native_boundary(), &[(path, bytes)]),
            None,
            "{path}"
        );
    }
}

#[test]
fn what_cannot_be_checked_is_refused_and_nothing_hangs() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "m/config.pbtxt", b"backend: \"onnxruntime\"");
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "evil.so", b"\x7fELF");
    std::os::unix::fs::symlink(
        outside.path().join("evil.so"),
        root.path().join("m/model.onnx"),
    )
    .unwrap();
    let refusal = secure(&[Control::PickleFiles])
        .check(root.path())
        .unwrap_err();
    let text = refusal.to_string();
    assert!(
        text.contains("model.onnx cannot be checked (is a link that leads out of the artifact)"),
        "{text}"
    );
    assert!(text.contains("DISALLOW_PICKLE_FILES"), "{text}");
    // A FIFO (which nothing could check, and a read of which would wait) refuses it too.
    let fifo = root.path().join("m/pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let text = secure(&[Control::PickleFiles])
        .check(root.path())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("pipe is not a regular file (it is a FIFO)"),
        "{text}"
    );
    // A configuration that does not parse is not let through.
    let broken = tempfile::tempdir().unwrap();
    write(broken.path(), "m/config.pbtxt", b"backend: \"python");
    let text = native_boundary()
        .check(broken.path())
        .unwrap_err()
        .to_string();
    assert!(text.contains("a string is not closed"), "{text}");
    // Without any gate nothing is read.
    assert!(ArtifactPolicy::default().check(root.path()).is_ok());
}

#[test]
fn links_inside_the_artifact_are_judged_by_the_name_the_core_sees() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "m/config.pbtxt", b"backend: \"onnxruntime\"");
    write(root.path(), "m/notes.txt", b"print()");
    std::os::unix::fs::symlink(
        root.path().join("m/notes.txt"),
        root.path().join("m/model.py"),
    )
    .unwrap();
    let text = secure(ALL).check(root.path()).unwrap_err().to_string();
    assert!(text.contains("model.py is a Python script"), "{text}");
}

#[test]
fn the_untrusted_channels_refuse_every_artifact_once_they_hold_a_forbidden_file() {
    let channel = tempfile::tempdir().unwrap();
    write(channel.path(), "data/weights.pkl", b"x");
    let mut policy = secure(&[Control::PickleFiles]);
    policy.secure_mode.as_mut().unwrap().untrusted_channels = vec![channel.path().to_path_buf()];
    policy.check_channels(None);
    let artifact = tempfile::tempdir().unwrap();
    write(
        artifact.path(),
        "m/config.pbtxt",
        b"backend: \"onnxruntime\"",
    );
    let text = policy.check(artifact.path()).unwrap_err().to_string();
    assert!(
        text.contains("weights.pkl is a pickle-based file"),
        "{text}"
    );
}

#[test]
fn too_many_files_is_a_refusal_not_a_pass() {
    let root = tempfile::tempdir().unwrap();
    let mut deep = root.path().to_path_buf();
    for _ in 0..=walk::MAX_DEPTH + 1 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let refusal = secure(&[Control::RequirementsTxt])
        .check(root.path())
        .unwrap_err();
    assert!(
        matches!(refusal, ArtifactRefusal::Unchecked { .. }),
        "{refusal}"
    );
    assert!(
        refusal.to_string().contains("nested more than"),
        "{refusal}"
    );
}

#[test]
fn findings_are_listed_up_to_the_cap_with_their_gates() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..20 {
        write(root.path(), &format!("m/{i}.py"), b"x");
    }
    let Err(ArtifactRefusal::Forbidden { findings, .. }) = secure(ALL).check(root.path()) else {
        panic!("not refused");
    };
    assert_eq!(findings.len(), MAX_FINDINGS);
    let gates: BTreeSet<Gate> = findings.iter().map(|f| f.gate).collect();
    assert_eq!(
        gates,
        [Gate::Secure(Control::CustomInferenceScripts)].into()
    );
}

#[test]
fn configurations_are_read_as_the_core_reads_them() {
    let facts = |text: &str| {
        model_config::ModelConfigFacts::of(&text_format::parse(text.as_bytes()).unwrap())
    };
    let read = facts(
        "# backend: \"python\"\nname: \"x\" platform: \"ensemble\"\nbackend: 'onnx' \"runtime\" # trailing\n\
         runtime: \"lib\\164riton_x.so\"\nparameters { key: \"a\" value: { string_value: \"b\" } }\n\
         parameters { value: { string_value: \"d\" } key: \"c\" }\n\
         ensemble_scheduling { step [ { model_name: \"p\" } ] }\n",
    );
    assert_eq!(read.backend.as_deref(), Some("onnxruntime"));
    assert_eq!(read.platform.as_deref(), Some("ensemble"));
    assert_eq!(read.runtime.as_deref(), Some("libtriton_x.so"));
    assert_eq!(read.parameters.get("a").map(String::as_str), Some("b"));
    // Written value first: the key is still the key (issue 44's field order).
    assert_eq!(read.parameters.get("c").map(String::as_str), Some("d"));
    // A nested `backend` (none exists in Triton's schema) is not the model's.
    assert_eq!(facts("optimization { backend: \"python\" }").backend, None);
}

/// On a multi-model endpoint the models root holds every tenant's download, each checked at its
/// own load: a channel that is the root is not checked as a whole, and one that holds it is
/// checked but for it (issue 43, case 14: one tenant's refused pickle refused every tenant).
#[test]
fn a_channel_holding_the_models_root_is_checked_but_for_it() {
    let channel = tempfile::tempdir().unwrap();
    let models_root = channel.path().join("models");
    write(&models_root, "tenant_a/model/weights.pkl", b"x");
    let good = models_root.join("tenant_b");
    write(&good, "model/config.pbtxt", b"backend: \"onnxruntime\"");
    for channel in [channel.path().to_path_buf(), models_root.clone()] {
        let mut policy = secure(&[Control::PickleFiles]);
        policy.secure_mode.as_mut().unwrap().untrusted_channels = vec![channel.clone()];
        policy.check_channels(Some(&models_root));
        assert_eq!(policy.check(&good), Ok(()), "{}", channel.display());
        let refused = policy.check(&models_root.join("tenant_a")).unwrap_err();
        assert!(refused.to_string().contains("weights.pkl"), "{refused}");
    }
    // What the channel holds outside the models root still refuses every artifact.
    write(channel.path(), "other/data.pkl", b"x");
    let mut policy = secure(&[Control::PickleFiles]);
    policy.secure_mode.as_mut().unwrap().untrusted_channels = vec![channel.path().to_path_buf()];
    policy.check_channels(Some(&models_root));
    let text = policy.check(&good).unwrap_err().to_string();
    assert!(text.contains("data.pkl"), "{text}");
}

#[test]
fn the_checks_own_reading_is_bounded() {
    // A configuration past 1 MiB, and one of a million one-letter fields within it: refused as
    // unreadable, before a tree of it is built.
    let mut huge = b"backend: \"onnxruntime\"\n".to_vec();
    huge.extend(std::iter::repeat_n(b"a:1\n".as_slice(), 300_000).flatten());
    let found = refusal_of(&native_boundary(), &[("m/config.pbtxt", &huge)]);
    assert_eq!(
        found.map(|(path, _)| path),
        Some("m/config.pbtxt".to_owned())
    );
    let mut many = b"backend: \"onnxruntime\"\n".to_vec();
    many.extend(std::iter::repeat_n(b"a:1 ".as_slice(), 250_000).flatten());
    assert!(many.len() < 1 << 20);
    let found = refusal_of(&native_boundary(), &[("m/config.pbtxt", &many)]);
    assert_eq!(
        found.map(|(path, _)| path),
        Some("m/config.pbtxt".to_owned())
    );
    // A large JSON file: only the keys the rules read are kept, and they are still found.
    let mut json = String::from("{");
    for i in 0..100_000 {
        json.push_str(&format!("\"k{i}\": [1, 2, {{\"x\": \"y\"}}], "));
    }
    json.push_str("\"trust_remote_code\": true}");
    let found = refusal_of(
        &secure(&[Control::TrustRemoteCode]),
        &[("m/config.json", json.as_bytes())],
    );
    assert_eq!(
        found.map(|(path, _)| path),
        Some("m/config.json".to_owned())
    );
}

/// Issue 56, case 8: layouts the core loads and serves that the allow-list refused.
#[test]
fn layouts_the_core_serves_pass_every_control() {
    let weights: &[u8] = b"\x9a\x99\x19\x3f\x00\x00\x80\x3f\x01\x02\x03\x04";
    let warmup = b"backend: \"onnxruntime\"\nmodel_warmup [ { name: \"w\" batch_size: 1 inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [ 3 ] input_data_file: \"raw_in\" } } } ]\n";
    let layouts: &[&[(&str, &[u8])]] = &[
        // A warm-up sample of raw tensor bytes.
        &[("m/config.pbtxt", warmup), ("m/warmup/raw_in", weights)],
        // An ONNX export with one external-data file per tensor.
        &[
            ("m/1/onnx__MatMul_215", weights),
            ("m/1/decoder.layers.0.weight", weights),
        ],
        // ONNX Runtime's own format.
        &[("m/1/model.ort", b"\x14\x00\x00\x00ORTM\x00\x00")],
        // A folder made by `huggingface-cli download --local-dir`.
        &[
            (
                "m/.cache/huggingface/download/model.onnx.metadata",
                b"abc\n123\n",
            ),
            ("m/.cache/huggingface/download/model.onnx.lock", b""),
            ("m/.cache/huggingface/.gitignore", b"*\n"),
        ],
        // An OpenVINO IR.
        &[
            ("o/config.pbtxt", b"backend: \"openvino\"\n"),
            (
                "o/1/model.xml",
                b"<?xml version=\"1.0\"?>\n<net name=\"m\"></net>\n",
            ),
            ("o/1/model.bin", weights),
        ],
    ];
    for files in layouts {
        assert_eq!(refusal_of(&secure(ALL), files), None, "{files:?}");
    }
    // Named as data, a pickle or native code is still refused by its contents.
    let pickle: &[(&str, &[u8])] = &[
        ("m/config.pbtxt", warmup),
        ("m/warmup/raw_in", b"\x80\x04\x95"),
    ];
    assert!(refusal_of(&secure(ALL), pickle).is_some());
    let elf: &[(&str, &[u8])] = &[("m/1/onnx__MatMul_215", b"\x7fELF\x02")];
    assert!(refusal_of(&secure(ALL), elf).is_some());
}
