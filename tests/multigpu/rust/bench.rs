//! --bench: bus bandwidth by size through the safe crate, then the latency of a 2-float
//! all_reduce three ways in the same run: the safe crate (Communicator::all_reduce), the sys
//! layer (the generated wrapper nb_ncclAllReduce) and NCCL's own ncclAllReduce found with
//! dlsym, each with a stream sync after every call and back to back. Rank 0 prints.

use std::ffi::c_void;
use std::time::Instant;

use ncclbind::sys::nccl::{ncclAllReduce, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use ncclbind::{Communicator, RedOp, Stream};

use crate::direct_nccl::{median, nccl_entry_point};
use crate::gpu::{Fallible, Gpu};

const LATENCY_ROUNDS: usize = 5;
const LATENCY_CALLS: usize = 2000;

type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    *mut c_void,
) -> ncclResult_t;

pub fn run(gpu: &Gpu, stream: Stream, comm: &Communicator) -> Fallible<()> {
    bandwidth(gpu, stream, comm)?;
    latency(gpu, stream, comm)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
}

fn bandwidth(gpu: &Gpu, stream: Stream, comm: &Communicator) -> Fallible<()> {
    use Collective::*;
    let n = comm.size() as usize;
    let lead = comm.rank() == 0;
    if lead {
        println!(
            "\n{:<15} {:>12} {:>10} {:>11}",
            "collective", "bytes", "time_us", "busbw_GB/s"
        );
    }
    let sync = || gpu.cuda.synchronize(stream.as_raw().cast());
    for (name, collective) in [
        ("all_reduce", AllReduce),
        ("all_gather", AllGather),
        ("reduce_scatter", ReduceScatter),
    ] {
        // bytes: the size of each rank's result buffer, as nccl-tests counts it.
        let sizes = std::iter::successors(Some(8usize), |bytes| Some(bytes * 8));
        for bytes in sizes.take_while(|&bytes| bytes <= 256 << 20) {
            let count = bytes / 4 / if collective == AllReduce { 1 } else { n };
            if count == 0 {
                continue;
            }
            let send_len = if collective == ReduceScatter {
                count * n
            } else {
                count
            };
            let recv_len = if collective == AllGather {
                count * n
            } else {
                count
            };
            let send = gpu.poisoned::<f32>(send_len)?;
            let mut recv = gpu.poisoned::<f32>(recv_len)?;
            let mut run = || {
                let (send, mut recv) = (send.slice(), recv.slice_mut());
                match collective {
                    AllReduce => comm.all_reduce(&send, &mut recv, RedOp::SUM, stream),
                    AllGather => comm.all_gather(&send, &mut recv, stream),
                    ReduceScatter => comm.reduce_scatter(&send, &mut recv, RedOp::SUM, stream),
                }
            };
            for _ in 0..5 {
                run()?;
            }
            sync()?;
            let iterations = if bytes >= 64 << 20 { 10 } else { 50 };
            let start = Instant::now();
            for _ in 0..iterations {
                run()?;
            }
            sync()?;
            let us = start.elapsed().as_secs_f64() * 1e6 / iterations as f64;
            let algbw = bytes as f64 / (us * 1e3);
            let factor = match collective {
                AllReduce => 2.0 * (n - 1) as f64 / n as f64,
                _ => (n - 1) as f64 / n as f64,
            };
            if lead {
                println!("{name:<15} {bytes:>12} {us:>10.2} {:>11.2}", algbw * factor);
            }
        }
    }
    Ok(())
}

fn latency(gpu: &Gpu, stream: Stream, comm: &Communicator) -> Fallible<()> {
    let send = gpu.upload_with(2, |i| i as f32)?;
    let mut recv = gpu.poisoned::<f32>(2)?;
    let (send_ptr, recv_ptr) = (send.ptr(), recv.ptr());
    let (send_view, mut recv_view) = (send.slice(), recv.slice_mut());
    let (raw_comm, raw_stream) = (comm.as_raw(), stream.as_raw());
    // SAFETY: ncclAllReduce of the libnccl the runtime loaded (RTLD_GLOBAL), whose signature
    // AllReduce is.
    let direct: AllReduce = unsafe { std::mem::transmute(nccl_entry_point("ncclAllReduce")) };
    let (f32_type, sum) = (ncclDataType_t::ncclFloat32, ncclRedOp_t::ncclSum);
    let sync = || gpu.cuda.synchronize(raw_stream);

    // [variant][with sync, back to back] -> microseconds per call, one sample per round
    let mut samples: [[Vec<f64>; 2]; 3] = Default::default();
    for round in 0..=LATENCY_ROUNDS {
        for (mode, sync_each) in [true, false].into_iter().enumerate() {
            let safe = time_calls(sync_each, &sync, || {
                comm.all_reduce(&send_view, &mut recv_view, RedOp::SUM, stream)
                    .is_ok()
            })?;
            // SAFETY (both): the buffers hold 2 floats on this rank's device.
            let sys = time_calls(sync_each, &sync, || unsafe {
                ncclAllReduce(
                    send_ptr.cast(),
                    recv_ptr.cast(),
                    2,
                    f32_type,
                    sum,
                    raw_comm,
                    raw_stream,
                ) == ncclResult_t::ncclSuccess
            })?;
            let raw = time_calls(sync_each, &sync, || unsafe {
                direct(
                    send_ptr.cast(),
                    recv_ptr.cast(),
                    2,
                    f32_type,
                    sum,
                    raw_comm,
                    raw_stream,
                ) == ncclResult_t::ncclSuccess
            })?;
            if round > 0 {
                // round 0 warms up
                for (variant, us) in [safe, sys, raw].into_iter().enumerate() {
                    samples[variant][mode].push(us);
                }
            }
        }
    }
    let mut got = vec![0.0f32; 2];
    gpu.cuda.copy_to_host(&mut got, recv_ptr)?;
    let n = comm.size() as f32;
    if got != [0.0, n] {
        return Err(format!("the 2-float all_reduce gave {got:?}, expected [0, {n}]").into());
    }

    if comm.rank() == 0 {
        println!(
            "\n2-float all_reduce over {} ranks, us/call: median of {LATENCY_ROUNDS} rounds of \
             {LATENCY_CALLS} calls (fastest round)",
            comm.size()
        );
        println!("{:<32} {:>17} {:>17}", "", "with sync", "back to back");
        let names = [
            "safe (Communicator::all_reduce)",
            "sys (nb_ncclAllReduce)",
            "raw (ncclAllReduce via dlsym)",
        ];
        for (name, [with_sync, back_to_back]) in names.iter().zip(&samples) {
            let cell = |v: &Vec<f64>| {
                let fastest = v.iter().copied().fold(f64::INFINITY, f64::min);
                format!("{:.2} ({:.2})", median(v.clone()), fastest)
            };
            println!(
                "{name:<32} {:>17} {:>17}",
                cell(with_sync),
                cell(back_to_back)
            );
        }
    }
    Ok(())
}

/// Microseconds per call of LATENCY_CALLS calls, each followed by a stream sync or not;
/// generic so that every variant is called directly, as its users would.
fn time_calls(
    sync_each: bool,
    sync: &impl Fn() -> Result<(), String>,
    mut call: impl FnMut() -> bool,
) -> Fallible<f64> {
    let start = Instant::now();
    for _ in 0..LATENCY_CALLS {
        if !call() {
            return Err("an all_reduce failed".into());
        }
        if sync_each {
            sync()?;
        }
    }
    sync()?;
    Ok(start.elapsed().as_secs_f64() * 1e6 / LATENCY_CALLS as f64)
}
