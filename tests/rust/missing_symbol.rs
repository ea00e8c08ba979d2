//! Calling a function the loaded library lacks: ncclCommGrow, which the IR says first appears
//! in a later header set than the oldest. With an older libnccl the call fails before reaching NCCL and
//! says which function, which version has it, and which library is loaded; with that version
//! or newer it reaches NCCL, which rejects the null communicator.

use ncclbind::sys::nccl::{ncclCommGrow, ncclComm_t};
use ncclbind::{check, library_info, Error, Library, Version};

mod ir;

/// The first NCCL version with the function `name`, as the IR says.
fn since(name: &str) -> Version {
    let api = ir::api();
    let since = ir::str_at(ir::named(&api, "functions", name), "since");
    Version::from_nccl_code(ir::version_code(&api, since))
}

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

    let since = since("ncclCommGrow");
    if info.version < since {
        let Error::SymbolNotFound { function, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*function, "ncclCommGrow");
        assert_eq!(err.name(), "NCCLBIND_ERROR_SYMBOL_NOT_FOUND");
        for expected in [
            "ncclCommGrow",
            &since.to_string(),
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
