//! Calling a function the loaded library lacks: ncclCommGrow first appears in NCCL 2.32.3.
//! With an older libnccl (2.28.9) the call fails before reaching NCCL and says which
//! function, which version has it, and which library is loaded; with 2.32.3 or newer it
//! reaches NCCL, which rejects the null communicator.

use ncclbind::sys::nccl::{ncclCommGrow, ncclComm_t};
use ncclbind::{check, library_info, Error, Library, Version};

#[test]
fn a_function_newer_than_the_loaded_library_is_an_error_naming_both_versions() {
    let info = library_info(Library::Nccl).unwrap();
    let mut grown = ncclComm_t::NULL;
    let result = check("ncclCommGrow", unsafe {
        ncclCommGrow(
            ncclComm_t::NULL,
            2,
            std::ptr::null(),
            -1,
            &mut grown,
            std::ptr::null_mut(),
        )
    });
    let err = result.expect_err("ncclCommGrow on a null communicator cannot succeed");

    if info.version
        < (Version {
            major: 2,
            minor: 32,
            patch: 3,
        })
    {
        let Error::SymbolNotFound { function, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*function, "ncclCommGrow");
        assert_eq!(err.name(), "NCCLBIND_ERROR_SYMBOL_NOT_FOUND");
        for expected in [
            "ncclCommGrow",
            "2.32.3",
            &info.version.to_string(),
            &info.path.to_string_lossy(),
        ] {
            assert!(
                message.contains(expected),
                "{expected:?} missing from: {message}"
            );
        }
    } else {
        assert!(
            matches!(
                err,
                Error::Nccl {
                    function: "ncclCommGrow",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
