//! The host calls generated from policy (kind = "call"): an enum argument the headers
//! do not define is rejected before NCCL is called, and with a libnccl older than a call's
//! first release (read from the IR) every call fails before reaching NCCL, naming the
//! function and that release. The communicator is a stand-in NCCL never sees.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use ncclbind::sys::nccl::{ncclCommMemStat_t, ncclComm_t};
use ncclbind::{library_info, Communicator, Error, Library, Version};

mod ir;

fn with_stand_in_communicator(body: impl FnOnce(&Communicator)) {
    let raw = ncclComm_t(NonNull::dangling().as_ptr());
    let comm = ManuallyDrop::new(unsafe { Communicator::from_raw_parts(raw, 0, 2) });
    body(&comm);
}

fn since(name: &str) -> Version {
    let api = ir::api();
    let since = ir::str_at(ir::named(&api, "functions", name), "since");
    Version::from_nccl_code(ir::version_code(&api, since))
}

#[test]
fn an_enum_value_the_headers_do_not_define_is_rejected() {
    with_stand_in_communicator(|comm| {
        let err = comm.mem_stats(ncclCommMemStat_t(99)).unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnknownEnumValue {
                    argument: "stat",
                    type_name: "ncclCommMemStat_t",
                    value: 99
                }
            ),
            "{err:?}"
        );
        assert!(err.is_argument_error());
        assert!(err.to_string().contains("ncclCommMemStat_t"));
    });
}

// spec_calls: every generated call of Communicator with arguments made from its kinds.
include!("../../bindings/rust/src/generated/communicator_calls_exercise.rs");

#[test]
fn a_call_newer_than_the_loaded_library_names_its_first_release() {
    let loaded = library_info(Library::Nccl).unwrap();
    let mut exercised = 0;
    with_stand_in_communicator(|comm| {
        for (method, name, call) in spec_calls(comm, comm.size() + 1) {
            let first = since(name);
            if loaded.version >= first {
                continue; // the loaded library has it: the stand-in communicator must not reach NCCL
            }
            let err = call().unwrap_err();
            let Error::SymbolNotFound { function, message } = &err else {
                panic!("{method} ({name}): {err:?}")
            };
            assert_eq!(*function, name);
            assert!(message.contains(&first.to_string()), "{message}");
            assert!(message.contains(&loaded.version.to_string()), "{message}");
            exercised += 1;
        }
    });
    if exercised == 0 {
        eprintln!(
            "every generated call is in the loaded NCCL {}: none exercised here",
            loaded.version
        );
    }
}

#[test]
fn every_argument_a_call_checks_is_refused_before_nccl_on_any_library() {
    let mut refused = 0;
    with_stand_in_communicator(|comm| {
        for (method, argument, call) in spec_bad_calls(comm, comm.size() + 1) {
            let err = call().unwrap_err();
            assert!(err.is_argument_error(), "{method}({argument}): {err:?}");
            assert!(err.to_string().contains(argument), "{method}: {err}");
            refused += 1;
        }
    });
    assert!(
        refused > 0,
        "no generated call checks an argument of its own"
    );
}
