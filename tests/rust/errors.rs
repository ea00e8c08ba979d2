//! Errors from real NCCL result codes, through the library the runtime loads
//! (NCCLBIND_NCCL_PATH, else $CUDA_HOME's).

use std::ffi::CStr;

use ncclbind::sys::nccl::{ncclGetErrorString, ncclGetUniqueId, ncclResult_t};
use ncclbind::{check, nccl_version, Error};

#[test]
fn a_failing_nccl_call_reports_code_name_and_nccls_own_text() {
    // NCCL itself rejects the null out-pointer.
    let err = check("ncclGetUniqueId", unsafe {
        ncclGetUniqueId(std::ptr::null_mut())
    })
    .unwrap_err();

    assert_eq!(err.code(), ncclResult_t::ncclInvalidArgument.0 as i32);
    assert_eq!(err.name(), "ncclInvalidArgument");
    assert!(
        !err.nccl_last_error().is_empty(),
        "ncclGetLastError gave no text: {err:?}"
    );
    let Error::Nccl {
        function,
        description,
        ..
    } = &err
    else {
        panic!("not an NCCL error: {err:?}")
    };
    assert_eq!(*function, "ncclGetUniqueId");
    assert!(!description.is_empty());
    let text = err.to_string();
    assert!(
        text.starts_with("ncclGetUniqueId failed with ncclInvalidArgument (4): "),
        "{text}"
    );
    assert!(text.contains(err.nccl_last_error()), "{text}");
}

#[test]
fn each_nccl_code_is_named_and_described_by_the_loaded_library() {
    nccl_version().expect("libnccl loads");
    let names = [
        "ncclUnhandledCudaError",
        "ncclSystemError",
        "ncclInternalError",
        "ncclInvalidArgument",
        "ncclInvalidUsage",
        "ncclRemoteError",
        "ncclInProgress",
    ];
    for (code, name) in (1..).zip(names) {
        let err = check("test", ncclResult_t(code)).unwrap_err();
        assert_eq!(err.name(), name);
        let from_nccl = unsafe { CStr::from_ptr(ncclGetErrorString(ncclResult_t(code))) };
        let Error::Nccl { description, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            description.as_str(),
            from_nccl.to_str().unwrap(),
            "code {code}"
        );
    }
}

#[test]
fn an_unknown_code_is_an_error_with_its_number() {
    let err = check("test", ncclResult_t(1234)).unwrap_err();
    assert_eq!(err.code(), 1234);
    assert_eq!(err.name(), "unknown result code 1234");
}

#[test]
fn success_is_ok_and_errors_box_as_std_errors() {
    assert_eq!(check("test", ncclResult_t::ncclSuccess), Ok(()));
    let boxed: Box<dyn std::error::Error + Send + Sync> =
        check("test", ncclResult_t(5)).unwrap_err().into();
    assert!(boxed.to_string().contains("ncclInvalidUsage"));
}
