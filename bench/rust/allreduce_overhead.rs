//! Per-call cost of all_reduce on a one-rank communicator (GPU), three ways in one run:
//!   direct  NCCL's ncclAllReduce through a plain function pointer (what C does)
//!   sys     the generated wrapper nb_ncclAllReduce (runtime slot load, then the call)
//!   safe    Communicator::all_reduce (argument checks, wrapper, result check)
//! and the same for a trivial call, ncclCommCount vs Communicator::count.
//! Calls are enqueued in batches of BATCH with a stream sync after each batch. Reported:
//! host time per call spent enqueuing (where a binding's overhead shows), and wall time per
//! call including the syncs; medians over ROUNDS interleaved rounds.
//! Without a GPU it prints "SKIPPED: no GPU (why)" and exits 0.
//! Environment: NCCLBIND_BENCH_COUNT (floats per all_reduce, default 1), NCCLBIND_BENCH_CALLS
//! (per round, default 20480).

#[path = "../../tests/rust/cuda_runtime.rs"]
mod cuda_runtime;
#[path = "direct_nccl.rs"]
mod direct_nccl;

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::time::{Duration, Instant};

use cuda_runtime::{gpu_unavailable, CudaRuntime};
use direct_nccl::{median, nccl_entry_point};
use ncclbind::sys::nccl::{ncclAllReduce, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use ncclbind::{
    library_info, Communicator, DeviceSlice, DeviceSliceMut, Library, RedOp, Stream, UniqueId,
};

const ROUNDS: usize = 7;
const BATCH: usize = 256;

type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    *mut c_void,
) -> ncclResult_t;
type CommCount = unsafe extern "C" fn(ncclComm_t, *mut c_int) -> ncclResult_t;

/// Host time spent in `enqueue` (called BATCH times per batch) and wall time including syncs.
fn time_batches(calls: usize, mut enqueue: impl FnMut(), sync: impl Fn()) -> (Duration, Duration) {
    let mut host = Duration::ZERO;
    let wall = Instant::now();
    for _ in 0..calls / BATCH {
        let start = Instant::now();
        for _ in 0..BATCH {
            enqueue();
        }
        host += start.elapsed();
        sync();
    }
    (host, wall.elapsed())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cuda = CudaRuntime::load();
    if let Some(why) = gpu_unavailable(&cuda) {
        println!("SKIPPED: no GPU ({why})");
        return Ok(());
    }
    let cuda = cuda.unwrap();
    let count: usize = std::env::var("NCCLBIND_BENCH_COUNT").map_or(1, |n| n.parse().unwrap());
    let calls: usize = std::env::var("NCCLBIND_BENCH_CALLS").map_or(20480, |n| n.parse().unwrap());

    let info = library_info(Library::Nccl)?;
    let comm = Communicator::init_rank(1, &UniqueId::new()?, 0)?;
    let raw_stream = cuda.create_stream()?;
    let stream = unsafe { Stream::from_raw(raw_stream) }?;
    let (send_ptr, recv_ptr) = (cuda.alloc::<f32>(count)?, cuda.alloc::<f32>(count)?);
    cuda.copy_to_device(send_ptr, &vec![1.0f32; count])?;
    let send = unsafe { DeviceSlice::from_raw_parts(send_ptr, count) }?;
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(recv_ptr, count) }?;
    let direct: AllReduce = unsafe { std::mem::transmute(nccl_entry_point("ncclAllReduce")) };
    let direct_count: CommCount = unsafe { std::mem::transmute(nccl_entry_point("ncclCommCount")) };
    let raw_comm = comm.as_raw();
    let (f32_type, sum) = (ncclDataType_t::ncclFloat32, ncclRedOp_t::ncclSum);
    let sync = || cuda.synchronize(raw_stream).unwrap();

    let mut samples: [Vec<(f64, f64)>; 3] = Default::default();
    for _ in 0..ROUNDS {
        let per_call = |(host, wall): (Duration, Duration)| {
            (
                host.as_nanos() as f64 / calls as f64,
                wall.as_nanos() as f64 / calls as f64,
            )
        };
        samples[0].push(per_call(time_batches(
            calls,
            || {
                let r = unsafe {
                    direct(
                        send_ptr.cast(),
                        recv_ptr.cast(),
                        count,
                        f32_type,
                        sum,
                        raw_comm,
                        raw_stream,
                    )
                };
                assert_eq!(black_box(r), ncclResult_t::ncclSuccess);
            },
            sync,
        )));
        samples[1].push(per_call(time_batches(
            calls,
            || {
                let r = unsafe {
                    ncclAllReduce(
                        send_ptr.cast(),
                        recv_ptr.cast(),
                        count,
                        f32_type,
                        sum,
                        raw_comm,
                        raw_stream,
                    )
                };
                assert_eq!(black_box(r), ncclResult_t::ncclSuccess);
            },
            sync,
        )));
        samples[2].push(per_call(time_batches(
            calls,
            || {
                comm.all_reduce(&send, &mut recv, RedOp::SUM, stream)
                    .unwrap()
            },
            sync,
        )));
    }

    let mut result = vec![0.0f32; count];
    cuda.copy_to_host(&mut result, recv_ptr)?;
    assert!(
        result.iter().all(|&x| x == 1.0),
        "the all_reduce result is wrong"
    );

    println!(
        "all_reduce of {count} f32 on 1 rank, libnccl {} ({}), CUDA runtime {}, {calls} calls x {ROUNDS} rounds, median ns/call:",
        info.version,
        info.path.display(),
        cuda.path
    );
    println!("           enqueue   with syncs");
    for (name, rounds) in ["direct", "sys", "safe"].iter().zip(&samples) {
        let host = median(rounds.iter().map(|s| s.0).collect());
        let wall = median(rounds.iter().map(|s| s.1).collect());
        println!("  {name:<7} {host:9.1} {wall:12.1}");
    }

    let trivial_calls = 1_000_000;
    let mut count_samples: [Vec<f64>; 2] = Default::default();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..trivial_calls {
            let mut n = 0;
            assert_eq!(
                unsafe { direct_count(black_box(raw_comm), &mut n) },
                ncclResult_t::ncclSuccess
            );
            black_box(n);
        }
        count_samples[0].push(start.elapsed().as_nanos() as f64 / trivial_calls as f64);
        let start = Instant::now();
        for _ in 0..trivial_calls {
            black_box(comm.count().unwrap());
        }
        count_samples[1].push(start.elapsed().as_nanos() as f64 / trivial_calls as f64);
    }
    let [direct_ns, safe_ns] = count_samples.map(median);
    println!(
        "ncclCommCount: direct {direct_ns:.2} ns/call, Communicator::count {safe_ns:.2} ns/call"
    );

    comm.destroy()?;
    cuda.free(send_ptr)?;
    cuda.free(recv_ptr)?;
    cuda.destroy_stream(raw_stream)?;
    Ok(())
}
