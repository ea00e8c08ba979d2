//! The tally of one rank's checks; the first failures are printed as they happen. Calls the
//! loaded libnccl lacks (newer than it) are tallied apart, as "not in this release".

use std::collections::BTreeSet;
use std::fmt::Debug;

use ncclbind::Error;

const FAILURES_PRINTED: usize = 20;

pub struct Checks {
    rank: usize,
    pub passed: usize,
    pub failed: usize,
    /// The calls skipped because the loaded libnccl lacks them, each counted once.
    pub absent: BTreeSet<String>,
}

impl Checks {
    pub fn new(rank: usize) -> Checks {
        Checks {
            rank,
            passed: 0,
            failed: 0,
            absent: BTreeSet::new(),
        }
    }

    /// The result of a call that may be newer than the loaded libnccl: `Ok(Some(value))` when
    /// it ran; `Ok(None)` when the library lacks the function (`Error::SymbolNotFound`),
    /// printed once per call as "rank R: WHAT skipped: MESSAGE" and counted in `absent`
    /// (the message must name the release that first has it, else that is a failed check);
    /// any other error is returned as is.
    pub fn present<T>(&mut self, what: &str, result: Result<T, Error>) -> Result<Option<T>, Error> {
        match result {
            Ok(value) => Ok(Some(value)),
            Err(Error::SymbolNotFound { function, message }) => {
                self.expect(message.contains("first appears in"), || {
                    format!(
                        "{what}: {function} not found, without the release that has it: {message}"
                    )
                });
                if self.absent.insert(what.to_string()) {
                    println!("rank {}: {what} skipped: {message}", self.rank);
                }
                Ok(None)
            }
            Err(other) => Err(other),
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
