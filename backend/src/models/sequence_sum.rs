//! Sequence sum, for Triton's sequence batcher: `OUTPUT` is the running sum of `INPUT` (one
//! INT32, shaped `[1]`, or `[1, 1]` where the model batches) over the requests of one sequence
//! (one correlation id). A request with the start flag begins the sum at zero; one with the end
//! flag forgets the sequence after answering. The sums are the model instance's state (the batcher keeps a sequence on one
//! instance), bounded: when [`MAX_SEQUENCES`] are open, a new one replaces the one idle longest
//! (a sequence the batcher timed out never sends its end).

use std::collections::HashMap;

use crate::error::BackendError;

/// The most sequences one instance keeps a sum for.
pub const MAX_SEQUENCES: usize = 4096;

/// Flag bits of a request (`TRITONSERVER_REQUEST_FLAG_SEQUENCE_START` / `_END`).
pub const START: u32 = 1;
/// See [`START`].
pub const END: u32 = 2;

/// The open sequences' sums.
#[derive(Default)]
pub struct Sums {
    open: HashMap<u64, Sum>,
    clock: u64,
}

struct Sum {
    total: i32,
    touched: u64,
}

impl Sums {
    /// Adds `value` to sequence `id`'s sum, as `flags` say, and returns the new sum.
    pub fn step(&mut self, id: u64, flags: u32, value: i32) -> Result<i32, BackendError> {
        if id == 0 {
            return Err(BackendError::invalid(
                "sequence_sum needs a sequence: the request has no correlation id",
            ));
        }
        self.clock += 1;
        if flags & START != 0 {
            self.open.remove(&id);
        }
        if !self.open.contains_key(&id) && self.open.len() >= MAX_SEQUENCES {
            let idle = self
                .open
                .iter()
                .min_by_key(|(_, sum)| sum.touched)
                .map(|(id, _)| *id);
            if let Some(idle) = idle {
                self.open.remove(&idle);
            }
        }
        let sum = self.open.entry(id).or_insert(Sum {
            total: 0,
            touched: 0,
        });
        sum.total = sum.total.wrapping_add(value);
        sum.touched = self.clock;
        let total = sum.total;
        if flags & END != 0 {
            self.open.remove(&id);
        }
        Ok(total)
    }

    /// How many sequences are open.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_sequences_keep_separate_sums() {
        let mut sums = Sums::default();
        assert_eq!(sums.step(7, START, 1).unwrap(), 1);
        assert_eq!(sums.step(9, START, 10).unwrap(), 10);
        assert_eq!(sums.step(7, 0, 2).unwrap(), 3);
        assert_eq!(sums.step(9, END, 5).unwrap(), 15);
        assert_eq!(sums.open(), 1);
        assert_eq!(sums.step(7, START, 4).unwrap(), 4, "a start begins again");
        assert!(sums.step(0, START, 1).is_err());
    }

    #[test]
    fn the_longest_idle_sequence_gives_way() {
        let mut sums = Sums::default();
        for id in 1..=MAX_SEQUENCES as u64 {
            sums.step(id, START, 1).unwrap();
        }
        sums.step(1, 0, 1).unwrap();
        sums.step(u64::MAX, START, 1).unwrap();
        assert_eq!(sums.open(), MAX_SEQUENCES);
        assert_eq!(sums.step(1, 0, 1).unwrap(), 3, "touched last, kept");
        assert_eq!(sums.step(2, 0, 1).unwrap(), 1, "idle longest, dropped");
    }
}
