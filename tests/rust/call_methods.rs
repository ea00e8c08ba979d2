//! The host calls generated from generator/spec (kind = "call"): an enum argument the headers
//! do not define is rejected before NCCL is called, and with a libnccl older than a call's
//! first release (read from the IR) every call fails before reaching NCCL, naming the
//! function and that release. The communicator is a stand-in NCCL never sees.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use ncclbind::sys::nccl::{ncclCommMemStat_t, ncclComm_t};
use ncclbind::{library_info, Communicator, Error, Library, Result, UniqueId, Version};

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

#[test]
fn a_call_newer_than_the_loaded_library_names_its_first_release() {
    let loaded = library_info(Library::Nccl).unwrap();
    with_stand_in_communicator(|comm| {
        let id = UniqueId::from_bytes([0; 128]);
        let calls: [(&str, &dyn Fn() -> Result<()>); 6] = [
            ("ncclCommSuspend", &|| comm.suspend(1)),
            ("ncclCommResume", &|| comm.resume()),
            ("ncclCommGetUniqueId", &|| comm.get_unique_id().map(drop)),
            ("ncclCommMemStats", &|| {
                comm.mem_stats(ncclCommMemStat_t::ncclStatGpuMemTotal)
                    .map(drop)
            }),
            ("ncclCommQueryProperties", &|| {
                comm.query_properties().map(drop)
            }),
            ("ncclCommGrow", &|| {
                comm.grow(3, Some(&id), -1, None)
                    .map(ManuallyDrop::new)
                    .map(drop)
            }),
        ];
        for (name, call) in calls {
            let first = since(name);
            if loaded.version >= first {
                eprintln!("SKIPPED {name}: the loaded NCCL {} has it", loaded.version);
                continue;
            }
            let err = call().unwrap_err();
            let Error::SymbolNotFound { function, message } = &err else {
                panic!("{name}: {err:?}")
            };
            assert_eq!(*function, name);
            assert!(message.contains(&first.to_string()), "{message}");
            assert!(message.contains(&loaded.version.to_string()), "{message}");
        }
    });
}
