//! Aborting a communicator from another thread: [`AbortHandle`], and the state a
//! [`Communicator`](crate::Communicator) shares with its handles.
//!
//! `ncclCommAbort` both stops the communicator's work (which unblocks a thread waiting on a
//! hung collective) and frees it. So exactly one party may free a communicator: whoever moves
//! the shared state away from `LIVE` first, the owner (destroy, finalize, abort, shrink,
//! into_raw, drop) or a handle (abort). Nobody holds a lock across an NCCL call: a handle's
//! abort never waits for a call that another thread has under way.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::error::{check, Error, Result};
use crate::sys::nccl::{ncclCommAbort, ncclComm_t};

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
        })
    }

    /// Ok while no handle has aborted the communicator: one atomic load, made by the owner
    /// before each NCCL call.
    #[inline]
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.state.load(Ordering::Acquire) == LIVE {
            Ok(())
        } else {
            Err(Error::Aborted)
        }
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

impl AbortHandle {
    pub(crate) fn new(shared: Arc<CommState>) -> AbortHandle {
        AbortHandle { shared }
    }

    /// Stops the communicator's pending work and frees it (`ncclCommAbort`, called once
    /// however many handles abort). Afterwards the owner's calls return [`Error::Aborted`]
    /// and its drop frees nothing; a call the owner already had under way returns NCCL's
    /// error. Ok as well when an earlier abort did it; [`Error::CommunicatorGone`] when the
    /// owner already destroyed the communicator (NCCL is not called).
    pub fn abort(&self) -> Result<()> {
        match self
            .shared
            .state
            .compare_exchange(LIVE, ABORTED, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: moving the state from LIVE made the communicator this call's to free;
            // the owner frees nothing from now on, and no handle calls NCCL with it again.
            Ok(_) => check("ncclCommAbort", unsafe { ncclCommAbort(self.shared.raw) }),
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
