//! Aborting a communicator from another thread (`AbortHandle`) and the timeout of a
//! non-blocking init, over the stand-in libnccl (tests/python/fake_nccl.c, which counts the
//! ncclCommDestroy / ncclCommAbort calls each communicator gets and never frees one).
//! Bazel passes the built stand-in in NCCLBIND_FAKE_NCCL; under cargo it is built here with
//! the C compiler.

use std::ffi::{c_char, c_int, c_void, CString};
use std::mem::transmute;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::Duration;

use ncclbind::sys::nccl::ncclComm_t;
use ncclbind::{
    library_info, set_library_path, AbortHandle, CommConfig, Communicator, DeviceSlice,
    DeviceSliceMut, Error, Library, RedOp, ShrinkMode, Stream, UniqueId,
};

/// The handle is for other threads: it must be Send, Sync and Clone (checked at compile time).
const _: fn() = || {
    fn for_any_thread<T: Send + Sync + Clone>() {}
    for_any_thread::<AbortHandle>();
};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type HangNextAllReduce = unsafe extern "C" fn();
type NextInitInProgress = unsafe extern "C" fn(c_int);
type CommCalls = unsafe extern "C" fn(ncclComm_t, *mut c_int, *mut c_int);
type LastComm = unsafe extern "C" fn() -> ncclComm_t;

/// The stand-in's test controls (see fake_nccl.c).
struct StandIn {
    hang_next_all_reduce: HangNextAllReduce,
    next_init_in_progress: NextInitInProgress,
    comm_calls: CommCalls,
    last_comm: LastComm,
}

/// The stand-in as this process's libnccl, and the lock that serializes the tests (its test
/// controls are process-wide).
fn stand_in() -> (&'static StandIn, MutexGuard<'static, ()>) {
    static STAND_IN: OnceLock<StandIn> = OnceLock::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    let stand_in = STAND_IN.get_or_init(|| {
        let path = std::env::var_os("NCCLBIND_FAKE_NCCL")
            .map(PathBuf::from)
            .unwrap_or_else(build_stand_in);
        set_library_path(Library::Nccl, &path).unwrap();
        let loaded = library_info(Library::Nccl).unwrap().path;
        assert_eq!(loaded.canonicalize().unwrap(), path.canonicalize().unwrap());
        let path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; this opens the copy the runtime already loaded.
        let library = unsafe { dlopen(path.as_ptr(), RTLD_NOW) };
        assert!(!library.is_null());
        let symbol = |name: &std::ffi::CStr| {
            // SAFETY: `library` is open; `name` is NUL-terminated.
            let address = unsafe { dlsym(library, name.as_ptr()) };
            assert!(!address.is_null(), "the stand-in lacks {name:?}");
            address
        };
        // SAFETY: each symbol is the fake_nccl.c function of this signature.
        unsafe {
            StandIn {
                hang_next_all_reduce: transmute::<*mut c_void, HangNextAllReduce>(symbol(
                    c"fakeHangNextAllReduce",
                )),
                next_init_in_progress: transmute::<*mut c_void, NextInitInProgress>(symbol(
                    c"fakeNextInitInProgress",
                )),
                comm_calls: transmute::<*mut c_void, CommCalls>(symbol(c"fakeCommCalls")),
                last_comm: transmute::<*mut c_void, LastComm>(symbol(c"fakeLastComm")),
            }
        }
    });
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    (stand_in, serial)
}

/// Under cargo: fake_nccl.c compiled into the target's scratch directory.
fn build_stand_in() -> PathBuf {
    let (Some(manifest), Some(scratch)) = (
        option_env!("CARGO_MANIFEST_DIR"),
        option_env!("CARGO_TARGET_TMPDIR"),
    ) else {
        panic!("set NCCLBIND_FAKE_NCCL to the built stand-in (//tests/python:libnccl_fake.so)");
    };
    let source = Path::new(manifest).join("../../tests/python/fake_nccl.c");
    let out = Path::new(scratch).join("abort_stand_in/libnccl.so.2");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = std::process::Command::new(compiler)
        .args(["-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .expect("a C compiler (cc, or $CC) to build the stand-in libnccl");
    assert!(status.success());
    out
}

impl StandIn {
    /// (ncclCommDestroy calls, ncclCommAbort calls) that `comm` got.
    fn calls(&self, comm: ncclComm_t) -> (i32, i32) {
        let (mut destroys, mut aborts) = (0, 0);
        // SAFETY: the stand-in never frees a communicator it made.
        unsafe { (self.comm_calls)(comm, &mut destroys, &mut aborts) };
        (destroys, aborts)
    }
}

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

    unsafe { (stand_in.hang_next_all_reduce)() };
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
        stand_in.calls(raw),
        (0, 1),
        "(destroys, aborts) after the drop"
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
    assert_eq!(stand_in.calls(raw), (1, 0));

    let comm = one_rank();
    let handle = comm.abort_handle();
    let raw = comm.into_raw(); // given up: the crate no longer knows whether it lives
    assert_eq!(handle.clone().abort(), Err(Error::CommunicatorGone));
    assert_eq!(stand_in.calls(raw), (0, 0));

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
        assert_eq!(stand_in.calls(raw), (0, 1), "{name}: (destroys, aborts)");
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
        let (destroys, aborts) = stand_in.calls(raw);
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
    unsafe { (stand_in.next_init_in_progress)(-1) }; // never ready
    let err = Communicator::init_rank_config(1, &id, 0, &non_blocking(Some(timeout))).unwrap_err();
    let Error::Timeout { function, waited } = err else {
        panic!("not a timeout: {err:?}")
    };
    assert_eq!(function, "ncclCommInitRankConfig");
    assert!(
        waited >= timeout && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let half_made = unsafe { (stand_in.last_comm)() };
    assert_eq!(stand_in.calls(half_made), (0, 1), "(destroys, aborts)");

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
        unsafe { (stand_in.next_init_in_progress)(3) }; // ready at the fourth poll
        let comm = Communicator::init_rank_config(1, &id, 0, &non_blocking(timeout)).unwrap();
        assert_eq!(comm.count().unwrap(), 1);
        comm.destroy().unwrap();
    }
}
