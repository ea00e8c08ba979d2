//! A C++ exception thrown out of NCCL EP's C API (libnccl_ep 0.2.0 throws on host asserts and
//! from its destroy calls after a device fault) is an `Error::Runtime` naming the function, the
//! exception's type and its text: the generated C wrapper catches it (conventions.toml: throws), so
//! it never reaches Rust's frames, where it would abort the process ("Rust cannot catch foreign
//! exceptions"). Over a stand-in libnccl_ep that throws (tests/runtime/throwing_nccl_ep.cc,
//! NCCLBIND_NCCL_EP_PATH) and a libnccl that claims the version NCCL EP needs
//! (NCCLBIND_NCCL_PATH); THROWING_NCCL_EP_VERSION is NCCL EP's version code (the IR's), from BUILD.

use std::ffi::c_int;

use ncclbind::sys::nccl_ep::{self, ncclEpGroup_t, ncclEpHandle_t};
use ncclbind::{check, Error};

fn version() -> c_int {
    let mut version = -1;
    // SAFETY: version is a valid out pointer.
    check("ncclEpGetVersion", unsafe {
        nccl_ep::ncclEpGetVersion(&mut version)
    })
    .expect("ncclEpGetVersion");
    version
}

#[test]
fn a_cpp_exception_from_nccl_ep_is_an_error_and_the_process_goes_on() {
    let expected: c_int = std::env::var("THROWING_NCCL_EP_VERSION")
        .expect("THROWING_NCCL_EP_VERSION (BUILD)")
        .parse()
        .expect("a version code");
    assert_eq!(version(), expected);

    // SAFETY: the stand-in never dereferences the handle: it throws.
    let result = unsafe { nccl_ep::ncclEpGroupDestroy(ncclEpGroup_t(16 as *mut _)) };
    let error = check("ncclEpGroupDestroy", result).expect_err("the stand-in throws");
    assert_eq!(error.name(), "NCCLBIND_ERROR_FOREIGN_EXCEPTION");
    match &error {
        Error::Runtime { message, .. } => assert_eq!(
            message,
            "ncclEpGroupDestroy threw a C++ exception (std::runtime_error): stand-in: CUDA error: \
             an illegal memory access was encountered"
        ),
        other => panic!("not Error::Runtime: {other:?}"),
    }

    // SAFETY: as above.
    let result = unsafe { nccl_ep::ncclEpHandleDestroy(ncclEpHandle_t(32 as *mut _)) };
    match check("ncclEpHandleDestroy", result) {
        Err(Error::Runtime { message, .. }) => {
            assert_eq!(message, "ncclEpHandleDestroy threw a C++ exception (int)")
        }
        other => panic!("not Error::Runtime: {other:?}"),
    }
    assert_eq!(version(), expected);
}
