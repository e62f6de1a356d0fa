//! Shadow adapters on live traffic: a candidate that differs on one request in ten is counted
//! `differs` on exactly those, an identical one (another language's build) `same`, the
//! client's answers are the serving adapters' throughout, the differences are logged without
//! the client's values, and a candidate that loops is stopped, counted `failed`, and makes the
//! shadows of the requests behind it `skipped` past the shadow queue instead of holding them;
//! a burst at full sample is judged whole, counted by the model served (not the `*` entry), and
//! a reload that leaves the plugins as they were keeps every count.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    a_candidate_that_differs_on_a_tenth_is_counted_so_and_answers_stay_the_servings,
    a_candidate_that_loops_fails_and_the_shadows_behind_it_are_skipped,
    a_burst_is_judged_whole_by_model_and_an_unchanged_reload_keeps_the_counts,
];

/// The shadow verdicts of `candidate` on `at`'s `/metrics`, in the order same, differs,
/// failed, skipped.
fn verdicts(at: SocketAddr, candidate: &str, hook: &str) -> [u64; 4] {
    let text = get(at, "/metrics").text();
    ["same", "differs", "failed", "skipped"].map(|outcome| {
        let prefix = format!(
            "trident_plugin_shadow_total{{model=\"affine\",candidate=\"{candidate}\",hook=\"{hook}\",outcome=\"{outcome}\"}} "
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    })
}

/// Waits (at most 10 s) until `candidate`'s verdicts add up to `total`.
fn settled(at: SocketAddr, candidate: &str, hook: &str, total: u64) -> Result<[u64; 4], Failed> {
    settled_within(at, candidate, hook, total, Duration::from_secs(10))
}

/// Waits (at most `wait`) until `candidate`'s verdicts add up to `total`.
fn settled_within(
    at: SocketAddr,
    candidate: &str,
    hook: &str,
    total: u64,
    wait: Duration,
) -> Result<[u64; 4], Failed> {
    let deadline = Instant::now() + wait;
    loop {
        let counts = verdicts(at, candidate, hook);
        if counts.iter().sum::<u64>() >= total {
            return Ok(counts);
        }
        ensure!(
            Instant::now() < deadline,
            "{candidate}: {counts:?} after {wait:?}, {total} expected"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn a_candidate_that_differs_on_a_tenth_is_counted_so_and_answers_stay_the_servings(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("shadow");
    let logged_before = LOG.lock().unwrap().len();
    for n in 1..=100u64 {
        let answer = send(at, "text/csv", Some("text/csv"), &[], &format!("{n}\n"));
        // The affine model's 2x + 1, as the serving CSV adapters make it.
        ensure!(
            answer.status == 200 && answer.text() == format!("{}\n", 2 * n + 1),
            "{n}: {} {}",
            answer.status,
            answer.text()
        );
        // One at a time, so that no shadow finds the budget spent.
        settled(at, "tenth", "request", n)?;
        settled(at, "out_python", "response", n)?;
    }
    let request = verdicts(at, "tenth", "request");
    ensure!(
        request == [90, 10, 0, 0],
        "the request candidate: {request:?}"
    );
    let response = verdicts(at, "out_python", "response");
    ensure!(
        response == [100, 0, 0, 0],
        "the response candidate: {response:?}"
    );
    let text = get(at, "/metrics").text();
    let labels = "model=\"affine\",candidate=\"tenth\",hook=\"request\"";
    ensure!(
        text.contains(&format!(
            "trident_plugin_shadow_duration_seconds_count{{{labels}}} 100\n"
        )),
        "no candidate times"
    );
    // The serving calls' latency is a histogram of the same buckets, by variant.
    ensure!(
        text.contains("trident_plugin_call_duration_seconds_count{plugin=\"csv\",hook=\"request\",variant=\"\"}"),
        "no serving latency histogram"
    );
    // The first differences are logged, where they differ and not the client's values.
    let log = String::from_utf8_lossy(&LOG.lock().unwrap()[logged_before..]).into_owned();
    let differs: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("a shadow adapter answered otherwise"))
        .collect();
    ensure!(differs.len() == 10, "{} lines logged", differs.len());
    ensure!(
        differs
            .iter()
            .all(|line| line.contains("differences=inputs[0].data[0]")
                && line.contains("candidate=\"tenth\"")
                && !line.contains("10.5")),
        "{}",
        differs[0]
    );
    Ok(())
}

fn a_candidate_that_loops_fails_and_the_shadows_behind_it_are_skipped(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("shadow_loop");
    // Each looping call holds the one shadow slot for its whole 200 ms time limit: past the
    // queue (16 a slot) the shadows behind it are skipped, however fast the requests come.
    const REQUESTS: u64 = 40;
    let burst = Instant::now();
    for n in 1..=REQUESTS {
        let started = Instant::now();
        let answer = send(at, "text/csv", None, &[], &format!("{n}\n"));
        ensure!(
            answer.status == 200,
            "{n}: {} {}",
            answer.status,
            answer.text()
        );
        // The answer does not wait for the candidate's 200 ms loop.
        ensure!(
            started.elapsed() < Duration::from_secs(5),
            "{n}: answered in {:?}",
            started.elapsed()
        );
    }
    let took = burst.elapsed();
    let wait = Duration::from_millis(200) * (REQUESTS as u32) + Duration::from_secs(5);
    let [same, differs, failed, skipped] = settled_within(at, "loop", "request", REQUESTS, wait)?;
    // At most the running one and the queue's 16, and one more for each 200 ms the burst took,
    // were run.
    let could_run = 17 + (took.as_millis() / 200) as u64;
    ensure!(
        same == 0
            && differs == 0
            && failed >= 1
            && failed + skipped == REQUESTS
            && skipped >= REQUESTS.saturating_sub(could_run),
        "{:?} (the burst took {took:?})",
        [same, differs, failed, skipped]
    );
    still_fine(f)
}

fn a_burst_is_judged_whole_by_model_and_an_unchanged_reload_keeps_the_counts(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("shadow_star");
    // 16 requests back to back (the shadow queue's length), not waiting for their shadows:
    // every one is judged, none skipped.
    for n in 1..=16u64 {
        let answer = send(at, "text/csv", None, &[], &format!("{n}\n"));
        ensure!(
            answer.status == 200,
            "{n}: {} {}",
            answer.status,
            answer.text()
        );
    }
    let counts = settled(at, "csv_copy", "request", 16)?;
    ensure!(counts == [16, 0, 0, 0], "{counts:?}");
    // Labelled by the model served, not the manifest's `*` entry.
    let text = get(at, "/metrics").text();
    ensure!(
        !text.contains("trident_plugin_shadow_total{model=\"*\""),
        "a shadow series labelled *"
    );
    let ok_calls = |text: &str| -> u64 {
        let prefix = "trident_plugin_hook_calls_total{plugin=\"csv\",model=\"\",hook=\"request\",outcome=\"ok\"} ";
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    ensure!(ok_calls(&text) == 16, "csv's account: {}", ok_calls(&text));

    // The same manifest loaded again: every count goes on.
    let reload = || request(at, "POST", "/plugins/reload", &[], b"");
    let reloaded = reload();
    ensure!(
        reloaded.status == 200,
        "{} {}",
        reloaded.status,
        reloaded.text()
    );
    ensure!(
        verdicts(at, "csv_copy", "request") == [16, 0, 0, 0],
        "after the reload: {:?}",
        verdicts(at, "csv_copy", "request")
    );
    let answer = send(at, "text/csv", None, &[], "3\n");
    ensure!(answer.status == 200, "{} {}", answer.status, answer.text());
    ensure!(
        settled(at, "csv_copy", "request", 17)? == [17, 0, 0, 0],
        "after the reload"
    );
    let text = get(at, "/metrics").text();
    ensure!(
        ok_calls(&text) == 17,
        "csv's account after the reload: {}",
        ok_calls(&text)
    );

    // Another sample is another shadow: its counts start again; the unchanged adapter's stay.
    let path = f.manifests.path().join("shadow_star.toml");
    let good = std::fs::read_to_string(&path)?;
    std::fs::write(&path, good.replace("sample = 1.0", "sample = 0.999"))?;
    let changed = reload();
    std::fs::write(&path, &good)?;
    ensure!(
        changed.status == 200,
        "{} {}",
        changed.status,
        changed.text()
    );
    ensure!(
        verdicts(at, "csv_copy", "request") == [0, 0, 0, 0],
        "a changed shadow kept its counts: {:?}",
        verdicts(at, "csv_copy", "request")
    );
    let text = get(at, "/metrics").text();
    ensure!(
        ok_calls(&text) == 17,
        "csv's account after a shadow's change: {}",
        ok_calls(&text)
    );
    ensure!(reload().status == 200, "the manifest restored");
    still_fine(f)
}
