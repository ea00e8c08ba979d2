//! NCCL's parameter registry (`ncclbind::params`, `Param`) and the LL all-to-all slot count
//! (`ncclbind::dev_comm`), generated from policy, against the loaded libnccl (Bazel:
//! each header set's): where the IR says the library has a function it works without a GPU,
//! and where it does not the call is `Error::SymbolNotFound` naming the function and its
//! first release, never a zeroed value; bad arguments are rejected before NCCL is called.

use ncclbind::{dev_comm, library_info, params, Error, Library, Version};

mod ir;

fn since(name: &str) -> Version {
    let api = ir::api();
    let since = ir::str_at(ir::named(&api, "functions", name), "since");
    Version::from_nccl_code(ir::version_code(&api, since))
}

fn has(name: &str) -> bool {
    library_info(Library::Nccl).unwrap().version >= since(name)
}

fn assert_missing<T: std::fmt::Debug>(name: &str, result: Result<T, Error>) {
    let err = result.unwrap_err();
    let Error::SymbolNotFound { function, message } = &err else {
        panic!("{name}: {err:?}")
    };
    assert_eq!(*function, name);
    assert!(message.contains(&since(name).to_string()), "{message}");
    let loaded = library_info(Library::Nccl).unwrap().version;
    assert!(message.contains(&loaded.to_string()), "{message}");
}

#[test]
fn the_keys_and_their_values_or_the_first_release() {
    if !has("ncclParamGetAllParameterKeys") {
        assert_missing("ncclParamGetAllParameterKeys", params::keys());
        assert_missing("ncclParamGetParameter", params::get("NCCL_DEBUG"));
        assert_missing("ncclParamBind", params::bind("NCCL_DEBUG"));
        return;
    }
    let keys = params::keys().unwrap();
    assert!(!keys.is_empty());
    for key in &keys {
        assert!(!key.is_empty());
        params::get(key).unwrap_or_else(|err| panic!("{key}: {err}"));
        let bytes = params::bind(key).unwrap().get_bytes(256).unwrap();
        assert!(!bytes.is_empty() && bytes.len() <= 256, "{key}: {bytes:?}");
    }
    // NCCL's refusal reaches the caller as NCCL's error, not as an empty string.
    let err = params::get("NCCLBIND_NO_SUCH_PARAMETER").unwrap_err();
    assert!(
        matches!(
            err,
            Error::Nccl {
                function: "ncclParamGetParameter",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn dump_returns_no_result_code_yet_reports_a_missing_function() {
    if has("ncclParamDumpAll") {
        params::dump().unwrap();
    } else {
        assert_missing("ncclParamDumpAll", params::dump());
    }
}

#[test]
fn the_slot_count_is_a_value_or_the_first_release() {
    if !has("ncclLLA2ACalcSlots") {
        assert_missing("ncclLLA2ACalcSlots", dev_comm::lla2a_calc_slots(1024, 8));
        return;
    }
    let slots: Vec<i32> = [1, 1024, 65536]
        .into_iter()
        .map(|n| dev_comm::lla2a_calc_slots(n, 8).unwrap())
        .collect();
    assert!(
        slots[0] > 0 && slots.windows(2).all(|w| w[0] <= w[1]),
        "{slots:?}"
    );
}

#[test]
fn bad_arguments_are_rejected_before_nccl() {
    for call in [
        params::get("NCCL\0DEBUG").map(drop),
        params::bind("NCCL\0DEBUG").map(drop),
    ] {
        let err = call.unwrap_err();
        assert!(
            matches!(err, Error::NulInString { argument: "key" }),
            "{err:?}"
        );
        assert!(err.is_argument_error() && err.to_string().contains("key"));
    }
    if has("ncclParamBind") {
        let param = params::bind(&params::keys().unwrap()[0]).unwrap();
        let err = param.get_bytes(usize::MAX).unwrap_err();
        assert!(
            matches!(
                err,
                Error::CountOverflow {
                    argument: "max_len",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
