//! The stand-in libnccl_ep (tests/python/fake_nccl_ep.c, NCCLBIND_FAKE_NCCL_EP; built here with
//! the C compiler under cargo) as this process's libnccl_ep, over the stand-in libnccl
//! (stand_in.rs), and its log of NCCL EP calls: `mod stand_in; mod ep_stand_in;` in a test crate.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::transmute;
use std::path::PathBuf;
use std::sync::OnceLock;

use ncclbind::{library_info, set_library_path, Library};

use crate::stand_in;

type CallLog = unsafe extern "C" fn() -> *const c_char;
type ClearCallLog = unsafe extern "C" fn();
pub type UsedAfterFree = unsafe extern "C" fn() -> c_int;

/// The stand-in's call log, and its count of uses of freed groups and handles.
pub struct FakeEp {
    call_log: CallLog,
    clear: ClearCallLog,
    pub used_after_free: UsedAfterFree,
}

impl FakeEp {
    /// The NCCL EP calls since the last take ("create_group ...", "dispatch ..."), and a clear log.
    /// `result` is Ok and NCCL EP's call `call` ("dispatch", ...) was made (the log is taken).
    pub fn assert_reached<E: std::fmt::Debug>(&self, result: Result<(), E>, call: &str) {
        result.unwrap();
        let calls = self.take_calls();
        assert!(calls.iter().any(|c| c.starts_with(call)), "{calls:?}");
    }

    pub fn take_calls(&self) -> Vec<String> {
        // SAFETY: the stand-in's log is NUL-terminated text.
        let text = unsafe { CStr::from_ptr((self.call_log)()) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: no arguments.
        unsafe { (self.clear)() };
        text.lines().map(str::to_owned).collect()
    }
}

fn build_fake_ep() -> PathBuf {
    let (Some(manifest), Some(scratch)) = (
        option_env!("CARGO_MANIFEST_DIR"),
        option_env!("CARGO_TARGET_TMPDIR"),
    ) else {
        panic!(
            "set NCCLBIND_FAKE_NCCL_EP to the built stand-in (//tests/python:libnccl_ep_fake.so)"
        );
    };
    let root = PathBuf::from(manifest).join("../..");
    let out = PathBuf::from(scratch).join("ep_stand_in/libnccl_ep.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args([
            "-shared",
            "-fPIC",
            "-O1",
            "-fvisibility=hidden",
            "-std=c11",
            "-o",
        ])
        .arg(&out)
        .arg("-I")
        .arg(root.join("bindings/c/include"))
        .arg("-I")
        .arg(root.join("runtime/include"))
        .arg(root.join("tests/python/fake_nccl_ep.c"))
        .status()
        .expect("a C compiler (cc, or $CC) to build the stand-in libnccl_ep");
    assert!(status.success());
    out
}

/// Both stand-ins loaded (once per process) and the EP log cleared; the lock serializes tests.
pub fn setup() -> (&'static FakeEp, std::sync::MutexGuard<'static, ()>) {
    static FAKE: OnceLock<FakeEp> = OnceLock::new();
    let (_, serial) = stand_in::stand_in();
    let fake = FAKE.get_or_init(|| {
        let path = std::env::var_os("NCCLBIND_FAKE_NCCL_EP")
            .map(PathBuf::from)
            .unwrap_or_else(build_fake_ep);
        set_library_path(Library::NcclEp, &path).unwrap();
        let info = library_info(Library::NcclEp).expect("the stand-in libnccl_ep loads");
        assert_eq!(
            info.path.canonicalize().unwrap(),
            path.canonicalize().unwrap()
        );
        let symbol = stand_in::hooks(&path);
        // SAFETY: each symbol is the fake_nccl_ep.c function of this signature.
        unsafe {
            FakeEp {
                call_log: transmute::<*mut c_void, CallLog>(symbol(c"fakeEpCallLog")),
                clear: transmute::<*mut c_void, ClearCallLog>(symbol(c"fakeEpClearCallLog")),
                used_after_free: transmute::<*mut c_void, UsedAfterFree>(symbol(
                    c"fakeEpUsedAfterFree",
                )),
            }
        }
    });
    fake.take_calls();
    (fake, serial)
}
