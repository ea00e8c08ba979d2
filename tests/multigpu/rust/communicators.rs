//! Communicators made from the world one: split (by parity, and with no color on some
//! ranks), shrink, abort while a peer's receive waits, and an abort handle that unblocks a
//! thread waiting on an all-reduce that a peer never joins.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use ncclbind::{Communicator, Error, Group, RedOp, ShrinkMode, Stream};

use crate::checks::Checks;
use crate::collectives::check_sub_communicator;
use crate::gpu::{Fallible, Gpu, StreamState};

/// How long ncclCommAbort, and the kernel it stops, may take before the rank gives up.
const ABORT_LIMIT: Duration = Duration::from_secs(60);
/// The exit status of a rank the watchdog ends.
pub const WATCHDOG_EXIT: i32 = 124;

pub fn check_split(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let half = comm
        .split(Some((me % 2) as i32), me as i32)?
        .ok_or("split by parity gave this rank no communicator")?;
    let same_parity: Vec<usize> = (0..n).filter(|r| r % 2 == me % 2).collect();
    check_sub_communicator(
        gpu,
        stream,
        &half,
        me,
        &same_parity,
        "split by parity",
        checks,
    )?;
    half.destroy()?;

    // Only rank 0 passes a color; the others (NCCL_SPLIT_NOCOLOR) get None.
    let alone = comm.split((me == 0).then_some(0), 0)?;
    checks.expect(alone.is_some() == (me == 0), || {
        format!(
            "split with no color: got a communicator: {}",
            alone.is_some()
        )
    });
    if let Some(alone) = alone {
        check_sub_communicator(
            gpu,
            stream,
            &alone,
            me,
            &[0],
            "split of rank 0 alone",
            checks,
        )?;
        alone.destroy()?;
    }
    Ok(())
}

/// Shrinks away the last rank, which takes no part. The crate's shrink consumes (destroys)
/// its parent, so it shrinks a duplicate of the world communicator.
pub fn check_shrink(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    if n < 2 {
        println!("shrink: not run (one rank, none to exclude)");
        return Ok(());
    }
    let duplicate = comm
        .split(Some(0), me as i32)?
        .ok_or("a duplicate (split with one color) gave no communicator")?;
    let last = n - 1;
    if me == last {
        return Ok(duplicate.destroy()?);
    }
    // Newer than some releases: skipped there (the duplicate is destroyed either way).
    let result = duplicate.shrink(&[last as i32], ShrinkMode::Default);
    let Some(shrunk) = checks.present("ncclCommShrink", result)? else {
        return Ok(());
    };
    let rest: Vec<usize> = (0..last).collect();
    check_sub_communicator(
        gpu,
        stream,
        &shrunk,
        me,
        &rest,
        "shrink without the last rank",
        checks,
    )?;
    shrunk.destroy()?;
    Ok(())
}

/// Rank 0 posts a receive from rank 1 that rank 1 never matches, so its kernel waits on the
/// GPU; then every rank aborts. Abort must return and the kernel must end (a watchdog ends
/// the rank otherwise). On one rank there is no peer: it aborts an idle communicator.
pub fn check_abort(gpu: &Gpu, comm: &Communicator, checks: &mut Checks) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let doomed = comm
        .split(Some(0), me as i32)?
        .ok_or("a duplicate (split with one color) gave no communicator")?;
    let raw_stream = gpu.cuda.create_stream()?;
    // SAFETY: a stream of this rank's device, destroyed below after its work has ended.
    let stream = unsafe { Stream::from_raw(raw_stream.cast()) }?;
    let count = 256;
    let send = gpu.upload_with(count, |i| i as f32)?;
    let mut recv = gpu.poisoned::<f32>(count)?;
    if n > 1 && me < 2 {
        // First use of a peer connects to it on the host, which waits for the peer: connect
        // ranks 0 and 1 (same size, so the same channels) so the unmatched receive only waits
        // on the GPU.
        let peer = (1 - me) as i32;
        let group = Group::start()?;
        doomed.send(&send.slice(), peer, stream)?;
        doomed.recv(&mut recv.slice_mut(), peer, stream)?;
        group.end()?;
        gpu.cuda.synchronize(raw_stream)?;
    }
    if n > 1 && me == 0 {
        doomed.recv(&mut recv.slice_mut(), 1, stream)?;
        thread::sleep(Duration::from_millis(200));
        let state = gpu.stream_state(raw_stream)?;
        checks.expect(state == StreamState::Busy, || {
            format!("the unmatched receive is {state:?} before the abort, expected Busy")
        });
    }

    let watchdog = Watchdog::arm(
        ABORT_LIMIT,
        format!("rank {me}: ncclCommAbort did not return"),
    );
    let start = Instant::now();
    let aborted = doomed.abort();
    let abort_time = start.elapsed();
    drop(watchdog);
    checks.expect(aborted.is_ok(), || {
        format!("abort: {}", aborted.unwrap_err())
    });

    // Poll rather than synchronize, so that a kernel that never ends fails instead of hanging.
    while gpu.stream_state(raw_stream)? == StreamState::Busy {
        if start.elapsed() > ABORT_LIMIT {
            eprintln!("rank {me}: FAIL the pending receive still runs {ABORT_LIMIT:?} after abort");
            std::process::exit(WATCHDOG_EXIT);
        }
        thread::sleep(Duration::from_millis(5));
    }
    if me == 0 {
        let what = if n > 1 {
            "with a pending receive"
        } else {
            "(one rank, nothing pending)"
        };
        println!(
            "abort {what} returned after {:.3} s; the stream was idle after {:.3} s",
            abort_time.as_secs_f64(),
            start.elapsed().as_secs_f64()
        );
    }
    drop((send, recv));
    gpu.cuda.destroy_stream(raw_stream)?;
    Ok(())
}

/// How long rank 0's thread waits on the all-reduce rank 1 never joins before another
/// thread aborts the communicator through its AbortHandle.
const HANG_TIMEOUT: Duration = Duration::from_secs(2);

/// Every rank joins one all-reduce on a duplicate of the world (which connects the ranks, so
/// that what follows waits only on the GPU); then rank 0 starts a second one that rank 1
/// never joins and waits for its stream. A thread holding an AbortHandle aborts the duplicate
/// after HANG_TIMEOUT: the wait must end, later calls on it must be `Error::Aborted`, and its
/// drop must free nothing again. The other ranks keep theirs until rank 0 is done (a barrier
/// on the world), then abort it.
pub fn check_abort_handle(gpu: &Gpu, comm: &Communicator, checks: &mut Checks) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    if n < 2 {
        println!("abort handle: not run (one rank, no peer to miss)");
        return Ok(());
    }
    let doomed = comm
        .split(Some(0), me as i32)?
        .ok_or("a duplicate (split with one color) gave no communicator")?;
    let raw_stream = gpu.cuda.create_stream()?;
    // SAFETY: a stream of this rank's device, destroyed below after its work has ended.
    let stream = unsafe { Stream::from_raw(raw_stream.cast()) }?;
    let count = 256;
    let send = gpu.upload_with(count, |i| i as f32)?;
    let mut recv = gpu.poisoned::<f32>(count)?;
    doomed.all_reduce(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream)?;
    gpu.cuda.synchronize(raw_stream)?;

    if me == 0 {
        let handle = doomed.abort_handle();
        let aborter = thread::spawn(move || {
            thread::sleep(HANG_TIMEOUT);
            handle.abort()
        });
        let watchdog = Watchdog::arm(
            HANG_TIMEOUT + ABORT_LIMIT,
            "rank 0: the AbortHandle did not unblock the all-reduce".into(),
        );
        let start = Instant::now();
        let hung = doomed.all_reduce(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream);
        let waited = gpu.cuda.synchronize(raw_stream);
        let blocked = start.elapsed();
        drop(watchdog);
        let aborted = aborter.join().map_err(|_| "the aborting thread panicked")?;
        checks.expect(hung.is_ok(), || {
            format!("the unmatched all-reduce was not enqueued: {hung:?}")
        });
        checks.expect(aborted.is_ok(), || {
            format!("AbortHandle::abort: {aborted:?}")
        });
        checks.expect(blocked >= HANG_TIMEOUT, || {
            format!("the wait ended after {blocked:?}, before the abort at {HANG_TIMEOUT:?}")
        });
        let after = doomed.all_reduce(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream);
        checks.expect(after == Err(Error::Aborted), || {
            format!("an all-reduce after the abort: {after:?}, expected Err(Aborted)")
        });
        println!(
            "abort handle: the wait on the unmatched all-reduce ended {:.3} s after the abort \
             (stream synchronize: {waited:?})",
            (blocked - HANG_TIMEOUT).as_secs_f64()
        );
    }
    barrier(gpu, comm)?;
    if me == 0 {
        drop(doomed); // frees nothing: the handle's abort did
    } else {
        doomed.abort()?;
    }
    drop((send, recv));
    gpu.cuda.destroy_stream(raw_stream)?;
    Ok(())
}

/// Returns once every rank has called it (an all-reduce of one element on `comm`).
fn barrier(gpu: &Gpu, comm: &Communicator) -> Fallible<()> {
    let raw_stream = gpu.cuda.create_stream()?;
    // SAFETY: a stream of this rank's device, destroyed below after its work has ended.
    let stream = unsafe { Stream::from_raw(raw_stream.cast()) }?;
    let mut one = gpu.upload_with(1, |_| 1.0f32)?;
    comm.all_reduce_in_place(&mut one.slice_mut(), RedOp::SUM, stream)?;
    gpu.cuda.synchronize(raw_stream)?;
    drop(one);
    gpu.cuda.destroy_stream(raw_stream)?;
    Ok(())
}

/// Ends the process with WATCHDOG_EXIT unless dropped within `limit`.
struct Watchdog {
    cancel: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    fn arm(limit: Duration, what: String) -> Watchdog {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            if cancelled.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("{what} within {limit:?}; the watchdog ends this rank");
                std::process::exit(WATCHDOG_EXIT);
            }
        });
        Watchdog {
            cancel: Some(cancel),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.cancel.take()); // disconnects: the thread returns
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
