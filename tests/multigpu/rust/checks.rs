//! The tally of one rank's checks; the first failures are printed as they happen.

use std::fmt::Debug;

const FAILURES_PRINTED: usize = 20;

pub struct Checks {
    rank: usize,
    pub passed: usize,
    pub failed: usize,
}

impl Checks {
    pub fn new(rank: usize) -> Checks {
        Checks {
            rank,
            passed: 0,
            failed: 0,
        }
    }

    pub fn expect(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
            return;
        }
        self.failed += 1;
        if self.failed <= FAILURES_PRINTED {
            eprintln!("rank {}: FAIL {}", self.rank, what());
        }
    }

    /// Every element of `got` against `want(index)`.
    pub fn elements<T: PartialEq + Debug>(
        &mut self,
        what: &str,
        got: &[T],
        want: impl Fn(usize) -> T,
    ) {
        let mut wrong = got.iter().enumerate().filter(|&(i, x)| *x != want(i));
        let first = wrong.next();
        let count = first.map_or(0, |_| 1 + wrong.count());
        self.expect(first.is_none(), || {
            let (i, x) = first.unwrap();
            format!(
                "{what}: {count} of {} elements wrong; [{i}] is {x:?}, expected {:?}",
                got.len(),
                want(i)
            )
        });
    }
}
