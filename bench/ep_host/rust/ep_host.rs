//! The host cost of one NCCL EP dispatch and combine through `ncclbind::ep` (`Handle::dispatch`
//! / `Handle::combine`, release build), over the stand-in libnccl_ep (tests/python/fake_nccl_ep.c)
//! and libnccl (fake_nccl.c) that NCCLBIND_NCCL_EP_PATH and NCCLBIND_NCCL_PATH name
//! (bench/ep_host/run.sh builds them):
//!
//!   ep_host rust N
//!
//! The calls are tests/multigpu/ep/rust/ep_ranks.rs's for LL expert-major (the tensor sets built
//! per call, borrowing tensors made once) at the decode size of its bench, rank 0 of 2, host
//! memory standing in for device memory. A warm-up of N / 10 pairs, then N dispatches timed as
//! one and N combines timed as one (`Instant`, monotonic); one line for rounds.py:
//!   EP_HOST {"layer": "rust", "n": N, "dispatch_ns": 123.4, "combine_ns": 98.7}

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use ncclbind::ep::{
    CombineInputs, CombineOutputs, DispatchInputs, DispatchOutputs, Group, GroupConfig, Handle,
    LayoutInfo, Tensor,
};
use ncclbind::sys::nccl_ep::{ncclEpAlgorithm_t, ncclEpLayout_t};
use ncclbind::{Communicator, DeviceSlice, DeviceSliceMut, Stream, UniqueId, BF16};

// tests/multigpu/ep/python/ep_bench.py's decode size; 2 ranks as on 2x H200: the stand-in moves
// data for a one-rank group (14 MiB per dispatch here), for two it only checks the arguments.
const TOKENS: usize = 128;
const HIDDEN: usize = 7168;
const TOPK: usize = 8;
const EXPERTS: usize = 256;
const NRANKS: usize = 2;
const LOCAL: usize = EXPERTS / NRANKS;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// The stand-in's `fakeEpSetNranks(NRANKS)` and `fakeEpSetLogging(0)`, on the copy the runtime
/// loads (the same path: the same object).
fn configure_stand_in() {
    let path = std::env::var_os("NCCLBIND_NCCL_EP_PATH")
        .expect("NCCLBIND_NCCL_EP_PATH names the stand-in libnccl_ep (bench/ep_host/run.sh)");
    let path = CString::new(path.as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; RTLD_NOW (2).
    let library = unsafe { dlopen(path.as_ptr(), 2) };
    assert!(!library.is_null(), "dlopen {path:?} failed");
    for (name, value) in [
        (c"fakeEpSetNranks", NRANKS as c_int),
        (c"fakeEpSetLogging", 0),
    ] {
        // SAFETY: an open library and a NUL-terminated name.
        let symbol = unsafe { dlsym(library, name.as_ptr()) };
        assert!(!symbol.is_null(), "the stand-in lacks {name:?}");
        // SAFETY: both are fake_nccl_ep.c's `void f(int)`.
        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int)>(symbol)(value) };
    }
}

/// Host memory standing in for device memory (the stand-in never touches it at two ranks).
fn view<T>(data: &[T]) -> DeviceSlice<'_, T>
where
    T: ncclbind::DataType,
{
    // SAFETY: the stand-in reads no data here; `data` outlives the view.
    unsafe { DeviceSlice::from_raw_parts(data.as_ptr(), data.len()).unwrap() }
}

fn view_mut<T>(data: &mut [T]) -> DeviceSliceMut<'_, T>
where
    T: ncclbind::DataType,
{
    // SAFETY: as above.
    unsafe { DeviceSliceMut::from_raw_parts(data.as_mut_ptr(), data.len()).unwrap() }
}

struct Tensors<'a> {
    x: Tensor<'a>,
    recv: Tensor<'a>,
    counts: Tensor<'a>,
    weights: Tensor<'a>,
    combined: Tensor<'a>,
}

// ep_ranks.rs's dispatch and combine for LL.
#[inline(never)]
fn dispatch_loop(handle: &Handle<'_>, t: &Tensors<'_>, stream: Stream, n: usize) {
    for _ in 0..n {
        handle
            .dispatch(
                &DispatchInputs {
                    tokens: Some(&t.x),
                    ..Default::default()
                },
                &DispatchOutputs {
                    tokens: Some(&t.recv),
                    ..Default::default()
                },
                Some(&LayoutInfo {
                    expert_counters: Some(&t.counts),
                    ..LayoutInfo::default()
                }),
                None,
                stream,
            )
            .expect("ncclEpDispatch");
    }
}

#[inline(never)]
fn combine_loop(handle: &Handle<'_>, t: &Tensors<'_>, stream: Stream, n: usize) {
    for _ in 0..n {
        handle
            .combine(
                &CombineInputs {
                    tokens: Some(&t.recv),
                    ..Default::default()
                },
                &CombineOutputs {
                    tokens: Some(&t.combined),
                    topk_weights: Some(&t.weights),
                },
                None,
                stream,
            )
            .expect("ncclEpCombine");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("rust"), Some(n)) => n.parse().unwrap_or(0),
        _ => 0,
    };
    if n == 0 {
        eprintln!("usage: ep_host rust N");
        std::process::exit(2);
    }
    configure_stand_in();
    let comm = Communicator::init_rank(NRANKS as i32, &UniqueId::new().unwrap(), 0).unwrap();
    let group = Group::create(
        &comm,
        &GroupConfig {
            algorithm: ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
            num_experts: EXPERTS as u32,
            max_dispatch_tokens_per_rank: TOKENS as u32,
            max_token_bytes: (HIDDEN * 2) as u32,
            ..GroupConfig::default()
        },
    )
    .unwrap();
    let routing: Vec<i64> = (0..TOKENS * TOPK)
        .map(|i| ((i * 37) % EXPERTS) as i64)
        .collect();
    let x = vec![BF16(0); TOKENS * HIDDEN];
    let mut recv = vec![BF16(0); LOCAL * NRANKS * TOKENS * HIDDEN];
    let mut counts = vec![0i32; LOCAL];
    let weights = vec![0f32; TOKENS * TOPK];
    let mut combined = vec![BF16(0); TOKENS * HIDDEN];
    let (routing_view, x_view, weights_view) = (view(&routing), view(&x), view(&weights));
    let (mut recv_view, mut counts_view, mut combined_view) = (
        view_mut(&mut recv),
        view_mut(&mut counts),
        view_mut(&mut combined),
    );
    let device = group.device();
    let routing_t = Tensor::new(&routing_view, &[TOKENS, TOPK], device).unwrap();
    let t = Tensors {
        x: Tensor::new(&x_view, &[TOKENS, HIDDEN], device).unwrap(),
        recv: Tensor::new_mut(&mut recv_view, &[LOCAL, NRANKS * TOKENS, HIDDEN], device).unwrap(),
        counts: Tensor::new_mut(&mut counts_view, &[LOCAL], device).unwrap(),
        weights: Tensor::new(&weights_view, &[TOKENS, TOPK], device).unwrap(),
        combined: Tensor::new_mut(&mut combined_view, &[TOKENS, HIDDEN], device).unwrap(),
    };
    let stream = Stream::LEGACY_DEFAULT;
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &routing_t,
            None,
            None,
            stream,
        )
        .unwrap();
    for _ in 0..n / 10 + 1 {
        dispatch_loop(&handle, &t, stream, 1);
        combine_loop(&handle, &t, stream, 1);
    }
    let t0 = Instant::now();
    dispatch_loop(&handle, &t, stream, n);
    let t1 = Instant::now();
    combine_loop(&handle, &t, stream, n);
    let t2 = Instant::now();
    let per_call = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "EP_HOST {{\"layer\": \"rust\", \"n\": {n}, \"dispatch_ns\": {:.1}, \"combine_ns\": {:.1}}}",
        per_call(t1 - t0),
        per_call(t2 - t1)
    );
    handle.destroy().unwrap();
    drop(t);
    drop(routing_t);
    group.destroy().unwrap();
    comm.destroy().unwrap();
}
