//! Aborting a communicator from another thread: [`AbortHandle`], and the state a
//! [`Communicator`](crate::Communicator) shares with its handles.
//!
//! `ncclCommAbort` both stops the communicator's work (which unblocks a thread waiting on a
//! hung collective) and frees it. So exactly one party may free a communicator: whoever moves
//! the shared state away from `LIVE` first, the owner (destroy, finalize, abort, shrink,
//! into_raw, drop) or a handle (abort). Nobody holds a lock across an NCCL call. The owner
//! counts its calls in `inside` around each NCCL call ([`CommState::enter`]); a handle's abort
//! gives the calls under way [`ABORT_GRACE`] to return before it frees the communicator (one
//! that is not blocked takes microseconds), then, where the library has `ncclCommRevoke`
//! (NCCL 2.28.9 on), revokes (which stops a blocked call and frees nothing) and gives
//! [`REVOKE_GRACE`]; a call still blocked inside after that is what `ncclCommAbort` from
//! another thread exists for, and it returns NCCL's error.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{check, Error, Result};
use crate::sys::nccl::{ncclCommAbort, ncclCommRevoke, ncclComm_t};

/// How long a handle's abort lets the owner's call under way return before it frees the
/// communicator: a call that is not blocked in NCCL takes microseconds.
pub const ABORT_GRACE: Duration = Duration::from_millis(50);
/// After `ncclCommRevoke`, how long a call blocked in NCCL gets to return.
pub const REVOKE_GRACE: Duration = Duration::from_secs(1);

/// The owner may use and free the communicator.
const LIVE: u8 = 0;
/// A handle aborted it: the communicator is freed, and the owner must not pass it to NCCL.
const ABORTED: u8 = 1;
/// The owner destroyed it (or gave it up): handles must not pass it to NCCL.
const GONE: u8 = 2;

/// What a communicator and its abort handles share: the handle NCCL gave, and who owns it now.
#[derive(Debug)]
pub(crate) struct CommState {
    raw: ncclComm_t,
    state: AtomicU8,
    /// The owner's NCCL calls under way (0 or 1: the owner is one thread at a time).
    inside: AtomicUsize,
}

// SAFETY: `raw` is only passed to NCCL by the party that moved `state` away from LIVE (once),
// or by the owning `Communicator` while it is LIVE; ncclCommAbort may be called from any
// thread, and the state is an atomic.
unsafe impl Send for CommState {}
// SAFETY: as above; `&CommState` offers only atomic operations and that one abort.
unsafe impl Sync for CommState {}

impl CommState {
    pub(crate) fn new(raw: ncclComm_t) -> Arc<CommState> {
        Arc::new(CommState {
            raw,
            state: AtomicU8::new(LIVE),
            inside: AtomicUsize::new(0),
        })
    }

    /// The handle for one NCCL call, counted in `inside` until the returned guard drops (keep
    /// it alive across the call: a temporary in the call's statement is), or
    /// [`Error::Aborted`] once a handle aborted the communicator. The count and the state are
    /// sequentially consistent (increment, then read the state; the abort writes the state,
    /// then reads the count), so either this call sees the abort and stays out of NCCL, or the
    /// abort sees the call and waits for it.
    #[inline]
    pub(crate) fn enter(&self) -> Result<Inside<'_>> {
        self.inside.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) == LIVE {
            Ok(Inside { state: self })
        } else {
            self.inside.fetch_sub(1, Ordering::SeqCst);
            Err(Error::Aborted)
        }
    }

    /// Ok while no handle has aborted the communicator (no call follows: nothing is counted).
    #[inline]
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.state.load(Ordering::Acquire) == LIVE {
            Ok(())
        } else {
            Err(Error::Aborted)
        }
    }

    /// Waits up to `grace` for the owner's calls under way to return; true when none is.
    fn wait_outside(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        while self.inside.load(Ordering::SeqCst) > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// The owner gives the communicator up: true when it is still the owner's to free (and
    /// now no handle will touch it), false when a handle already aborted (freed) it.
    pub(crate) fn release(&self) -> bool {
        self.state
            .compare_exchange(LIVE, GONE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// Aborts a communicator from any thread: [`Communicator::abort_handle`](crate::Communicator::abort_handle).
/// `Send`, `Sync` and `Clone`, for a watchdog thread that unblocks a collective hung on a
/// peer that never joins.
///
/// ```no_run
/// # fn main() -> ncclbind::Result<()> {
/// # let comm: ncclbind::Communicator = unimplemented!();
/// let handle = comm.abort_handle();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(60));
///     let _ = handle.abort(); // the owner's waiting thread returns with an error
/// });
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    shared: Arc<CommState>,
}

/// One owner call under way ([`CommState::enter`]): the handle it may pass to NCCL, counted
/// until dropped.
pub(crate) struct Inside<'a> {
    state: &'a CommState,
}

impl Inside<'_> {
    /// The communicator, live for as long as this guard is.
    #[inline]
    pub(crate) fn raw(&self) -> ncclComm_t {
        self.state.raw
    }
}

impl Drop for Inside<'_> {
    #[inline]
    fn drop(&mut self) {
        self.state.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AbortHandle {
    pub(crate) fn new(shared: Arc<CommState>) -> AbortHandle {
        AbortHandle { shared }
    }

    /// Stops the communicator's pending work and frees it (`ncclCommAbort`, called once
    /// however many handles abort). Afterwards the owner's calls return [`Error::Aborted`]
    /// and its drop frees nothing. A call the owner already had under way gets [`ABORT_GRACE`]
    /// to return first, and, blocked in NCCL, is revoked where the library has
    /// `ncclCommRevoke` ([`REVOKE_GRACE`]); one still blocked is ended by the abort, with
    /// NCCL's error. Ok as well when an earlier abort did it; [`Error::CommunicatorGone`] when the
    /// owner already destroyed the communicator (NCCL is not called).
    pub fn abort(&self) -> Result<()> {
        // SeqCst, as the owner's enter(): the state change is ordered before this reads the
        // count, so a call either saw the abort or is counted.
        match self
            .shared
            .state
            .compare_exchange(LIVE, ABORTED, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => {
                let shared = &self.shared;
                if !shared.wait_outside(ABORT_GRACE) {
                    // SAFETY: the communicator is not freed yet (this handle frees it below);
                    // revoke frees nothing. A library without it answers SYMBOL_NOT_FOUND.
                    let _ = unsafe { ncclCommRevoke(shared.raw, 0) };
                    shared.wait_outside(REVOKE_GRACE);
                }
                // SAFETY: moving the state from LIVE made the communicator this call's to free;
                // the owner frees nothing from now on, and no handle calls NCCL with it again.
                check("ncclCommAbort", unsafe { ncclCommAbort(shared.raw) })
            }
            Err(ABORTED) => Ok(()),
            Err(_) => Err(Error::CommunicatorGone),
        }
    }

    /// True once a handle aborted the communicator.
    pub fn is_aborted(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) == ABORTED
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.shared.state.load(Ordering::Acquire) {
            LIVE => "live",
            ABORTED => "aborted",
            _ => "gone",
        };
        f.debug_struct("AbortHandle")
            .field("comm", &self.shared.raw)
            .field("state", &state)
            .finish()
    }
}
