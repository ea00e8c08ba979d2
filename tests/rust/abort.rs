//! Aborting a communicator from another thread (`AbortHandle`) and the timeout of a
//! non-blocking init, over the stand-in libnccl (tests/python/fake_nccl.c, which counts the
//! ncclCommDestroy / ncclCommAbort calls each communicator gets and never frees one).
//! Bazel passes the built stand-in in NCCLBIND_FAKE_NCCL; under cargo it is built here with
//! the C compiler.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use ncclbind::{
    AbortHandle, CommConfig, Communicator, DeviceSlice, DeviceSliceMut, Error, RedOp, ShrinkMode,
    Stream, UniqueId,
};

/// The handle is for other threads: it must be Send, Sync and Clone (checked at compile time).
const _: fn() = || {
    fn for_any_thread<T: Send + Sync + Clone>() {}
    for_any_thread::<AbortHandle>();
};

mod stand_in;
use stand_in::stand_in;

fn one_rank() -> Communicator {
    Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap()
}

#[test]
fn a_handle_unblocks_a_hung_all_reduce_from_another_thread() {
    let (stand_in, _serial) = stand_in();
    let comm = one_rank();
    let raw = comm.as_raw();
    let handle = comm.abort_handle();
    let (send, mut recv) = ([1.0f32, 2.0], [0.0f32; 2]);
    // SAFETY: the stand-in reads and writes host memory as its "device" memory.
    let send = unsafe { DeviceSlice::from_raw_parts(send.as_ptr(), 2) }.unwrap();
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(recv.as_mut_ptr(), 2) }.unwrap();

    stand_in.hang_next_all_reduce();
    let watchdog = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        handle.abort()
    });
    let hung = comm.all_reduce(&send, &mut recv, RedOp::SUM, Stream::PER_THREAD_DEFAULT);
    watchdog.join().unwrap().unwrap();

    // The call under way when the abort came returns NCCL's error...
    let Err(Error::Nccl { function, .. }) = hung else {
        panic!("the hung all-reduce returned {hung:?}")
    };
    assert_eq!(function, "ncclAllReduce");
    // ...later calls never reach NCCL with the freed communicator.
    let after = comm.all_reduce(&send, &mut recv, RedOp::SUM, Stream::PER_THREAD_DEFAULT);
    assert_eq!(after, Err(Error::Aborted));
    assert_eq!(comm.count(), Err(Error::Aborted));
    assert_eq!(comm.split(Some(0), 0).err(), Some(Error::Aborted));
    assert!(comm.as_raw().is_null());
    assert!(comm.abort_handle().is_aborted());

    drop(comm);
    assert_eq!(
        stand_in.comm_calls(raw),
        (0, 1),
        "(destroys, aborts) after the drop"
    );
}

#[test]
fn a_handle_lets_the_owners_call_under_way_return_before_it_frees_the_communicator() {
    let (stand_in, _serial) = stand_in();
    let before = stand_in.used_after_free();
    stand_in.set_call_delay(200_000); // each call stays 200 ms inside the stand-in
    let (send, mut recv) = ([1.0f32, 2.0], [0.0f32; 2]);
    // SAFETY: the stand-in reads and writes host memory as its "device" memory.
    let send = unsafe { DeviceSlice::from_raw_parts(send.as_ptr(), 2) }.unwrap();
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(recv.as_mut_ptr(), 2) }.unwrap();
    let mut under_way = 0;
    for _ in 0..5 {
        let comm = one_rank();
        let handle = comm.abort_handle();
        let aborter = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50)); // the owner's call is inside by then
            handle.abort()
        });
        let during = comm.all_reduce(&send, &mut recv, RedOp::SUM, Stream::PER_THREAD_DEFAULT);
        aborter.join().unwrap().unwrap();
        // Never freed under the call: it completed (the abort waited for it; past the grace,
        // the stand-in's revoke does not stop a slow call), or the abort came first.
        assert_eq!(stand_in.used_after_free(), before, "{during:?}");
        match during {
            Ok(()) => under_way += 1,
            Err(Error::Aborted) => {}
            other => panic!("the call under the abort returned {other:?}"),
        }
        assert_eq!(
            comm.all_reduce(&send, &mut recv, RedOp::SUM, Stream::PER_THREAD_DEFAULT),
            Err(Error::Aborted)
        );
        if under_way > 0 {
            break;
        }
    }
    stand_in.set_call_delay(0);
    assert!(
        under_way > 0,
        "the call was never under way when the abort came"
    );
}

#[test]
fn abort_after_the_owner_destroyed_the_communicator_is_communicator_gone() {
    let (stand_in, _serial) = stand_in();
    let comm = one_rank();
    let raw = comm.as_raw();
    let handle = comm.abort_handle();
    assert!(!handle.is_aborted());
    drop(comm);
    assert_eq!(handle.abort(), Err(Error::CommunicatorGone));
    assert_eq!(stand_in.comm_calls(raw), (1, 0));

    let comm = one_rank();
    let handle = comm.abort_handle();
    let raw = comm.into_raw(); // given up: the crate no longer knows whether it lives
    assert_eq!(handle.clone().abort(), Err(Error::CommunicatorGone));
    assert_eq!(stand_in.comm_calls(raw), (0, 0));

    let err = Error::CommunicatorGone;
    assert!(!err.is_argument_error());
    assert!(err.to_string().contains("gone"), "{err}");
}

#[test]
fn after_a_handle_aborted_it_the_owner_frees_nothing_again() {
    let (stand_in, _serial) = stand_in();
    type Consume = fn(Communicator) -> ncclbind::Result<()>;
    let ends: [(&str, Consume, ncclbind::Result<()>); 5] = [
        ("destroy", Communicator::destroy, Ok(())),
        ("abort", Communicator::abort, Ok(())),
        ("finalize", Communicator::finalize, Err(Error::Aborted)),
        (
            "shrink",
            |comm| comm.shrink(&[], ShrinkMode::Default).map(drop),
            Err(Error::Aborted),
        ),
        (
            "into_raw",
            |comm| {
                assert!(comm.into_raw().is_null());
                Ok(())
            },
            Ok(()),
        ),
    ];
    for (name, end, expected) in ends {
        let comm = one_rank();
        let raw = comm.as_raw();
        let handle = comm.abort_handle();
        handle.abort().unwrap();
        handle.abort().unwrap(); // a second abort is a no-op
        assert_eq!(end(comm), expected, "{name}");
        assert_eq!(
            stand_in.comm_calls(raw),
            (0, 1),
            "{name}: (destroys, aborts)"
        );
    }
    let err = Error::Aborted;
    assert!(!err.is_argument_error());
    assert!(err.to_string().contains("AbortHandle"), "{err}");
}

#[test]
fn handles_racing_the_owners_drop_free_the_communicator_exactly_once() {
    let (stand_in, _serial) = stand_in();
    for _ in 0..100 {
        let comm = one_rank();
        let raw = comm.as_raw();
        let start = Arc::new(Barrier::new(4));
        let racers: Vec<_> = (0..3)
            .map(|_| {
                let (handle, start) = (comm.abort_handle(), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    handle.abort()
                })
            })
            .collect();
        start.wait();
        drop(comm);
        for racer in racers {
            let result = racer.join().unwrap();
            assert!(
                matches!(result, Ok(()) | Err(Error::CommunicatorGone)),
                "{result:?}"
            );
        }
        let (destroys, aborts) = stand_in.comm_calls(raw);
        assert_eq!(destroys + aborts, 1, "destroys {destroys}, aborts {aborts}");
    }
}

fn non_blocking(timeout: Option<Duration>) -> CommConfig {
    let mut config = CommConfig::default();
    config.blocking = Some(false);
    config.init_timeout = timeout;
    config
}

#[test]
fn a_non_blocking_init_past_its_timeout_is_aborted_and_a_timeout_error() {
    let (stand_in, _serial) = stand_in();
    let id = UniqueId::new().unwrap();
    let timeout = Duration::from_millis(50);
    stand_in.next_init_in_progress(-1); // never ready
    let err = Communicator::init_rank_config(1, &id, 0, &non_blocking(Some(timeout))).unwrap_err();
    let Error::Timeout { function, waited } = err else {
        panic!("not a timeout: {err:?}")
    };
    assert_eq!(function, "ncclCommInitRankConfig");
    assert!(
        waited >= timeout && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let half_made = stand_in.last_comm();
    assert_eq!(stand_in.comm_calls(half_made), (0, 1), "(destroys, aborts)");

    let text = err.to_string();
    assert!(
        text.contains("ncclCommInitRankConfig") && text.contains(&format!("{waited:?}")),
        "{text}"
    );
    assert!(!err.is_argument_error());
}

#[test]
fn a_non_blocking_init_ready_in_time_is_a_communicator() {
    let (stand_in, _serial) = stand_in();
    let id = UniqueId::new().unwrap();
    for timeout in [Some(Duration::from_secs(5)), None] {
        stand_in.next_init_in_progress(3); // ready at the fourth poll
        let comm = Communicator::init_rank_config(1, &id, 0, &non_blocking(timeout)).unwrap();
        assert_eq!(comm.count().unwrap(), 1);
        comm.destroy().unwrap();
    }
}
