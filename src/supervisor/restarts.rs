//! When the supervisor restarts a serving process that ended abnormally, and when it stops
//! trying (a crash loop).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::process::RestartLimit;

/// A serving process that served this long before it ended is restarted at once. One that
/// ended sooner is restarted after a pause: none for the first end in the window, then
/// [`FIRST_PAUSE`] doubling up to [`MAX_PAUSE`], so a process that crashes at once does not spin.
const STABLE: Duration = Duration::from_secs(5);
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(8);

/// The abnormal ends the supervisor has seen within its window.
#[derive(Debug)]
pub struct Restarts {
    limit: RestartLimit,
    recent: VecDeque<Instant>,
    total: u32,
}

/// Why the supervisor stops restarting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashLoop {
    /// The abnormal ends within the window, the last one included.
    pub ends: u32,
    /// The window of the restart limit.
    pub window: Duration,
}

impl std::fmt::Display for CrashLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the serving process ended abnormally {} times within {} s",
            self.ends,
            self.window.as_secs()
        )
    }
}

impl Restarts {
    /// No ends seen yet, under `limit`.
    pub fn new(limit: RestartLimit) -> Restarts {
        Restarts {
            limit,
            recent: VecDeque::new(),
            total: 0,
        }
    }

    /// Restarts so far.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Counts an abnormal end at `now` of a process that ran for `lived`: the pause before the
    /// restart, or the crash loop that ends the supervisor (more than `max` ends within the
    /// window).
    pub fn after_abnormal_end(
        &mut self,
        now: Instant,
        lived: Duration,
    ) -> Result<Duration, CrashLoop> {
        while self
            .recent
            .front()
            .is_some_and(|&end| now.duration_since(end) >= self.limit.window)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let ends = u32::try_from(self.recent.len()).unwrap_or(u32::MAX);
        if ends > self.limit.max {
            return Err(CrashLoop {
                ends,
                window: self.limit.window,
            });
        }
        self.total += 1;
        Ok(match ends {
            _ if lived >= STABLE => Duration::ZERO,
            0 | 1 => Duration::ZERO,
            n => FIRST_PAUSE
                .saturating_mul(1 << (n - 2).min(16))
                .min(MAX_PAUSE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIEF: Duration = Duration::from_secs(1);
    const LONG: Duration = Duration::from_secs(60);

    fn limit(max: u32, window_secs: u64) -> RestartLimit {
        RestartLimit {
            max,
            window: Duration::from_secs(window_secs),
        }
    }

    #[test]
    fn the_first_restart_is_at_once_and_later_ones_back_off() {
        let mut restarts = Restarts::new(limit(10, 600));
        let start = Instant::now();
        let pauses: Vec<Duration> = (0..6)
            .map(|i| restarts.after_abnormal_end(start + Duration::from_secs(i), BRIEF))
            .collect::<Result<_, _>>()
            .unwrap();
        let ms: Vec<u128> = pauses.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 500, 1000, 2000, 4000, 8000]);
        assert_eq!(restarts.total(), 6);
    }

    #[test]
    fn more_ends_than_allowed_within_the_window_is_a_crash_loop() {
        let mut restarts = Restarts::new(limit(2, 60));
        let start = Instant::now();
        assert!(restarts.after_abnormal_end(start, LONG).is_ok());
        assert!(
            restarts
                .after_abnormal_end(start + Duration::from_secs(1), LONG)
                .is_ok()
        );
        let looped = restarts
            .after_abnormal_end(start + Duration::from_secs(2), LONG)
            .unwrap_err();
        assert_eq!(looped.ends, 3);
        assert!(
            looped.to_string().contains("3 times within 60 s"),
            "{looped}"
        );
        assert_eq!(restarts.total(), 2);
    }

    #[test]
    fn ends_outside_the_window_are_forgotten() {
        let mut restarts = Restarts::new(limit(2, 60));
        let start = Instant::now();
        for minute in 0..10 {
            let at = start + Duration::from_secs(61 * minute);
            assert_eq!(restarts.after_abnormal_end(at, BRIEF), Ok(Duration::ZERO));
        }
        assert_eq!(restarts.total(), 10);
    }

    #[test]
    fn no_restart_at_all_when_none_is_allowed() {
        let mut restarts = Restarts::new(limit(0, 60));
        assert!(restarts.after_abnormal_end(Instant::now(), LONG).is_err());
    }

    #[test]
    fn a_process_that_served_a_while_is_restarted_at_once() {
        let mut restarts = Restarts::new(limit(10, 600));
        let start = Instant::now();
        for i in 0..4 {
            let at = start + Duration::from_secs(10 * i);
            assert_eq!(restarts.after_abnormal_end(at, LONG), Ok(Duration::ZERO));
        }
        assert!(
            restarts
                .after_abnormal_end(start + Duration::from_secs(41), BRIEF)
                .unwrap()
                > Duration::ZERO
        );
    }
}
