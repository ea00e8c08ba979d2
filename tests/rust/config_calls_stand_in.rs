//! The per-call config collectives over the stand-in libnccl (tests/python/fake_nccl.c),
//! which claims 2.28.9 and has none of the `*Config` functions: each `<collective>_config`
//! method makes the plain method's checks first, then is `Error::SymbolNotFound` naming its
//! function and the first release that has it (read from the IR), with nothing enqueued.
//! And after an `AbortHandle` abort, window and registration calls never reach NCCL.

use ncclbind::{
    CollConfig, Communicator, DeviceSlice, DeviceSliceMut, Error, RedOp, Stream, UniqueId,
    WindowFlags,
};

mod ir;
#[allow(dead_code)] // its pointer formatting is for call-log tests
mod stand_in;

use stand_in::stand_in;

/// The first release of `function`, as the IR names it ("2.31.2").
fn since(function: &str) -> String {
    let api = ir::api();
    ir::str_at(ir::named(&api, "functions", function), "since").to_owned()
}

fn one_rank() -> Communicator {
    Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap()
}

fn assert_missing(result: ncclbind::Result<()>, function: &'static str) {
    let err = result.expect_err(function);
    let Error::SymbolNotFound {
        function: reported,
        message,
    } = &err
    else {
        panic!("{function}: {err:?}")
    };
    assert_eq!(*reported, function);
    for expected in [function.to_owned(), since(function), "2.28.9".to_owned()] {
        assert!(
            message.contains(&expected),
            "{expected:?} missing from: {message}"
        );
    }
}

#[test]
fn every_config_collective_is_missing_on_the_stand_in_naming_its_first_release() {
    let (calls, _serial) = stand_in();
    let comm = one_rank();
    let stream = Stream::LEGACY_DEFAULT;
    let mut config = CollConfig::default();
    config.min_ctas = Some(1);
    config.alg_selection = Some(c"ring".into());
    let host = [1.0f32, 2.0];
    let mut out = [0.0f32; 2];
    // SAFETY: the stand-in reads and writes host memory, and these calls never reach it.
    let send = unsafe { DeviceSlice::from_raw_parts(host.as_ptr(), 2) }.unwrap();
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(out.as_mut_ptr(), 2) }.unwrap();
    let op = RedOp::SUM;

    assert_missing(
        comm.all_reduce_config(&send, &mut recv, op, stream, &config),
        "ncclAllReduceConfig",
    );
    assert_missing(
        comm.all_reduce_in_place_config(&mut recv, op, stream, &config),
        "ncclAllReduceConfig",
    );
    assert_missing(
        comm.reduce_config(&send, Some(&mut recv), op, 0, stream, &config),
        "ncclReduceConfig",
    );
    assert_missing(
        comm.broadcast_config(Some(&send), &mut recv, 0, stream, &config),
        "ncclBroadcastConfig",
    );
    assert_missing(
        comm.all_gather_config(&send, &mut recv, stream, &config),
        "ncclAllGatherConfig",
    );
    assert_missing(
        comm.reduce_scatter_config(&send, &mut recv, op, stream, &config),
        "ncclReduceScatterConfig",
    );
    assert_missing(
        comm.all_to_all_config(&send, &mut recv, stream, &config),
        "ncclAlltoAllConfig",
    );
    assert_missing(
        comm.gather_config(&send, Some(&mut recv), 0, stream, &config),
        "ncclGatherConfig",
    );
    assert_missing(
        comm.scatter_config(Some(&send), &mut recv, 0, stream, &config),
        "ncclScatterConfig",
    );
    assert_eq!(out, [0.0, 0.0], "nothing ran");
    assert!(calls.take_calls().is_empty());
}

#[test]
fn the_plain_calls_checks_come_before_the_missing_function() {
    let (_calls, _serial) = stand_in();
    let comm = one_rank();
    let stream = Stream::LEGACY_DEFAULT;
    let config = CollConfig::default();
    let host = [1.0f32, 2.0];
    let mut out = [0.0f32; 3];
    // SAFETY: as above; the lengths are checked first.
    let send = unsafe { DeviceSlice::from_raw_parts(host.as_ptr(), 2) }.unwrap();
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(out.as_mut_ptr(), 3) }.unwrap();
    assert_eq!(
        comm.all_reduce_config(&send, &mut recv, RedOp::SUM, stream, &config),
        Err(Error::WrongLength {
            argument: "recv",
            len: 3,
            expected: 2
        })
    );
    assert_eq!(
        comm.broadcast_config(Some(&send), &mut recv, 1, stream, &config),
        Err(Error::RankOutOfRange {
            argument: "root",
            rank: 1,
            nranks: 1
        })
    );
    // The loaded layout's check comes before the call too: no ncclCollConfig_t layout
    // predates 2.28.9's missing function, so an option the oldest layout lacks is refused.
    let mut event_config = CollConfig::default();
    // SAFETY: never recorded: the option is refused before NCCL.
    unsafe { event_config.set_launch_completion_event(std::ptr::null_mut()) };
    let mut in_place = unsafe { DeviceSliceMut::from_raw_parts(out.as_mut_ptr(), 3) }.unwrap();
    let result = comm.all_reduce_in_place_config(&mut in_place, RedOp::SUM, stream, &event_config);
    assert!(
        matches!(
            result,
            Err(Error::ConfigFieldUnsupported {
                field: "launchCompletionEvent",
                ..
            })
        ),
        "{result:?}"
    );
}

#[test]
fn after_an_abort_windows_and_registrations_never_reach_nccl() {
    let (_calls, _serial) = stand_in();
    let comm = one_rank();
    let mut memory = [0.0f32; 4];
    let window_view = unsafe { DeviceSliceMut::from_raw_parts(memory.as_mut_ptr(), 2) }.unwrap();
    let window = comm
        .register_window(window_view, WindowFlags::DEFAULT)
        .unwrap();
    assert!(!window.as_raw().is_null());
    comm.abort_handle().abort().unwrap();
    assert!(window.as_raw().is_null(), "the abort freed the window");
    // The generated window calls check the communicator first (the stand-in lacks them, so
    // reaching NCCL would be SymbolNotFound).
    assert_eq!(window.lsa_pointer(0, 0), Err(Error::Aborted));
    assert_eq!(window.multimem_pointer(0), Err(Error::Aborted));
    let more = unsafe { DeviceSliceMut::from_raw_parts(memory.as_mut_ptr().add(2), 2) }.unwrap();
    assert!(matches!(
        comm.register_window(more, WindowFlags::DEFAULT),
        Err(Error::Aborted)
    ));
    let registered = unsafe { DeviceSlice::from_raw_parts(memory.as_ptr(), 4) }.unwrap();
    assert!(matches!(comm.register(registered), Err(Error::Aborted)));
    assert!(matches!(comm.pre_mul_sum(2.0f32), Err(Error::Aborted)));
    drop(window); // frees nothing: NCCL freed it with the communicator
}
