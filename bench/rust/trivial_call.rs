//! The cost of one trivial NCCL call, ncclGetVersion, four ways in one run (CPU only):
//!   direct     NCCL's function through a plain function pointer (what C linked to libnccl does)
//!   sys        the generated wrapper nb_ncclGetVersion: one atomic slot load, then the call
//!   checked    sys + ncclbind::check on the result (what the safe crate does per call)
//!   safe       ncclbind::nccl_version(): the above plus decoding the version code
//! Prints the median ns/call over ROUNDS rounds of NCCLBIND_BENCH_CALLS calls (default 10M).
//! Under callgrind, the loops are the functions loop_direct, loop_sys, loop_checked, loop_safe.

#[path = "direct_nccl.rs"]
mod direct_nccl;

use std::ffi::c_int;
use std::hint::black_box;
use std::time::Instant;

use direct_nccl::{median, nccl_entry_point};
use ncclbind::sys::nccl::{ncclGetVersion, ncclResult_t};
use ncclbind::{check, library_info, nccl_version, Library};

const ROUNDS: usize = 7;

type GetVersion = unsafe extern "C" fn(*mut c_int) -> ncclResult_t;

#[inline(never)]
fn loop_direct(calls: u64, get_version: GetVersion) -> c_int {
    let mut version = 0;
    for _ in 0..calls {
        unsafe { black_box(get_version)(black_box(&mut version)) };
    }
    version
}

#[inline(never)]
fn loop_sys(calls: u64) -> c_int {
    let mut version = 0;
    for _ in 0..calls {
        unsafe { ncclGetVersion(black_box(&mut version)) };
    }
    version
}

#[inline(never)]
fn loop_checked(calls: u64) -> c_int {
    let mut version = 0;
    for _ in 0..calls {
        check("ncclGetVersion", unsafe {
            ncclGetVersion(black_box(&mut version))
        })
        .unwrap();
    }
    version
}

#[inline(never)]
fn loop_safe(calls: u64) -> u32 {
    let mut minor = 0;
    for _ in 0..calls {
        minor = black_box(nccl_version().unwrap()).minor;
    }
    minor
}

/// ns per call of each loop: the median over ROUNDS rounds, the loops interleaved in each
/// round so that a noisy neighbour or a clock change hits them alike.
fn ns_per_call<const N: usize>(calls: u64, loops: [&dyn Fn(); N]) -> [f64; N] {
    let mut samples: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for _ in 0..ROUNDS {
        for (run, samples) in loops.iter().zip(&mut samples) {
            let start = Instant::now();
            run();
            samples.push(start.elapsed().as_nanos() as f64 / calls as f64);
        }
    }
    samples.map(median)
}

fn main() {
    let calls: u64 =
        std::env::var("NCCLBIND_BENCH_CALLS").map_or(10_000_000, |n| n.parse().unwrap());
    let info = library_info(Library::Nccl).expect("libnccl loads");
    let get_version: GetVersion =
        unsafe { std::mem::transmute(nccl_entry_point("ncclGetVersion")) };
    assert_eq!(loop_direct(1, get_version), info.version_code);
    assert_eq!(loop_sys(1), info.version_code);

    println!(
        "ncclGetVersion, libnccl {} ({}), {calls} calls x {ROUNDS} rounds, median:",
        info.version,
        info.path.display()
    );
    let [direct, sys, checked, safe] = ns_per_call(
        calls,
        [
            &|| {
                black_box(loop_direct(calls, get_version));
            },
            &|| {
                black_box(loop_sys(calls));
            },
            &|| {
                black_box(loop_checked(calls));
            },
            &|| {
                black_box(loop_safe(calls));
            },
        ],
    );
    println!("  direct   {direct:6.2} ns/call");
    println!(
        "  sys      {sys:6.2} ns/call  ({:+.2} ns over direct)",
        sys - direct
    );
    println!(
        "  checked  {checked:6.2} ns/call  ({:+.2} ns over direct)",
        checked - direct
    );
    println!(
        "  safe     {safe:6.2} ns/call  ({:+.2} ns over direct)",
        safe - direct
    );
}
