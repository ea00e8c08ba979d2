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

use ncclbind::{library_info, set_library_path, Library};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;

type CallLog = unsafe extern "C" fn() -> *const c_char;
type ClearCallLog = unsafe extern "C" fn();

/// The stand-in's call log (see fake_nccl.c).
pub struct StandIn {
    call_log: CallLog,
    clear_call_log: ClearCallLog,
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
        let path = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; this opens the copy the runtime already loaded.
        let library = unsafe { dlopen(path.as_ptr(), RTLD_NOW) };
        assert!(!library.is_null());
        let symbol = |name: &CStr| {
            // SAFETY: `library` is open; `name` is NUL-terminated.
            let address = unsafe { dlsym(library, name.as_ptr()) };
            assert!(!address.is_null(), "the stand-in lacks {name:?}");
            address
        };
        // SAFETY: each symbol is the fake_nccl.c function of this signature.
        unsafe {
            StandIn {
                call_log: transmute::<*mut c_void, CallLog>(symbol(c"fakeCallLog")),
                clear_call_log: transmute::<*mut c_void, ClearCallLog>(symbol(c"fakeClearCallLog")),
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

    /// The calls logged since the last clear, one line each, and clears the log.
    pub fn take_calls(&self) -> Vec<String> {
        // SAFETY: the stand-in's log is NUL-terminated text that lives until the next call.
        let text = unsafe { CStr::from_ptr((self.call_log)()) }
            .to_string_lossy()
            .into_owned();
        self.clear();
        text.lines().map(str::to_owned).collect()
    }
}

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
