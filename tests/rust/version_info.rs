//! Version, CUDA build and path of the loaded libraries. With NCCLBIND_TEST_NCCL_VERSION set
//! (e.g. 2.28.9) the loaded libnccl must be that version.

use std::fs;
use std::path::Path;

use ncclbind::{library_info, nccl_version, set_library_path, Error, Library};

#[test]
fn libnccl_reports_its_version_cuda_build_and_path() {
    let info = library_info(Library::Nccl).expect("libnccl loads");
    assert_eq!(
        info.version,
        nccl_version().unwrap(),
        "ncclbind_get_library_info vs ncclGetVersion"
    );
    assert_eq!(
        info.version_code as u32,
        info.version.major * 10000 + info.version.minor * 100 + info.version.patch
    );
    if let Ok(expected) = std::env::var("NCCLBIND_TEST_NCCL_VERSION") {
        assert_eq!(info.version.to_string(), expected);
    }
    assert!(
        info.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("libnccl.so"),
        "{info:?}"
    );
    if let Ok(explicit) = std::env::var("NCCLBIND_NCCL_PATH") {
        assert_eq!(
            fs::canonicalize(&info.path).unwrap(),
            fs::canonicalize(explicit).unwrap()
        );
    }
    let cuda = info
        .cuda
        .expect("NCCL's version banner names its CUDA build");
    assert_eq!(cuda.variant, format!("cu{}", cuda.major));
}

#[test]
fn a_library_that_cannot_load_is_an_error_listing_what_was_tried() {
    let missing = Path::new("/nonexistent/libnccl_ep.so");
    set_library_path(Library::NcclEp, missing).unwrap();
    let err = library_info(Library::NcclEp).unwrap_err();
    let Error::LibraryNotFound { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("/nonexistent/libnccl_ep.so"), "{message}");
    assert_eq!(err.code(), 0x4E42_0001);
    assert_eq!(err.name(), "NCCLBIND_ERROR_LIBRARY_NOT_FOUND");
}

#[test]
fn a_path_set_after_loading_is_refused() {
    library_info(Library::Nccl).unwrap();
    let err = set_library_path(Library::Nccl, Path::new("/elsewhere/libnccl.so.2")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Runtime {
                code: 0x4E42_0004,
                ..
            }
        ),
        "{err:?}"
    );
}
