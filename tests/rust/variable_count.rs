//! Variable-count collectives (all_to_allv, all_gatherv, reduce_scatterv) and complex numbers
//! over the stand-in libnccl (stand_in.rs): one-rank communicators move the data; on rank 1 of
//! 4 the stand-in's call log shows which grouped calls are made, with which counts and
//! addresses; bad counts, displacements and ops are rejected before any NCCL call. The same
//! cases as tests/python/test_variable_count.py and test_complex.py, with the same messages.

mod stand_in;

use ncclbind::{
    Communicator, Complex32, Complex64, DataType, DeviceSlice, DeviceSliceMut, Error, RedOp,
    Stream, UniqueId,
};

use stand_in::{logged, stand_in};

const STREAM: Stream = Stream::PER_THREAD_DEFAULT;
// As the stand-in logs them: ncclFloat32, ncclFloat64, ncclMax.
const FLOAT32: u32 = 7;
const FLOAT64: u32 = 8;
const MAX: u32 = 2;

fn one_rank() -> Communicator {
    Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap()
}

/// Rank 1 of 4: the stand-in only checks arguments and logs the calls.
fn rank_1_of_4() -> Communicator {
    Communicator::init_rank(4, &UniqueId::new().unwrap(), 1).unwrap()
}

// Host memory stands in for device memory: the stand-in reads and writes it with memcpy.
fn view<T: DataType>(host: &[T]) -> DeviceSlice<'_, T> {
    unsafe { DeviceSlice::from_raw_parts(host.as_ptr(), host.len()) }.unwrap()
}

fn view_mut<T: DataType>(host: &mut [T]) -> DeviceSliceMut<'_, T> {
    unsafe { DeviceSliceMut::from_raw_parts(host.as_mut_ptr(), host.len()) }.unwrap()
}

/// The address of value `i` of `host`, as the stand-in logs it.
fn at<T>(host: &[T], i: usize) -> String {
    logged(host.as_ptr().wrapping_add(i))
}

fn send_call(ptr: String, count: usize, data_type: u32, peer: i32) -> String {
    format!("send {ptr} {count} {data_type} {peer}")
}

fn recv_call(ptr: String, count: usize, data_type: u32, peer: i32) -> String {
    format!("recv {ptr} {count} {data_type} {peer}")
}

fn grouped(calls: Vec<String>) -> Vec<String> {
    let mut all = vec!["group_start".to_owned()];
    all.extend(calls);
    all.push("group_end".to_owned());
    all
}

#[test]
fn all_to_allv_on_one_rank_moves_the_block() {
    let (_stand_in, _serial) = stand_in();
    let comm = one_rank();
    let send = [1.0f32, 2.0, 3.0, 4.0, 5.0];
    let mut recv = [0.0f32; 6];
    comm.all_to_allv(
        &view(&send),
        &[3],
        &[1],
        &mut view_mut(&mut recv),
        &[3],
        &[2],
        STREAM,
    )
    .unwrap();
    assert_eq!(recv, [0.0, 0.0, 2.0, 3.0, 4.0, 0.0]);
}

#[test]
fn all_to_allv_sends_and_receives_each_block_in_one_group() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let send = [0.0f32; 10];
    let mut recv = [0.0f32; 12];
    let (send_counts, send_displs) = ([1, 0, 3, 2], [0, 1, 1, 4]);
    let (recv_counts, recv_displs) = ([2, 2, 0, 5], [0, 2, 4, 4]);
    comm.all_to_allv(
        &view(&send),
        &send_counts,
        &send_displs,
        &mut view_mut(&mut recv),
        &recv_counts,
        &recv_displs,
        STREAM,
    )
    .unwrap();
    assert_eq!(
        stand_in.take_calls(),
        grouped(vec![
            send_call(at(&send, 0), 1, FLOAT32, 0),
            recv_call(at(&recv, 0), 2, FLOAT32, 0),
            recv_call(at(&recv, 2), 2, FLOAT32, 1), // nothing to send to rank 1
            send_call(at(&send, 1), 3, FLOAT32, 2), // nothing to receive from rank 2
            send_call(at(&send, 4), 2, FLOAT32, 3),
            recv_call(at(&recv, 4), 5, FLOAT32, 3),
        ])
    );
}

#[test]
fn all_gatherv_packs_blocks_in_rank_order_by_default() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let send = [7.0f32; 3];
    let mut recv = [0.0f32; 7];
    comm.all_gatherv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[1, 3, 0, 2],
        None,
        STREAM,
    )
    .unwrap();
    assert_eq!(
        stand_in.take_calls(),
        grouped(vec![
            send_call(at(&send, 0), 3, FLOAT32, 0),
            recv_call(at(&recv, 0), 1, FLOAT32, 0),
            send_call(at(&send, 0), 3, FLOAT32, 1), // to itself: its own block
            recv_call(at(&recv, 1), 3, FLOAT32, 1),
            send_call(at(&send, 0), 3, FLOAT32, 2), // nothing comes from rank 2
            send_call(at(&send, 0), 3, FLOAT32, 3),
            recv_call(at(&recv, 4), 2, FLOAT32, 3),
        ])
    );
}

#[test]
fn all_gatherv_on_one_rank_places_the_block() {
    let (_stand_in, _serial) = stand_in();
    let comm = one_rank();
    let send = [5.0f32, 6.0];
    let mut recv = [0.0f32; 4];
    comm.all_gatherv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[2],
        Some(&[1]),
        STREAM,
    )
    .unwrap();
    assert_eq!(recv, [0.0, 5.0, 6.0, 0.0]);
}

#[test]
fn reduce_scatterv_is_one_reduce_per_block_rooted_at_its_rank() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let send = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut recv = [0.0f32; 3];
    comm.reduce_scatterv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[1, 3, 0, 2],
        None,
        RedOp::MAX,
        STREAM,
    )
    .unwrap();
    let reduce = |s: String, r: String, count, root| {
        format!("reduce {s} {r} {count} {FLOAT32} {MAX} {root}")
    };
    let null = logged(std::ptr::null::<f32>());
    assert_eq!(
        stand_in.take_calls(),
        grouped(vec![
            reduce(at(&send, 0), null.clone(), 1, 0),
            reduce(at(&send, 1), at(&recv, 0), 3, 1), // this rank's block
            reduce(at(&send, 4), null, 2, 3),
        ])
    );
    assert_eq!(recv, [1.0, 2.0, 3.0]); // one rank's "reduction" is its block
}

#[test]
fn reduce_scatterv_on_one_rank() {
    let (_stand_in, _serial) = stand_in();
    let comm = one_rank();
    let send = [1.0f32, 2.0, 3.0, 4.0];
    let mut recv = [0.0f32; 2];
    comm.reduce_scatterv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[2],
        Some(&[2]),
        RedOp::SUM,
        STREAM,
    )
    .unwrap();
    assert_eq!(recv, [3.0, 4.0]);
}

#[test]
fn a_complex_value_is_two_reals_to_nccl() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let send = [Complex64::new(1.0, -1.0); 4];
    let mut recv = [Complex64::default(); 5];
    comm.all_to_allv(
        &view(&send),
        &[1, 1, 2, 0],
        &[0, 1, 2, 0],
        &mut view_mut(&mut recv),
        &[1, 0, 1, 3],
        &[0, 0, 1, 2],
        STREAM,
    )
    .unwrap();
    assert_eq!(
        stand_in.take_calls(),
        grouped(vec![
            send_call(at(&send, 0), 2, FLOAT64, 0),
            recv_call(at(&recv, 0), 2, FLOAT64, 0),
            send_call(at(&send, 1), 2, FLOAT64, 1),
            send_call(at(&send, 2), 4, FLOAT64, 2),
            recv_call(at(&recv, 1), 2, FLOAT64, 2),
            recv_call(at(&recv, 2), 6, FLOAT64, 3),
        ])
    );

    // The generated collectives double the count too: the stand-in copies count x 4 bytes.
    let comm = one_rank();
    let send = [
        Complex32::new(1.0, 2.0),
        Complex32::new(3.0, 4.0),
        Complex32::new(5.0, 6.0),
    ];
    let mut recv = [Complex32::default(); 3];
    comm.all_reduce(&view(&send), &mut view_mut(&mut recv), RedOp::SUM, STREAM)
        .unwrap();
    assert_eq!(recv, send);
    let mut recv = [Complex32::default(); 3];
    comm.reduce(
        &view(&send),
        Some(&mut view_mut(&mut recv)),
        RedOp::AVG,
        0,
        STREAM,
    )
    .unwrap();
    assert_eq!(recv, send);
    let mut recv = [Complex32::default(); 3];
    let group = ncclbind::Group::start().unwrap();
    comm.send(&view(&send), 0, STREAM).unwrap();
    comm.recv(&mut view_mut(&mut recv), 0, STREAM).unwrap();
    group.end().unwrap();
    assert_eq!(recv, send);
    let calls = stand_in.take_calls();
    assert_eq!(
        calls[calls.len() - 4..],
        grouped(vec![
            send_call(at(&send, 0), 6, FLOAT32, 0),
            recv_call(at(&recv, 0), 6, FLOAT32, 0),
        ])
    );
}

#[test]
fn complex_numbers_take_sum_and_avg_only() {
    let (stand_in, _serial) = stand_in();
    let comm = one_rank();
    let send = [Complex32::new(1.0, 2.0); 2];
    let mut recv = [Complex32::default(); 2];
    let refused = |op: &str, data| {
        Err(Error::UnsupportedComplexOp {
            argument: "op",
            op: op.to_owned(),
            data,
        })
    };
    for (op, name) in [
        (RedOp::PROD, "prod"),
        (RedOp::MAX, "max"),
        (RedOp::MIN, "min"),
    ] {
        assert_eq!(
            comm.all_reduce(&view(&send), &mut view_mut(&mut recv), op, STREAM),
            refused(name, "Complex32")
        );
        assert_eq!(
            comm.all_reduce_in_place(&mut view_mut(&mut recv), op, STREAM),
            refused(name, "Complex32")
        );
        assert_eq!(
            comm.reduce(&view(&send), Some(&mut view_mut(&mut recv)), op, 0, STREAM),
            refused(name, "Complex32")
        );
        assert_eq!(
            comm.reduce_scatter(&view(&send), &mut view_mut(&mut recv), op, STREAM),
            refused(name, "Complex32")
        );
        assert_eq!(
            comm.reduce_scatterv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2],
                None,
                op,
                STREAM
            ),
            refused(name, "Complex32")
        );
        let send64 = [Complex64::new(1.0, 2.0)];
        let mut recv64 = [Complex64::default()];
        assert_eq!(
            comm.all_reduce(&view(&send64), &mut view_mut(&mut recv64), op, STREAM),
            refused(name, "Complex64")
        );
    }
    assert_eq!(stand_in.take_calls(), Vec::<String>::new());
    for op in [RedOp::SUM, RedOp::AVG] {
        comm.all_reduce(&view(&send), &mut view_mut(&mut recv), op, STREAM)
            .unwrap();
        comm.reduce_scatterv(
            &view(&send),
            &mut view_mut(&mut recv),
            &[2],
            None,
            op,
            STREAM,
        )
        .unwrap();
    }
    // Real types take every op.
    let (real, mut real_out) = ([1.0f32], [0.0f32]);
    comm.all_reduce(
        &view(&real),
        &mut view_mut(&mut real_out),
        RedOp::MAX,
        STREAM,
    )
    .unwrap();

    // A PreMulSum cannot be made for complex numbers (NCCL would read the scalar's real
    // part alone), nor one made for f32 used on Complex32, whose parts are f32.
    assert_eq!(
        comm.pre_mul_sum(Complex32::new(2.0, 0.0)).err(),
        Some(Error::UnsupportedComplexOp {
            argument: "scalar",
            op: "premulsum".to_owned(),
            data: "Complex32"
        })
    );
    let scale = comm.pre_mul_sum(2.0f32).unwrap();
    assert_eq!(
        comm.all_reduce(&view(&send), &mut view_mut(&mut recv), scale.op(), STREAM),
        refused("premulsum", "Complex32")
    );

    let err = refused("max", "Complex32").unwrap_err();
    assert!(err.is_argument_error());
    assert_eq!(
        err.to_string(),
        "op: max on Complex32 data; NCCL reduces complex numbers as pairs of reals, which is \
         exact for only sum and avg"
    );
}

#[test]
fn complex_types_are_pairs_of_their_part_type() {
    assert_eq!(size_of::<Complex32>(), 2 * size_of::<f32>());
    assert_eq!(size_of::<Complex64>(), 2 * size_of::<f64>());
    assert_eq!(Complex32::DATA_TYPE, f32::DATA_TYPE);
    assert_eq!(Complex64::DATA_TYPE, f64::DATA_TYPE);
    assert_eq!(
        (Complex32::ELEMENTS_PER_VALUE, Complex32::COMPLEX),
        (2, true)
    );
    assert_eq!(
        (Complex64::ELEMENTS_PER_VALUE, Complex64::COMPLEX),
        (2, true)
    );
    assert_eq!((f32::ELEMENTS_PER_VALUE, f32::COMPLEX), (1, false));
    let pair = [Complex32::new(1.5, -2.5)];
    // SAFETY: a repr(C) pair of f32 is two f32, real part first.
    let parts = unsafe { std::slice::from_raw_parts(pair.as_ptr().cast::<f32>(), 2) };
    assert_eq!(parts, [1.5, -2.5]);
}

/// Runs `call` on rank 1 of 4, expecting `expected` and no NCCL call at all.
fn refused_before_nccl(
    call: impl FnOnce(&Communicator) -> ncclbind::Result<()>,
    expected: Error,
    message: &str,
) {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let err = call(&comm).unwrap_err();
    assert_eq!(err, expected);
    assert_eq!(err.to_string(), message);
    assert!(err.is_argument_error());
    assert_eq!(stand_in.take_calls(), Vec::<String>::new());
}

#[test]
fn counts_and_displacements_must_be_one_per_rank() {
    let names = ["send_counts", "send_displs", "recv_counts", "recv_displs"];
    for (which, argument) in names.into_iter().enumerate() {
        let mut lists = [
            vec![1usize; 4],
            vec![0, 1, 2, 3],
            vec![1; 4],
            vec![0, 1, 2, 3],
        ];
        lists[which].pop();
        refused_before_nccl(
            |comm| {
                let (send, mut recv) = ([0.0f32; 8], [0.0f32; 8]);
                comm.all_to_allv(
                    &view(&send),
                    &lists[0],
                    &lists[1],
                    &mut view_mut(&mut recv),
                    &lists[2],
                    &lists[3],
                    STREAM,
                )
            },
            Error::CountsLength {
                argument,
                len: 3,
                nranks: 4,
            },
            &format!("{argument} has 3 entries; the communicator has 4 ranks"),
        );
    }
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 1], [0.0f32; 8]);
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[1; 5],
                None,
                STREAM,
            )
        },
        Error::CountsLength {
            argument: "recv_counts",
            len: 5,
            nranks: 4,
        },
        "recv_counts has 5 entries; the communicator has 4 ranks",
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 2], [0.0f32; 8]);
            let displs: &[usize] = &[0, 2];
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2; 4],
                Some(displs),
                STREAM,
            )
        },
        Error::CountsLength {
            argument: "recv_displs",
            len: 2,
            nranks: 4,
        },
        "recv_displs has 2 entries; the communicator has 4 ranks",
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 8], [0.0f32; 2]);
            let op = RedOp::SUM;
            comm.reduce_scatterv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2; 4],
                Some(&[0]),
                op,
                STREAM,
            )
        },
        Error::CountsLength {
            argument: "send_displs",
            len: 1,
            nranks: 4,
        },
        "send_displs has 1 entries; the communicator has 4 ranks",
    );
}

#[test]
fn a_block_past_the_end_of_its_buffer() {
    let past_end = |argument, counts_argument, displ, buffer| Error::BlockPastEnd {
        argument,
        counts_argument,
        index: 3,
        displ,
        count: 2,
        buffer,
        buffer_len: 8,
    };
    let all_to_allv = |send_displs: [usize; 4], recv_displs: [usize; 4]| {
        move |comm: &Communicator| {
            let (send, mut recv) = ([0.0f32; 8], [0.0f32; 8]);
            comm.all_to_allv(
                &view(&send),
                &[2; 4],
                &send_displs,
                &mut view_mut(&mut recv),
                &[2; 4],
                &recv_displs,
                STREAM,
            )
        }
    };
    refused_before_nccl(
        all_to_allv([0, 2, 4, 7], [0, 2, 4, 6]),
        past_end("send_displs", "send_counts", 7, "send"),
        "send_displs[3] + send_counts[3] = 7 + 2 is past the end of send (8 elements)",
    );
    refused_before_nccl(
        all_to_allv([0, 2, 4, 6], [0, 2, 4, 7]),
        past_end("recv_displs", "recv_counts", 7, "recv"),
        "recv_displs[3] + recv_counts[3] = 7 + 2 is past the end of recv (8 elements)",
    );
    // A displacement whose end overflows is past the end too.
    refused_before_nccl(
        all_to_allv([0, 2, 4, usize::MAX], [0, 2, 4, 6]),
        past_end("send_displs", "send_counts", usize::MAX, "send"),
        &format!(
            "send_displs[3] + send_counts[3] = {} + 2 is past the end of send (8 elements)",
            usize::MAX
        ),
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 2], [0.0f32; 8]);
            let displs: &[usize] = &[0, 2, 4, 7];
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2; 4],
                Some(displs),
                STREAM,
            )
        },
        past_end("recv_displs", "recv_counts", 7, "recv"),
        "recv_displs[3] + recv_counts[3] = 7 + 2 is past the end of recv (8 elements)",
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 8], [0.0f32; 2]);
            let displs: &[usize] = &[0, 2, 4, 7];
            comm.reduce_scatterv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2; 4],
                Some(displs),
                RedOp::SUM,
                STREAM,
            )
        },
        past_end("send_displs", "recv_counts", 7, "send"),
        "send_displs[3] + recv_counts[3] = 7 + 2 is past the end of send (8 elements)",
    );
    // Packed blocks: 4 x 3 values do not fit 8.
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 3], [0.0f32; 8]);
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[3, 3, 3, 3],
                None,
                STREAM,
            )
        },
        Error::BlockPastEnd {
            argument: "recv_displs",
            counts_argument: "recv_counts",
            index: 2,
            displ: 6,
            count: 3,
            buffer: "recv",
            buffer_len: 8,
        },
        "recv_displs[2] + recv_counts[2] = 6 + 3 is past the end of recv (8 elements)",
    );
}

#[test]
fn receive_blocks_must_not_overlap() {
    let overlap = Error::BlocksOverlap {
        argument: "recv_displs",
        index: 3,
        other: 2,
        blocks: [(1, 3), (2, 3)],
    };
    let message = "recv_displs[3]: receive block 3 overlaps block 2 ([1, 3) and [2, 3) elements)";
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 2], [0.0f32; 8]);
            let displs: &[usize] = &[0, 6, 1, 2];
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[1, 2, 2, 1],
                Some(displs),
                STREAM,
            )
        },
        overlap.clone(),
        message,
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 8], [0.0f32; 8]);
            comm.all_to_allv(
                &view(&send),
                &[1; 4],
                &[0, 1, 2, 3],
                &mut view_mut(&mut recv),
                &[1, 2, 2, 1],
                &[0, 6, 1, 2],
                STREAM,
            )
        },
        overlap,
        message,
    );
    // Send blocks may overlap: they are only read.
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let (send, mut recv) = ([0.0f32; 2], [0.0f32; 8]);
    comm.all_to_allv(
        &view(&send),
        &[2; 4],
        &[0; 4],
        &mut view_mut(&mut recv),
        &[2; 4],
        &[0, 2, 4, 6],
        STREAM,
    )
    .unwrap();
    assert_eq!(stand_in.take_calls().len(), 2 + 8);
}

#[test]
fn empty_blocks_may_share_a_displacement_and_make_no_call() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let (send, mut recv) = ([1.0f32], [0.0f32; 2]);
    comm.all_gatherv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[0, 1, 0, 1],
        Some(&[0, 0, 1, 1]),
        STREAM,
    )
    .unwrap();
    let calls = stand_in.take_calls();
    let receives: Vec<_> = calls.iter().filter(|c| c.starts_with("recv")).collect();
    assert_eq!(
        receives,
        [
            &recv_call(at(&recv, 0), 1, FLOAT32, 1),
            &recv_call(at(&recv, 1), 1, FLOAT32, 3)
        ]
    );
    // An empty send block goes nowhere: all-empty is a group with nothing in it.
    let (send, mut recv) = ([0.0f32; 0], [0.0f32; 0]);
    comm.all_gatherv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[0; 4],
        None,
        STREAM,
    )
    .unwrap();
    assert_eq!(stand_in.take_calls(), grouped(vec![]));
}

#[test]
fn the_buffer_of_this_ranks_block_must_fit_it() {
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 3], [0.0f32; 8]);
            comm.all_gatherv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[1, 2, 2, 1],
                None,
                STREAM,
            )
        },
        Error::OwnBlockLength {
            argument: "send",
            len: 3,
            counts_argument: "recv_counts",
            rank: 1,
            count: 2,
        },
        "send holds 3 elements; recv_counts[1] (this rank's block) is 2",
    );
    refused_before_nccl(
        |comm| {
            let (send, mut recv) = ([0.0f32; 8], [0.0f32; 1]);
            comm.reduce_scatterv(
                &view(&send),
                &mut view_mut(&mut recv),
                &[2; 4],
                None,
                RedOp::SUM,
                STREAM,
            )
        },
        Error::OwnBlockLength {
            argument: "recv",
            len: 1,
            counts_argument: "recv_counts",
            rank: 1,
            count: 2,
        },
        "recv holds 1 elements; recv_counts[1] (this rank's block) is 2",
    );
    // A longer recv is fine for reduce_scatterv: the first recv_counts[rank] values are written.
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    let (send, mut recv) = ([0.0f32; 8], [0.0f32; 5]);
    comm.reduce_scatterv(
        &view(&send),
        &mut view_mut(&mut recv),
        &[2; 4],
        None,
        RedOp::SUM,
        STREAM,
    )
    .unwrap();
    let calls = stand_in.take_calls();
    assert_eq!(
        calls[2],
        format!("reduce {} {} 2 7 0 1", at(&send, 2), at(&recv, 0))
    );
}

#[test]
fn an_aborted_communicator_starts_no_group() {
    let (stand_in, _serial) = stand_in();
    let comm = rank_1_of_4();
    comm.abort_handle().abort().unwrap();
    let (send, mut recv) = ([0.0f32; 4], [0.0f32; 4]);
    let counts = [1; 4];
    let displs = [0, 1, 2, 3];
    assert_eq!(
        comm.all_to_allv(
            &view(&send),
            &counts,
            &displs,
            &mut view_mut(&mut recv),
            &counts,
            &displs,
            STREAM
        ),
        Err(Error::Aborted)
    );
    assert_eq!(
        comm.all_gatherv(
            &view(&send[..1]),
            &mut view_mut(&mut recv),
            &counts,
            None,
            STREAM
        ),
        Err(Error::Aborted)
    );
    assert_eq!(
        comm.reduce_scatterv(
            &view(&send),
            &mut view_mut(&mut recv),
            &counts,
            None,
            RedOp::SUM,
            STREAM
        ),
        Err(Error::Aborted)
    );
    assert_eq!(stand_in.take_calls(), Vec::<String>::new());
}
