//! A communicator: one rank's handle on a group of ranks, and the operations over it.

use core::ffi::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::abort::{AbortHandle, CommState, Inside};
use crate::coll_config::CollConfig;
use crate::config::CommConfig;
use crate::data_type::DataType;
use crate::device_slice::{DeviceSlice, DeviceSliceMut};
use crate::error::{check, Error, Result};
use crate::reduction::RedOp;
use crate::stream::Stream;
use crate::sys::nccl::*;
use crate::unique_id::UniqueId;

/// A communicator, destroyed (`ncclCommDestroy`) on drop; [`finalize`](Self::finalize),
/// [`destroy`](Self::destroy), [`abort`](Self::abort) and [`shrink`](Self::shrink) consume
/// it and report errors. It may move to another thread (`Send`) but not be shared between
/// threads (not `Sync`): NCCL does not allow concurrent calls on one communicator. The one
/// exception, `ncclCommAbort`, is what an [`AbortHandle`] (from
/// [`abort_handle`](Self::abort_handle)) calls from any thread.
///
/// Collectives and point-to-point calls check their arguments (ranks, counts, the op)
/// before calling NCCL, then enqueue the work on `stream` and return.
#[derive(Debug)]
pub struct Communicator {
    /// Passed to NCCL only after `shared.check_live()` (the generated methods use it too, via
    /// `enter`); freed by whoever wins `shared`'s state, the owner or an abort handle.
    raw: ncclComm_t,
    rank: i32,
    nranks: i32,
    shared: Arc<CommState>,
}

// SAFETY: NCCL allows a communicator to be used from any one thread at a time; `ncclComm_t`
// holds a raw pointer, which also keeps `Communicator` from being `Sync`.
unsafe impl Send for Communicator {}

/// What [`Communicator::shrink`] does with the operations still pending on the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShrinkMode {
    /// Waits for them (`NCCL_SHRINK_DEFAULT`); then the parent is destroyed.
    Default,
    /// Aborts them, for recovery after a failure (`NCCL_SHRINK_ABORT`); then the parent is aborted.
    Abort,
}

impl Communicator {
    /// Joins rank `rank` of `nranks` to the communicator `id` names (`ncclCommInitRank`;
    /// blocks until every rank has joined). Call `cudaSetDevice` first.
    pub fn init_rank(nranks: i32, id: &UniqueId, rank: i32) -> Result<Communicator> {
        if nranks < 1 {
            return Err(Error::InvalidRankCount { nranks });
        }
        check_rank("rank", rank, nranks)?;
        let mut raw = ncclComm_t::NULL;
        // SAFETY: `raw` is a valid out-pointer; the id is passed by value.
        check("ncclCommInitRank", unsafe {
            ncclCommInitRank(&mut raw, nranks, *id.as_raw(), rank)
        })?;
        Ok(Communicator::owning(raw, rank, nranks))
    }

    /// [`init_rank`](Self::init_rank) with options (`ncclCommInitRankConfig`). The config is
    /// written in the layout of the loaded libnccl; an option it lacks is
    /// [`Error::ConfigFieldUnsupported`], before NCCL is called. With `blocking` false NCCL
    /// returns early; this waits until the communicator is ready (or failed), at most
    /// `config.init_timeout` ([`Error::Timeout`] after it).
    pub fn init_rank_config(
        nranks: i32,
        id: &UniqueId,
        rank: i32,
        config: &CommConfig,
    ) -> Result<Communicator> {
        if nranks < 1 {
            return Err(Error::InvalidRankCount { nranks });
        }
        check_rank("rank", rank, nranks)?;
        let mut raw_config = config.to_raw()?;
        let mut raw = ncclComm_t::NULL;
        // SAFETY: `raw` is a valid out-pointer; `raw_config` is an initialized config in the
        // loaded library's layout whose strings `config` keeps alive for the call.
        let result = unsafe {
            ncclCommInitRankConfig(
                &mut raw,
                nranks,
                *id.as_raw(),
                rank,
                raw_config.as_mut_ptr(),
            )
        };
        finish_nonblocking("ncclCommInitRankConfig", raw, result, config.init_timeout)?;
        Ok(Communicator::owning(raw, rank, nranks))
    }

    /// One communicator per listed device, all in this process (`ncclCommInitAll`); the
    /// communicator at index i is rank i.
    pub fn init_all(devices: &[i32]) -> Result<Vec<Communicator>> {
        let ndev = c_int::try_from(devices.len()).map_err(|_| Error::CountOverflow {
            argument: "devices",
            count: devices.len(),
            factor: 1,
        })?;
        if ndev < 1 {
            return Err(Error::InvalidRankCount { nranks: ndev });
        }
        let mut raws = vec![ncclComm_t::NULL; devices.len()];
        // SAFETY: `raws` has room for `ndev` handles; `devices` holds `ndev` ints.
        check("ncclCommInitAll", unsafe {
            ncclCommInitAll(raws.as_mut_ptr(), ndev, devices.as_ptr())
        })?;
        Ok(raws
            .into_iter()
            .zip(0..)
            .map(|(raw, rank)| Communicator::owning(raw, rank, ndev))
            .collect())
    }

    /// Adopts a communicator created elsewhere, asking NCCL for its rank and size.
    ///
    /// # Safety
    /// `raw` must be a live communicator that nothing else destroys or uses concurrently.
    pub unsafe fn from_raw(raw: ncclComm_t) -> Result<Communicator> {
        let (mut rank, mut nranks) = (0, 0);
        check("ncclCommUserRank", ncclCommUserRank(raw, &mut rank))?;
        check("ncclCommCount", ncclCommCount(raw, &mut nranks))?;
        Ok(Communicator::owning(raw, rank, nranks))
    }

    /// Adopts a communicator whose rank and size the caller already knows (no NCCL call).
    ///
    /// # Safety
    /// As for [`from_raw`](Self::from_raw), and `rank` / `nranks` must be the communicator's.
    pub unsafe fn from_raw_parts(raw: ncclComm_t, rank: i32, nranks: i32) -> Communicator {
        Communicator::owning(raw, rank, nranks)
    }

    fn owning(raw: ncclComm_t, rank: i32, nranks: i32) -> Communicator {
        let shared = CommState::new(raw);
        Communicator {
            raw,
            rank,
            nranks,
            shared,
        }
    }

    /// The NCCL handle, or null once an [`AbortHandle`] aborted (freed) the communicator:
    /// NCCL rejects a null communicator, where a freed one would be used after free.
    pub fn as_raw(&self) -> ncclComm_t {
        self.shared
            .check_live()
            .map_or(ncclComm_t::NULL, |()| self.raw)
    }

    /// Gives up ownership without destroying the communicator; its abort handles can no
    /// longer abort it ([`Error::CommunicatorGone`]). Null if a handle already aborted it.
    pub fn into_raw(self) -> ncclComm_t {
        if self.shared.release() {
            self.raw
        } else {
            ncclComm_t::NULL
        }
    }

    /// A handle that aborts this communicator from any thread (`ncclCommAbort`), for
    /// example to unblock a collective hung on a peer that never joins.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle::new(Arc::clone(&self.shared))
    }

    /// The handle for one NCCL call, counted as under way until the guard drops (a
    /// temporary in the call's statement lives across the call), or [`Error::Aborted`] once
    /// an abort handle freed it. An abort handle's abort lets a counted call return before it
    /// frees the communicator (`abort.rs`), so no call reaches NCCL with a freed handle unless
    /// it is blocked inside NCCL, which is the case `ncclCommAbort` from another thread exists
    /// for. Every NCCL call on the communicator goes through here (the generated collectives
    /// too, templates/rust/methods.rs.j2), never through `self.raw`, which may have been freed.
    #[inline]
    pub(crate) fn enter(&self) -> Result<Inside<'_>> {
        self.shared.enter()
    }

    /// Ok while no abort handle freed the communicator (for a check that calls nothing).
    pub(crate) fn shared_live(&self) -> Result<()> {
        self.shared.check_live()
    }

    /// Identifies this communicator for ops created on it.
    pub(crate) fn address(&self) -> usize {
        self.raw.0 as usize
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> i32 {
        self.nranks
    }

    /// The number of ranks, as NCCL reports it now (`ncclCommCount`).
    pub fn count(&self) -> Result<i32> {
        let mut count = 0;
        // SAFETY: `count` is a valid out-pointer; the communicator is live.
        check("ncclCommCount", unsafe {
            ncclCommCount(self.enter()?.raw(), &mut count)
        })?;
        Ok(count)
    }

    /// The CUDA device the communicator uses (`ncclCommCuDevice`).
    pub fn cuda_device(&self) -> Result<i32> {
        let mut device = 0;
        // SAFETY: as above.
        check("ncclCommCuDevice", unsafe {
            ncclCommCuDevice(self.enter()?.raw(), &mut device)
        })?;
        Ok(device)
    }

    /// Ok while no asynchronous error (a failed peer, a network error) has been detected.
    pub fn async_error(&self) -> Result<()> {
        let mut result = ncclResult_t::ncclSuccess;
        // SAFETY: as above.
        check("ncclCommGetAsyncError", unsafe {
            ncclCommGetAsyncError(self.enter()?.raw(), &mut result)
        })?;
        check("ncclCommGetAsyncError", result)
    }

    /// Flushes pending operations (`ncclCommFinalize`), then destroys the communicator.
    /// [`Error::Aborted`] if an abort handle aborted it (its pending work was not flushed).
    pub fn finalize(self) -> Result<()> {
        if !self.shared.release() {
            return Err(Error::Aborted);
        }
        // SAFETY: released above: live, owned, and no handle touches it; destroyed right after.
        let finalized = check("ncclCommFinalize", unsafe { ncclCommFinalize(self.raw) });
        // SAFETY: as above, and not used again (drop frees nothing once released).
        let destroyed = check("ncclCommDestroy", unsafe { ncclCommDestroy(self.raw) });
        finalized.and(destroyed)
    }

    /// Frees the communicator (`ncclCommDestroy`), reporting its error; drop does the same
    /// silently. Ok without calling NCCL if an abort handle already freed it.
    pub fn destroy(self) -> Result<()> {
        if !self.shared.release() {
            return Ok(());
        }
        // SAFETY: released above: live, owned, and not used again.
        check("ncclCommDestroy", unsafe { ncclCommDestroy(self.raw) })
    }

    /// Stops pending operations and frees the communicator (`ncclCommAbort`). Ok without
    /// calling NCCL if an abort handle already did.
    pub fn abort(self) -> Result<()> {
        if !self.shared.release() {
            return Ok(());
        }
        // SAFETY: released above: live, owned, and not used again.
        check("ncclCommAbort", unsafe { ncclCommAbort(self.raw) })
    }

    /// Splits the communicator (`ncclCommSplit`; collective over it): ranks passing the same
    /// `color` form a new communicator, ordered by `key`. With `color` None this rank joins
    /// none and gets None. The parent stays usable, so this borrows it.
    pub fn split(&self, color: Option<i32>, key: i32) -> Result<Option<Communicator>> {
        // SAFETY: a null config means NCCL's defaults.
        unsafe { self.split_raw(color, key, std::ptr::null_mut(), None) }
    }

    /// [`split`](Self::split) with options for the new communicator, written as for
    /// [`init_rank_config`](Self::init_rank_config).
    pub fn split_config(
        &self,
        color: Option<i32>,
        key: i32,
        config: &CommConfig,
    ) -> Result<Option<Communicator>> {
        let mut raw_config = config.to_raw()?;
        // SAFETY: an initialized config in the loaded library's layout, kept alive by `config`.
        unsafe { self.split_raw(color, key, raw_config.as_mut_ptr(), config.init_timeout) }
    }

    /// # Safety
    /// `config` is null or an initialized config NCCL accepts, live for the call.
    unsafe fn split_raw(
        &self,
        color: Option<i32>,
        key: i32,
        config: *mut ncclConfig_t,
        timeout: Option<Duration>,
    ) -> Result<Option<Communicator>> {
        let color = match color {
            Some(color) if color < 0 => return Err(Error::InvalidColor { color }),
            Some(color) => color,
            None => NCCL_SPLIT_NOCOLOR,
        };
        let parent = self.enter()?;
        let mut raw = ncclComm_t::NULL;
        // SAFETY: `raw` is a valid out-pointer; the caller vouches for `config`.
        let result = unsafe { ncclCommSplit(parent.raw(), color, key, &mut raw, config) };
        drop(parent);
        finish_nonblocking("ncclCommSplit", raw, result, timeout)?;
        if raw.is_null() {
            return Ok(None);
        }
        // SAFETY: NCCL just created `raw`, and nothing else holds it.
        unsafe { Communicator::from_raw(raw) }.map(Some)
    }

    /// A communicator of the ranks not in `exclude` (`ncclCommShrink`; collective over the
    /// ranks that remain). Consumes the parent: it is destroyed, or aborted with
    /// [`ShrinkMode::Abort`], whether or not the shrink succeeds.
    pub fn shrink(self, exclude: &[i32], mode: ShrinkMode) -> Result<Communicator> {
        for &rank in exclude {
            check_rank("excluded rank", rank, self.nranks)?;
        }
        let count = c_int::try_from(exclude.len()).map_err(|_| Error::CountOverflow {
            argument: "exclude",
            count: exclude.len(),
            factor: 1,
        })?;
        let flags = match mode {
            ShrinkMode::Default => NCCL_SHRINK_DEFAULT,
            ShrinkMode::Abort => NCCL_SHRINK_ABORT,
        };
        let parent = self.enter()?;
        let mut exclude = exclude.to_vec(); // NCCL takes a non-const pointer
        let mut raw = ncclComm_t::NULL;
        // SAFETY: `exclude` holds `count` ranks; `raw` is a valid out-pointer.
        let shrunk = check("ncclCommShrink", unsafe {
            ncclCommShrink(
                parent.raw(),
                exclude.as_mut_ptr(),
                count,
                &mut raw,
                std::ptr::null_mut(),
                flags,
            )
        });
        drop(parent);
        let parent_gone = match mode {
            ShrinkMode::Default => self.destroy(),
            ShrinkMode::Abort => self.abort(),
        };
        shrunk?;
        parent_gone?;
        // SAFETY: NCCL just created `raw`, and nothing else holds it.
        unsafe { Communicator::from_raw(raw) }
    }
}

// The collectives and point-to-point calls: generated from policy/nccl.toml
// (templates/rust/methods.rs.j2), with the checks below.
include!("generated/communicator_methods.rs");
// Host calls without device buffers (kind = "call" in the policy; templates/rust/calls.rs.j2).
include!("generated/communicator_calls.rs");
include!("generated/window_calls.rs");

impl Drop for Communicator {
    fn drop(&mut self) {
        if self.shared.release() {
            // SAFETY: released: live, owned, no handle touches it, and nothing uses it after this.
            unsafe { ncclCommDestroy(self.raw) };
        }
    }
}

/// Checks what a communicator constructor returned. A non-blocking one answers
/// `ncclInProgress` and is polled until ready, for at most `timeout`; if it then fails, or is
/// still in progress past the timeout ([`Error::Timeout`]), it is aborted (an immediate
/// failure leaves nothing to free).
fn finish_nonblocking(
    function: &'static str,
    raw: ncclComm_t,
    result: ncclResult_t,
    timeout: Option<Duration>,
) -> Result<()> {
    if result != ncclResult_t::ncclInProgress || raw.is_null() {
        return check(function, result);
    }
    let started = Instant::now();
    let mut state = result;
    while state == ncclResult_t::ncclInProgress {
        let waited = started.elapsed();
        if timeout.is_some_and(|timeout| waited >= timeout) {
            abort_raw(raw);
            return Err(Error::Timeout { function, waited });
        }
        std::thread::yield_now();
        // SAFETY: `raw` is the communicator NCCL just returned; `state` is a valid out-pointer.
        let polled = unsafe { ncclCommGetAsyncError(raw, &mut state) };
        check("ncclCommGetAsyncError", polled).inspect_err(|_| abort_raw(raw))?;
    }
    check(function, state).inspect_err(|_| abort_raw(raw))
}

fn abort_raw(raw: ncclComm_t) {
    if !raw.is_null() {
        // SAFETY: `raw` is owned by the failing constructor and not used after this.
        unsafe { ncclCommAbort(raw) };
    }
}

fn check_rank(argument: &'static str, rank: i32, nranks: i32) -> Result<()> {
    if (0..nranks).contains(&rank) {
        Ok(())
    } else {
        Err(Error::RankOutOfRange {
            argument,
            rank,
            nranks,
        })
    }
}

/// A buffer of exactly the length the call needs: shorter would overrun, longer would
/// silently leave elements out.
fn exactly(argument: &'static str, len: usize, expected: usize) -> Result<()> {
    if len == expected {
        Ok(())
    } else {
        Err(Error::WrongLength {
            argument,
            len,
            expected,
        })
    }
}

/// `count * nranks`, or the overflow as an error.
fn times_ranks(argument: &'static str, count: usize, nranks: i32) -> Result<usize> {
    let factor = nranks as usize;
    count.checked_mul(factor).ok_or(Error::CountOverflow {
        argument,
        count,
        factor,
    })
}

/// `len / nranks` when it divides evenly.
fn evenly(argument: &'static str, len: usize, nranks: i32) -> Result<usize> {
    let n = nranks as usize;
    if len % n == 0 {
        Ok(len / n)
    } else {
        Err(Error::UnevenCount {
            argument,
            len,
            nranks,
        })
    }
}
