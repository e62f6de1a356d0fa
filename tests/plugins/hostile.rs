//! Guests written to break the rules: loops, memory hogs, traps, bad tensors and shapes, snooping,
//! state kept between calls, floods of output. After each, the next request succeeds.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    hostile_loop_is_interrupted,
    hostile_sleep_is_interrupted,
    hostile_hog_is_refused,
    hostile_trap_is_a_500,
    hostile_bad_tensor_is_a_clean_error,
    hostile_shape_is_refused_before_the_model,
    hostile_snoop_sees_no_files_environment_or_network,
    every_call_gets_a_fresh_instance,
    no_call_reads_what_an_earlier_call_left_in_memory,
    every_python_call_gets_a_fresh_instance,
    every_javascript_call_gets_a_fresh_instance,
    hostile_javascript_is_stopped_by_the_same_limits,
    chatty_output_is_captured,
    a_flood_of_output_is_cut_at_the_call_budget,
];

/// The hostile guest in `mode` is stopped at its 200 ms time limit: a 504 saying so, answered
/// within `within` (at least the limit after the request), and the next request is fine.
fn stopped_at_its_time_limit(f: &Fixture, mode: &str, within: Duration) -> Result<(), Failed> {
    let started = Instant::now();
    let response = with_variant(f, mode);
    let took = started.elapsed();
    ensure!(
        response.status == 504,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("time limit of 200 ms"),
        "{}",
        response.text()
    );
    ensure!(
        took >= Duration::from_millis(190) && took < within,
        "took {took:?}"
    );
    still_fine(f)
}

fn hostile_loop_is_interrupted(f: &Fixture) -> Result<(), Failed> {
    stopped_at_its_time_limit(f, "loop", Duration::from_secs(3))
}

/// A guest that sleeps (waits in a WASI clock call, where the epoch cannot interrupt it) is
/// stopped by the wall-clock bound of its call and answered like a loop; an hour's sleep held
/// the request, and a slot of the pool, for the hour.
fn hostile_sleep_is_interrupted(f: &Fixture) -> Result<(), Failed> {
    stopped_at_its_time_limit(f, "sleep", Duration::from_secs(10))
}

fn hostile_hog_is_refused(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "hog");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("memory limit of 32 MiB"),
        "{}",
        response.text()
    );
    still_fine(f)
}

fn hostile_trap_is_a_500(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "trap");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("plugin 'trap' failed"),
        "{}",
        response.text()
    );
    still_fine(f)
}

fn hostile_bad_tensor_is_a_clean_error(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "bad-tensor");
    ensure!(
        (400..500).contains(&response.status),
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(!response.error().is_empty(), "no message");
    still_fine(f)
}

/// A request adapter's tensor passes the same shape rule as a client's: refused before the
/// model, which serves the next request.
fn hostile_shape_is_refused_before_the_model(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "huge-shape");
    ensure!(
        response.status == 400
            && response
                .error()
                .contains("input 'INPUT0' has an invalid shape [0, 9223372036854775807]"),
        "{} {}",
        response.status,
        response.text()
    );
    still_fine(f)
}

fn hostile_snoop_sees_no_files_environment_or_network(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "snoop");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    let error = response.error();
    ensure!(
        error.contains("snoop: file=Err"),
        "the plugin read a file: {error}"
    );
    ensure!(
        error.contains("env=0"),
        "the plugin saw environment variables: {error}"
    );
    ensure!(
        error.contains("net=Some(Err") && error.contains("dns=Err"),
        "the plugin reached the network: {error}"
    );
    ensure!(
        canary().accept().is_err(),
        "a plugin connected to the test's listener"
    );
    still_fine(f)
}

fn every_call_gets_a_fresh_instance(f: &Fixture) -> Result<(), Failed> {
    // Instances are made ahead of time, but each serves one call: guest memory never carries
    // anything from one request to the next. Each starts from check-config's state, which sets
    // the count to 100 (plugins::snapshot).
    for _ in 0..6 {
        let response = with_variant(f, "count");
        let error = response.error();
        ensure!(
            error.contains("count: calls=101"),
            "an instance served more than one call: {} {error}",
            response.status
        );
    }
    still_fine(f)
}

/// Nothing one call writes anywhere in its linear memory reaches a later instance, even one
/// that reuses the same pooled slot with its first 8 MiB kept resident (reset page by page by
/// the kernel's dirty-page scan) and grows into the rest: scribblers write 7 MiB of a pattern
/// (and must find it, which proves the search), peekers search all their memory and must find
/// none. Instances rotate through a few slots (two are kept ready), so rounds of several calls
/// each make a peeker land in a slot a scribbler used.
fn no_call_reads_what_an_earlier_call_left_in_memory(f: &Fixture) -> Result<(), Failed> {
    let residue = |body: &str| {
        send(
            f.at("hostile"),
            "text/csv",
            None,
            &[("X-Amzn-SageMaker-Target-Variant", "residue")],
            body,
        )
    };
    for round in 0..3 {
        for _ in 0..4 {
            let response = residue("scribble");
            let error = response.error();
            // 7 MiB of 64-byte blocks, allocated at an unknown alignment: at least all but one.
            let found: usize = error
                .split_once(&format!("residue: wrote={} found=", 7 << 20))
                .and_then(|(_, n)| n.parse().ok())
                .unwrap_or(0);
            ensure!(
                response.status == 400 && found >= (7 << 20) / 64 - 1,
                "round {round}: the scribbler's own search failed: {} {error}",
                response.status
            );
        }
        for _ in 0..4 {
            let response = residue("peek");
            ensure!(
                response.status == 400 && response.error().ends_with("residue: found=0"),
                "round {round}: an instance read what an earlier call left: {} {}",
                response.status,
                response.text()
            );
        }
    }
    still_fine(f)
}

/// The same for a Python guest: its module state (a call counter and a list of the bodies seen)
/// starts from the build's snapshot in every call.
fn every_python_call_gets_a_fresh_instance(f: &Fixture) -> Result<(), Failed> {
    counts_one_call_each(f, "python_count", "Python")
}

/// The same for a JavaScript guest: its module-level counter and array start from the build's
/// snapshot in every call.
fn every_javascript_call_gets_a_fresh_instance(f: &Fixture) -> Result<(), Failed> {
    counts_one_call_each(f, "js_hostile", "JavaScript")
}

/// Six requests to `server`, whose guest counts its calls and the bodies it saw in module state
/// and refuses with the counts, counting from check-config's 100: each must say `calls=101
/// seen=1` (the initialised state, and no earlier call's); the server serves after.
fn counts_one_call_each(f: &Fixture, server: &str, language: &str) -> Result<(), Failed> {
    for body in ["1", "2", "3", "4", "5", "6"] {
        let response = send(f.at(server), "text/csv", None, &[], body);
        ensure!(
            response.status == 400 && response.error().contains("count: calls=101 seen=1"),
            "a {language} instance served more than one call: {} {}",
            response.status,
            response.text()
        );
    }
    ensure!(get(f.at(server), "/ping").status == 200, "not serving");
    Ok(())
}

/// A JavaScript guest that loops, hogs memory or throws an `Error` meets the limits every guest
/// meets (504 after its 200 ms, 500 at its 32 MiB, 500 for the trap), and the next request to the
/// same plugin is answered.
fn hostile_javascript_is_stopped_by_the_same_limits(f: &Fixture) -> Result<(), Failed> {
    for (body, status, expected) in [
        ("loop", 504, "time limit of 200 ms"),
        ("hog", 500, "memory limit of 32 MiB"),
        ("throw", 500, "plugin 'hostile_js' failed"),
    ] {
        let response = send(f.at("js_hostile"), "text/csv", None, &[], body);
        ensure!(
            response.status == status && response.error().contains(expected),
            "{body}: {} {}",
            response.status,
            response.text()
        );
        let next = send(f.at("js_hostile"), "text/csv", None, &[], "1");
        ensure!(
            next.status == 400 && next.error().contains("count: calls=101 seen=1"),
            "after {body}: {} {}",
            next.status,
            next.text()
        );
    }
    Ok(())
}

fn chatty_output_is_captured(f: &Fixture) -> Result<(), Failed> {
    let mut response = None;
    let lines = logged_during("chatty", || {
        let headers = [
            ("X-Amzn-SageMaker-Target-Variant", "chatty"),
            ("X-Amzn-SageMaker-Inference-Id", "chatty-7"),
        ];
        response = Some(send(f.at("hostile"), "text/csv", None, &headers, "1\n"));
    });
    let response = response.unwrap();
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    for stream in ["stdout", "stderr"] {
        ensure!(
            lines
                .iter()
                .any(|l| l.contains(&format!("hello from the plugin's {stream}"))
                    && l.contains("inference_id=chatty-7")),
            "no {stream} line naming the inference id logged: {lines:?}"
        );
    }
    still_fine(f)
}

/// A guest logging in a loop until its deadline, and one printing 128 KiB: each call puts at
/// most its output budget into the log, then one "truncated" line; the rest is counted.
fn a_flood_of_output_is_cut_at_the_call_budget(f: &Fixture) -> Result<(), Failed> {
    let budget = trident::plugins::runtime::counters::OUTPUT_BUDGET_BYTES;
    for (mode, status) in [("flood", 504), ("flood-stdout", 200)] {
        let plugin = mode.replace('-', "_");
        let dropped_before = counters_of(f, &plugin).0;
        let mut response = None;
        let lines = logged_during(&plugin, || response = Some(with_variant(f, mode)));
        let response = response.unwrap();
        ensure!(
            response.status == status,
            "{mode}: {} {}",
            response.status,
            response.text()
        );
        let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
        // Each log line adds the timestamp, level and fields to what the guest wrote.
        ensure!(
            bytes < budget * 2,
            "{mode}: {bytes} bytes logged for one call (budget {budget})"
        );
        ensure!(
            lines
                .iter()
                .filter(|l| l.contains("plugin output truncated"))
                .count()
                == 1,
            "{mode}: not one truncation line in {} lines",
            lines.len()
        );
        let dropped = counters_of(f, &plugin).0 - dropped_before;
        ensure!(
            dropped > (64 * 2048 - budget) as u64 / 2,
            "{mode}: {dropped} bytes counted as dropped"
        );
    }
    still_fine(f)
}
