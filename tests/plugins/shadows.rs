//! Shadow adapters on live traffic: a candidate that differs on one request in ten is counted
//! `differs` on exactly those, an identical one (another language's build) `same`, the
//! client's answers are the serving adapters' throughout, the differences are logged without
//! the client's values, and a candidate that loops is stopped, counted `failed`, and makes the
//! shadows of the requests behind it `skipped` instead of holding them.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    a_candidate_that_differs_on_a_tenth_is_counted_so_and_answers_stay_the_servings,
    a_candidate_that_loops_fails_and_the_shadows_behind_it_are_skipped,
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
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let counts = verdicts(at, candidate, hook);
        if counts.iter().sum::<u64>() >= total {
            return Ok(counts);
        }
        ensure!(
            Instant::now() < deadline,
            "{candidate}: {counts:?} after 10 s, {total} expected"
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
    for n in 1..=5u64 {
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
    let [same, differs, failed, skipped] = settled(at, "loop", "request", 5)?;
    ensure!(
        same == 0 && differs == 0 && failed >= 1 && skipped >= 1 && failed + skipped == 5,
        "{:?}",
        [same, differs, failed, skipped]
    );
    still_fine(f)
}
