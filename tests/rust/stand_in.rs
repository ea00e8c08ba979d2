//! The stand-in libnccl of the Python tests (tests/python/fake_nccl.c) as this process's
//! libnccl, and its log of grouped calls ("send ptr count type peer", "recv ...", "reduce
//! send recv count type op root", "group_start", "group_end"). It runs one-rank collectives
//! on host memory, which the tests pass as "device" memory; communicators of more ranks only
//! check arguments and log. Bazel passes the built stand-in in NCCLBIND_FAKE_NCCL; under cargo
//! it is built here with the C compiler.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::transmute;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ncclbind::sys::nccl::ncclComm_t;
use ncclbind::{library_info, set_library_path, Library};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

/// The lookup of a stand-in's test hooks (fakeCallLog ...) in the copy of `path` the runtime
/// already loaded; a missing hook fails the test, naming it.
pub fn hooks(path: &Path) -> impl Fn(&CStr) -> *mut c_void {
    let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; this opens the copy the runtime already loaded.
    let library = unsafe { dlopen(c_path.as_ptr(), RTLD_NOW) };
    assert!(!library.is_null(), "dlopen({}) failed", path.display());
    move |name: &CStr| {
        // SAFETY: `library` is open; `name` is NUL-terminated.
        let address = unsafe { dlsym(library, name.as_ptr()) };
        assert!(!address.is_null(), "the stand-in lacks {name:?}");
        address
    }
}

type CallLog = unsafe extern "C" fn() -> *const c_char;
type ClearCallLog = unsafe extern "C" fn();
type HangNextAllReduce = unsafe extern "C" fn();
type NextInitInProgress = unsafe extern "C" fn(c_int);
type CommCalls = unsafe extern "C" fn(ncclComm_t, *mut c_int, *mut c_int);
type LastComm = unsafe extern "C" fn() -> ncclComm_t;
type SetCallDelay = unsafe extern "C" fn(c_int);
type UsedAfterFree = unsafe extern "C" fn() -> c_int;

/// The stand-in's call log and test controls (see fake_nccl.c).
pub struct StandIn {
    call_log: CallLog,
    clear_call_log: ClearCallLog,
    hang_next_all_reduce: HangNextAllReduce,
    next_init_in_progress: NextInitInProgress,
    comm_calls: CommCalls,
    last_comm: LastComm,
    set_call_delay: SetCallDelay,
    used_after_free: UsedAfterFree,
}

/// The stand-in as this process's libnccl, its call log cleared, and the lock that serializes
/// the tests (the log is process-wide).
pub fn stand_in() -> (&'static StandIn, MutexGuard<'static, ()>) {
    static STAND_IN: OnceLock<StandIn> = OnceLock::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    let stand_in = STAND_IN.get_or_init(|| {
        let path = std::env::var_os("NCCLBIND_FAKE_NCCL")
            .map(PathBuf::from)
            .unwrap_or_else(build_stand_in);
        set_library_path(Library::Nccl, &path).unwrap();
        let loaded = library_info(Library::Nccl).unwrap().path;
        assert_eq!(loaded.canonicalize().unwrap(), path.canonicalize().unwrap());
        let symbol = hooks(&path);
        // SAFETY: each symbol is the fake_nccl.c function of this signature.
        unsafe {
            StandIn {
                call_log: transmute::<*mut c_void, CallLog>(symbol(c"fakeCallLog")),
                clear_call_log: transmute::<*mut c_void, ClearCallLog>(symbol(c"fakeClearCallLog")),
                hang_next_all_reduce: transmute::<*mut c_void, HangNextAllReduce>(symbol(
                    c"fakeHangNextAllReduce",
                )),
                next_init_in_progress: transmute::<*mut c_void, NextInitInProgress>(symbol(
                    c"fakeNextInitInProgress",
                )),
                comm_calls: transmute::<*mut c_void, CommCalls>(symbol(c"fakeCommCalls")),
                last_comm: transmute::<*mut c_void, LastComm>(symbol(c"fakeLastComm")),
                set_call_delay: transmute::<*mut c_void, SetCallDelay>(symbol(c"fakeSetCallDelay")),
                used_after_free: transmute::<*mut c_void, UsedAfterFree>(symbol(
                    c"fakeUsedAfterFree",
                )),
            }
        }
    });
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    stand_in.clear();
    (stand_in, serial)
}

impl StandIn {
    pub fn clear(&self) {
        // SAFETY: no arguments; the tests hold the lock that serializes them.
        unsafe { (self.clear_call_log)() }
    }

    // Each test binary includes this module and uses some of its controls: the rest would
    // be dead code there.
    /// The next ncclAllReduce blocks until its communicator is aborted.
    #[allow(dead_code)]
    pub fn hang_next_all_reduce(&self) {
        // SAFETY: no arguments; the tests hold the lock that serializes them.
        unsafe { (self.hang_next_all_reduce)() }
    }

    /// The next non-blocking init reports ncclInProgress for `polls` polls (-1: for ever).
    #[allow(dead_code)]
    pub fn next_init_in_progress(&self, polls: i32) {
        // SAFETY: a plain int; the tests hold the lock that serializes them.
        unsafe { (self.next_init_in_progress)(polls) }
    }

    /// (ncclCommDestroy calls, ncclCommAbort calls) that `comm` got.
    #[allow(dead_code)]
    pub fn comm_calls(&self, comm: ncclComm_t) -> (i32, i32) {
        let (mut destroys, mut aborts) = (0, 0);
        // SAFETY: the stand-in never frees a communicator it made; both out-pointers are valid.
        unsafe { (self.comm_calls)(comm, &mut destroys, &mut aborts) };
        (destroys, aborts)
    }

    /// Every call that checks a communicator stays inside the stand-in this long (0: none).
    #[allow(dead_code)]
    pub fn set_call_delay(&self, microseconds: i32) {
        // SAFETY: an int argument.
        unsafe { (self.set_call_delay)(microseconds) }
    }

    /// How many calls were given a freed communicator, plus how many frees (destroy or
    /// abort) came while a call was inside the same communicator.
    #[allow(dead_code)]
    pub fn used_after_free(&self) -> i32 {
        // SAFETY: no arguments.
        unsafe { (self.used_after_free)() }
    }

    /// The communicator the stand-in made last.
    #[allow(dead_code)]
    pub fn last_comm(&self) -> ncclComm_t {
        // SAFETY: no arguments.
        unsafe { (self.last_comm)() }
    }

    /// The calls logged since the last clear, one line each, and clears the log.
    #[allow(dead_code)]
    pub fn take_calls(&self) -> Vec<String> {
        // SAFETY: the stand-in's log is NUL-terminated text that lives until the next call.
        let text = unsafe { CStr::from_ptr((self.call_log)()) }
            .to_string_lossy()
            .into_owned();
        self.clear();
        text.lines().map(str::to_owned).collect()
    }
}

#[allow(dead_code)]
/// A pointer as the stand-in logs it (C's %p: "0x..." in lowercase hex, "(nil)" for null).
pub fn logged<T>(ptr: *const T) -> String {
    if ptr.is_null() {
        "(nil)".to_owned()
    } else {
        format!("{ptr:p}")
    }
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
    let crate_name = option_env!("CARGO_CRATE_NAME").unwrap_or("test");
    let out = Path::new(scratch).join(format!("{crate_name}_stand_in/libnccl.so.2"));
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
