//! docs/DEPLOY.md's local commands, run as written against the image: every shell block marked
//! `<!-- local -->`, in order, with a `docker` that maps each command onto scripts/image
//! (`tests/container/docker`) and a `sudo` that runs its command (the tests run as root). A block
//! must exit 0, and each JSON a comment in it shows (`# {...}`) must be in what it printed. A
//! block that is still running once its container answers `/ping` is a server in the
//! foreground (a reader's other terminal): it serves the next blocks and is stopped (SIGTERM, a
//! reader's Ctrl-C) before the next block that runs a container, or at the section's end. Ports
//! 8080 and 9090 become free ports, so a run never needs those two.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::Failed;

use super::{Fixture, copy_dir};
use crate::common;
use crate::common::http_client::try_request;
use crate::common::process::free_port;

/// The longest a block may run (an image build, with its cache, included).
const BLOCK_LIMIT: Duration = Duration::from_secs(600);

/// A marked block: the section it is in and its text.
struct Block {
    section: String,
    line: usize,
    text: String,
}

/// The blocks of `doc` marked `<!-- local -->` (the marker must stand right before a ```sh
/// fence).
fn local_blocks(doc: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("## ") {
            section = lines[i].trim_start_matches("## ").to_string();
        }
        if lines[i].trim() == "<!-- local -->" {
            if lines.get(i + 1).map(|l| l.trim()) != Some("```sh") {
                return Err(format!(
                    "line {}: <!-- local --> is not right before a ```sh block",
                    i + 1
                ));
            }
            let start = i + 2;
            let end = (start..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .ok_or(format!("line {}: the block never ends", i + 2))?;
            blocks.push(Block {
                section: section.clone(),
                line: i + 2,
                text: lines[start..end].join("\n"),
            });
            i = end;
        }
        i += 1;
    }
    Ok(blocks)
}

/// The JSON values a block's comments show as output (`# {...}`, alone or after a command).
fn shown_outputs(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.find("# {").map(|at| line[at + 2..].trim()))
        .filter(|json| serde_json::from_str::<serde_json::Value>(json).is_ok())
        .collect()
}

/// A block running in its own process group, its output in `output`.
struct Running {
    child: Child,
    output: std::path::PathBuf,
}

impl Running {
    fn printed(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.output) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// SIGTERM to the block's process group (the shell, and `docker run` in it, which passes
    /// the signal to the container's PID 1 and waits for it), then waits up to 30 s for every
    /// process of the group to end.
    fn stop(&mut self) -> Result<(), String> {
        let pgid = self.child.id();
        let group = format!("-{pgid}");
        let _ = common::command("kill")
            .args(["-TERM", "--", &group])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let _ = self.child.try_wait();
            if !group_alive(pgid) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = common::command("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.child.wait();
        Err("a foreground server did not end within 30 s of SIGTERM".into())
    }
}

/// Whether a process of process group `pgid` still runs (a zombie does not).
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str())
        })
}

pub(super) fn deploy_md_local_commands_run(_: &Fixture) -> Result<(), Failed> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(repo.join("docs/DEPLOY.md"))?;
    let blocks = local_blocks(&doc)?;
    ensure!(!blocks.is_empty(), "DEPLOY.md marks no local block");

    // A working folder like a checkout's root: the examples, and scripts/ (linked).
    let work = tempfile::tempdir()?;
    copy_dir(&repo.join("examples"), &work.path().join("examples"));
    std::os::unix::fs::symlink(repo.join("scripts"), work.path().join("scripts"))?;
    let tools = tempfile::tempdir()?;
    std::os::unix::fs::symlink(
        repo.join("tests/container/docker"),
        tools.path().join("docker"),
    )?;
    std::fs::write(tools.path().join("sudo"), "#!/bin/sh\nexec \"$@\"\n")?;
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(tools.path().join("sudo"))
        .status()?;
    let state = tempfile::tempdir()?;
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (port, metrics_port) = (free_port().to_string(), free_port().to_string());

    let mut servers: Vec<(String, Running)> = Vec::new();
    let mut outcome = Ok(());
    for (index, block) in blocks.iter().enumerate() {
        // A new section, or a new container: the foreground servers are stopped.
        let runs_a_container =
            block.text.contains("docker run") || block.text.contains("scripts/image run");
        for (section, mut server) in std::mem::take(&mut servers) {
            if section == block.section && !runs_a_container {
                servers.push((section, server));
            } else {
                server.stop()?;
            }
        }
        let text = block
            .text
            .replace("8080", &port)
            .replace("9090", &metrics_port);
        let output = state.path().join(format!("block-{index}.out"));
        let file = std::fs::File::create(&output)?;
        let child = common::command("bash")
            .args(["-euo", "pipefail", "-c", &text])
            .current_dir(work.path())
            .env("PATH", &path)
            .env("DOCKER_SHIM_STATE", state.path())
            .stdout(file.try_clone()?)
            .stderr(file)
            .process_group(0)
            .spawn()?;
        let mut running = Running { child, output };
        let serves_in_foreground = (text.contains("docker run") && !text.contains(" -d "))
            || text.contains("scripts/image run");
        let started = Instant::now();
        let finished = loop {
            if let Some(status) = running.child.try_wait()? {
                break Some(status);
            }
            if serves_in_foreground
                && try_request(
                    format!("127.0.0.1:{port}").parse().unwrap(),
                    "GET",
                    "/ping",
                    &[],
                    b"",
                )
                .is_ok_and(|r| r.status == 200)
            {
                break None;
            }
            if started.elapsed() > BLOCK_LIMIT {
                let _ = running.stop();
                outcome = Err(format!(
                    "DEPLOY.md line {} ({}): still running after {BLOCK_LIMIT:?}:\n{}",
                    block.line,
                    block.section,
                    running.printed()
                ));
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if outcome.is_err() {
            break;
        }
        let printed = running.printed();
        match finished {
            Some(status) if !status.success() => {
                outcome = Err(format!(
                    "DEPLOY.md line {} ({}): {status}:\n{text}\n---\n{}",
                    block.line,
                    block.section,
                    common::container::tail(&printed, 40)
                ));
                break;
            }
            Some(_) => {
                if let Some(missing) = shown_outputs(&text)
                    .into_iter()
                    .find(|json| !printed.contains(json))
                {
                    outcome = Err(format!(
                        "DEPLOY.md line {} ({}): shows {missing}, which it did not print:\n{}",
                        block.line,
                        block.section,
                        common::container::tail(&printed, 40)
                    ));
                    break;
                }
            }
            None => servers.push((block.section.clone(), running)),
        }
    }
    for (_, mut server) in servers {
        let stopped = server.stop();
        if outcome.is_ok() {
            outcome = stopped;
        }
    }
    // Whatever a failing block left detached.
    for entry in std::fs::read_dir(state.path())?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(container) = name.strip_suffix(".pid") {
            let _ = common::command(tools.path().join("docker"))
                .args(["stop", container])
                .env("DOCKER_SHIM_STATE", state.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
    outcome.map_err(Failed::from)
}
