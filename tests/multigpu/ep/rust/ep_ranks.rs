//! NCCL EP through the safe crate (ncclbind::ep) on every GPU, the counterpart of
//! tests/multigpu/ep/c/ep_ranks.c: one process per GPU (this program starts them: itself again,
//! with its rank in the environment), the unique id shared through a file. Low-latency
//! (expert-major) and high-throughput (flat) dispatch then combine at three sizes in bf16 and
//! f32, checked against a CPU reference: every received token (its rank, index, elements) and
//! the expert it reached, the counters, HT's received expert ids and weights, and the combined
//! weighted sums. With --bench: the median and 10th percentile of each dispatch and combine
//! (wall clock around the call and a stream synchronize, as the C program measures), printed
//! by rank 0 as `BENCH {"layer": "rust", ...}`, and the same for the generated raw calls with
//! the same records, interleaved per iteration in the same process (`"layer": "rust_raw"`).
//!
//!   ep_ranks [NRANKS] [--bench]      NRANKS: default every GPU
//!
//! Environment: NCCLBIND_NCCL_PATH, NCCLBIND_NCCL_EP_PATH, NCCLBIND_CUDART_PATH,
//! NCCLBIND_EP_SIZES ("T,H,K,E;..." replaces the sizes). Without a GPU it prints "SKIPPED: ..."
//! and exits 0. Build here with build.sh, run on the GPU machine with run.sh.

#[allow(dead_code)]
#[path = "../../../rust/cuda_runtime.rs"]
mod cuda_runtime;

use std::cell::Cell;
use std::collections::HashSet;
use std::env;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cuda_runtime::{CudaRuntime, RawStream};
use ncclbind::ep::{
    CombineInputs, CombineOutputs, DispatchInputs, DispatchOutputs, Group, GroupConfig, Handle,
    LayoutInfo, Tensor,
};
use ncclbind::sys::nccl_ep::{
    ncclEpAlgorithm_t, ncclEpCombine, ncclEpCombineInputs_t, ncclEpCombineOutputs_t,
    ncclEpDispatch, ncclEpDispatchInputs_t, ncclEpDispatchOutputs_t, ncclEpExpertIdKind_t,
    ncclEpLayoutInfo_t, ncclEpLayout_t, NCCL_EP_COMBINE_INPUTS_INIT, NCCL_EP_COMBINE_OUTPUTS_INIT,
    NCCL_EP_DISPATCH_INPUTS_INIT, NCCL_EP_DISPATCH_OUTPUTS_INIT, NCCL_EP_LAYOUT_INFO_INIT,
};
use ncclbind::{Communicator, DataType, DeviceSlice, DeviceSliceMut, Stream, UniqueId, BF16};

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

const RANK_VAR: &str = "NCCLBIND_EP_RANK";
const NRANKS_VAR: &str = "NCCLBIND_EP_NRANKS";
const ID_FILE_VAR: &str = "NCCLBIND_EP_ID_FILE";

// ---- Element types -------------------------------------------------------------------------

trait Elem: DataType + Copy + Default {
    const NAME: &'static str;
    /// bf16 sums are compared with a relative tolerance; f32 nearly exactly.
    const TOLERANCE: f64;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Elem for f32 {
    const NAME: &'static str = "fp32";
    const TOLERANCE: f64 = 1e-5;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Elem for BF16 {
    const NAME: &'static str = "bf16";
    const TOLERANCE: f64 = 2e-2;
    fn from_f64(v: f64) -> Self {
        let u = (v as f32).to_bits();
        BF16(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) as u16) // round to nearest even
    }
    fn to_f64(self) -> f64 {
        f32::from_bits((self.0 as u32) << 16) as f64
    }
}

// ---- The problem every rank can recompute (as ep_ranks.c) -------------------------------------

#[derive(Clone, Copy, Debug)]
struct Shape {
    tokens: usize,
    hidden: usize,
    topk: usize,
    experts: usize,
}

fn token_value(src: usize, t: usize, h: usize) -> f64 {
    match h {
        0 => (src + 1) as f64,
        1 => (t + 1) as f64,
        _ => ((src * 131 + t * 17 + h * 7) % 29) as f64 - 14.0,
    }
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

/// topk distinct experts of token t of rank src (the same draw as ep_ranks.c).
fn routing(s: &Shape, seed: u64, src: usize, t: usize) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::with_capacity(s.topk);
    for k in 0..s.topk {
        let draw = mix(seed * 1000003 + src as u64 * 7919 + t as u64 * 131 + k as u64);
        let mut e = (draw % s.experts as u64) as i64;
        while out.contains(&e) {
            e = (e + 1) % s.experts as i64;
        }
        out.push(e);
    }
    out
}

fn weight(s: &Shape, k: usize) -> f64 {
    (k + 1) as f64 / (s.topk * (s.topk + 1) / 2) as f64
}

fn expert_factor(e: i64) -> f64 {
    (e % 7 + 1) as f64
}

// ---- Device memory ------------------------------------------------------------------------------

struct Buffer<'c, T> {
    cuda: &'c CudaRuntime,
    ptr: *mut T,
    len: usize,
}

impl<'c, T: Copy + Default> Buffer<'c, T> {
    fn upload(cuda: &'c CudaRuntime, host: &[T]) -> Fallible<Buffer<'c, T>> {
        let ptr = cuda.alloc::<T>(host.len().max(1))?;
        cuda.copy_to_device(ptr, host)?;
        Ok(Buffer {
            cuda,
            ptr,
            len: host.len(),
        })
    }
    fn zeros(cuda: &'c CudaRuntime, len: usize) -> Fallible<Buffer<'c, T>> {
        Self::upload(cuda, &vec![T::default(); len])
    }
    fn download(&self, len: usize) -> Fallible<Vec<T>> {
        let mut host = vec![T::default(); len];
        self.cuda.copy_to_host(&mut host, self.ptr)?;
        Ok(host)
    }
    fn slice(&self) -> DeviceSlice<'_, T>
    where
        T: DataType,
    {
        // SAFETY: `len` elements of device memory, freed only on drop.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len).expect("a cudaMalloc pointer") }
    }
    fn slice_mut(&mut self) -> DeviceSliceMut<'_, T>
    where
        T: DataType,
    {
        // SAFETY: as above.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, self.len).expect("a cudaMalloc pointer") }
    }
}

impl<T> Drop for Buffer<'_, T> {
    fn drop(&mut self) {
        let _ = self.cuda.free(self.ptr);
    }
}

// ---- One rank ----------------------------------------------------------------------------------

struct Rank {
    rank: usize,
    nranks: usize,
    cuda: CudaRuntime,
    stream: RawStream,
    checks: Cell<usize>,
    failures: Cell<usize>,
}

impl Rank {
    fn check(&self, ok: bool, what: impl FnOnce() -> String) {
        self.checks.set(self.checks.get() + 1);
        if !ok {
            self.failures.set(self.failures.get() + 1);
            if self.failures.get() <= 20 {
                eprintln!("rank {}: FAIL {}", self.rank, what());
            }
        }
    }

    /// Waits for the stream after the NCCL EP call `after` names, so that a device fault is
    /// reported with the call whose kernel it followed.
    fn sync(&self, after: &str) -> Fallible<()> {
        // A failed synchronize is a device fault, sticky: nothing after it can work, and dropping
        // the handle and group would call ncclEpHandleDestroy/ncclEpGroupDestroy, where libnccl_ep
        // 0.2.0 throws a C++ exception (its CUDA frees fail) that Rust cannot catch ("fatal runtime
        // error: Rust cannot catch foreign exceptions"). So the rank ends here, as ep_ranks.c does.
        if let Err(e) = self.cuda.synchronize(self.stream) {
            eprintln!("rank {}: FAIL stream synchronize after {after}: {e} (a device fault; exiting without destroying NCCL EP objects)", self.rank);
            std::process::exit(3);
        }
        Ok(())
    }

    fn stream(&self) -> Stream {
        // SAFETY: a live stream of this rank's device, destroyed after every call on it.
        unsafe {
            Stream::from_raw(self.stream.cast()).expect("cudaStreamCreate gives a non-null stream")
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Algo {
    Ll,
    Ht,
}

impl Algo {
    fn name(self) -> &'static str {
        match self {
            Algo::Ll => "ll",
            Algo::Ht => "ht",
        }
    }
}

struct Case {
    algo: Algo,
    s: Shape,
    seed: u64,
}

impl Case {
    fn label<T: Elem>(&self) -> String {
        format!(
            "{} {} tokens={} hidden={} topk={} experts={}{}",
            self.algo.name().to_uppercase(),
            T::NAME,
            self.s.tokens,
            self.s.hidden,
            self.s.topk,
            self.s.experts,
            if self.algo == Algo::Ht {
                format!(" recv={}", ht_recv_mode())
            } else {
                String::new()
            }
        )
    }
}

/// Everything one case allocates, and the routing of every rank.
struct Problem<'c, T> {
    all_topk: Vec<Vec<Vec<i64>>>, // [src][t][k]
    x: Buffer<'c, T>,
    topk: Buffer<'c, i64>,
    weights: Buffer<'c, f32>,
    recv: Buffer<'c, T>,
    recv_weights: Buffer<'c, f32>,
    recv_topk: Buffer<'c, i64>,
    counts: Buffer<'c, i32>,
    total: Buffer<'c, i32>,
    combined: Buffer<'c, T>,
    local_experts: usize,
    recv_slots: usize,
}

fn problem<'c, T: Elem>(r: &'c Rank, case: &Case) -> Fallible<Problem<'c, T>> {
    let s = &case.s;
    let cuda = &r.cuda;
    let all_topk: Vec<Vec<Vec<i64>>> = (0..r.nranks)
        .map(|src| {
            (0..s.tokens)
                .map(|t| routing(s, case.seed, src, t))
                .collect()
        })
        .collect();
    let x: Vec<T> = (0..s.tokens * s.hidden)
        .map(|i| T::from_f64(token_value(r.rank, i / s.hidden, i % s.hidden)))
        .collect();
    let topk: Vec<i64> = all_topk[r.rank].iter().flatten().copied().collect();
    let weights: Vec<f32> = (0..s.tokens * s.topk)
        .map(|i| weight(s, i % s.topk) as f32)
        .collect();
    let local_experts = s.experts / r.nranks;
    let recv_slots = match (case.algo, ht_recv_mode()) {
        (Algo::Ht, "topk") => r.nranks * s.tokens * s.topk,
        _ => r.nranks * s.tokens,
    };
    let recv_len = match case.algo {
        Algo::Ll => local_experts * recv_slots * s.hidden,
        Algo::Ht => recv_slots * s.hidden,
    };
    Ok(Problem {
        x: Buffer::upload(cuda, &x)?,
        topk: Buffer::upload(cuda, &topk)?,
        weights: Buffer::upload(cuda, &weights)?,
        recv: Buffer::zeros(cuda, recv_len)?,
        recv_weights: Buffer::zeros(cuda, recv_slots * s.topk)?,
        recv_topk: Buffer::zeros(cuda, recv_slots * s.topk)?,
        counts: Buffer::zeros(cuda, local_experts)?,
        total: Buffer::zeros(cuda, 1)?,
        combined: Buffer::zeros(cuda, s.tokens * s.hidden)?,
        all_topk,
        local_experts,
        recv_slots,
    })
}

/// HT's receive budget, NCCLBIND_EP_HT_RECV, as in ep_ranks.c's setup(): "eager" (the default,
/// nccl.ep's own: NCCL_EP_AUTO, outputs of nRanks * tokens rows, never fewer than the routing's
/// recv_total_counter), "rank" (explicit nRanks * tokens: tripped ht_ep.cuh:1528 on 2x H200 with
/// 0.2.0) or "topk" (explicit nRanks * tokens * top_k, the library's own eager formula).
fn ht_recv_mode() -> &'static str {
    static MODE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    MODE.get_or_init(|| match env::var("NCCLBIND_EP_HT_RECV").as_deref() {
        Ok("rank") => "rank",
        Ok("topk") => "topk",
        Ok("eager") | Ok("") | Err(_) => "eager",
        Ok(other) => {
            eprintln!("NCCLBIND_EP_HT_RECV must be eager, rank or topk, not {other}");
            std::process::exit(2);
        }
    })
}

fn group_config<T: Elem>(case: &Case, recv_slots: usize) -> GroupConfig {
    GroupConfig {
        algorithm: match case.algo {
            Algo::Ll => ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
            Algo::Ht => ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT,
        },
        num_experts: case.s.experts as u32,
        max_dispatch_tokens_per_rank: case.s.tokens as u32,
        // 0 is NCCL_EP_AUTO: LL's only value, HT's eager mode (see ht_recv_mode).
        max_recv_tokens_per_rank: if case.algo == Algo::Ht && ht_recv_mode() != "eager" {
            recv_slots as u32
        } else {
            0
        },
        max_token_bytes: (case.s.hidden * size_of::<T>()).div_ceil(16) as u32 * 16,
        ..GroupConfig::default()
    }
}

/// The tensors of one case over its buffers (the shapes of ep_ranks.c).
struct Tensors<'p> {
    x: Tensor<'p>,
    topk: Tensor<'p>,
    weights: Tensor<'p>,
    recv: Tensor<'p>,
    recv_weights: Option<Tensor<'p>>,
    recv_topk: Option<Tensor<'p>>,
    counts: Tensor<'p>,
    total: Option<Tensor<'p>>,
    combined: Tensor<'p>,
}

struct Views<'b, T> {
    x: DeviceSlice<'b, T>,
    topk: DeviceSlice<'b, i64>,
    weights: DeviceSlice<'b, f32>,
    recv: DeviceSliceMut<'b, T>,
    recv_weights: DeviceSliceMut<'b, f32>,
    recv_topk: DeviceSliceMut<'b, i64>,
    counts: DeviceSliceMut<'b, i32>,
    total: DeviceSliceMut<'b, i32>,
    combined: DeviceSliceMut<'b, T>,
}

fn views<'b, T: Elem>(p: &'b mut Problem<'_, T>) -> Views<'b, T> {
    Views {
        x: p.x.slice(),
        topk: p.topk.slice(),
        weights: p.weights.slice(),
        recv: p.recv.slice_mut(),
        recv_weights: p.recv_weights.slice_mut(),
        recv_topk: p.recv_topk.slice_mut(),
        counts: p.counts.slice_mut(),
        total: p.total.slice_mut(),
        combined: p.combined.slice_mut(),
    }
}

fn tensors<'v, T: Elem>(
    v: &'v mut Views<'_, T>,
    case: &Case,
    local_experts: usize,
    recv_slots: usize,
    device: i32,
) -> Fallible<Tensors<'v>> {
    let s = &case.s;
    let ht = case.algo == Algo::Ht;
    let recv_shape: Vec<usize> = if ht {
        vec![recv_slots, s.hidden]
    } else {
        vec![local_experts, recv_slots, s.hidden]
    };
    Ok(Tensors {
        x: Tensor::new(&v.x, &[s.tokens, s.hidden], device)?,
        topk: Tensor::new(&v.topk, &[s.tokens, s.topk], device)?,
        weights: Tensor::new(&v.weights, &[s.tokens, s.topk], device)?,
        recv: Tensor::new_mut(&mut v.recv, &recv_shape, device)?,
        recv_weights: if ht {
            Some(Tensor::new_mut(
                &mut v.recv_weights,
                &[recv_slots, s.topk],
                device,
            )?)
        } else {
            None
        },
        recv_topk: if ht {
            Some(Tensor::new_mut(
                &mut v.recv_topk,
                &[recv_slots, s.topk],
                device,
            )?)
        } else {
            None
        },
        counts: Tensor::new_mut(&mut v.counts, &[local_experts], device)?,
        total: if ht {
            Some(Tensor::new_mut(&mut v.total, &[1], device)?)
        } else {
            None
        },
        combined: Tensor::new_mut(&mut v.combined, &[s.tokens, s.hidden], device)?,
    })
}

fn create_handle<'g>(
    group: &'g Group<'_>,
    case: &Case,
    t: &Tensors<'_>,
    stream: Stream,
) -> Fallible<Handle<'g>> {
    Ok(match case.algo {
        Algo::Ll => group.create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &t.topk,
            None,
            None,
            stream,
        )?,
        Algo::Ht => {
            let info = LayoutInfo {
                expert_counters: Some(&t.counts),
                recv_total_counter: t.total.as_ref(),
                recv_topk_idx_kind: ncclEpExpertIdKind_t::NCCL_EP_EXPERT_ID_LOCAL,
                ..LayoutInfo::default()
            };
            group.create_handle(
                ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT,
                &t.topk,
                Some(&info),
                None,
                stream,
            )?
        }
    })
}

fn dispatch(handle: &Handle<'_>, case: &Case, t: &Tensors<'_>, stream: Stream) -> Fallible<()> {
    match case.algo {
        Algo::Ll => handle.dispatch(
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
        )?,
        Algo::Ht => handle.dispatch(
            &DispatchInputs {
                tokens: Some(&t.x),
                topk_weights: Some(&t.weights),
                ..Default::default()
            },
            &DispatchOutputs {
                tokens: Some(&t.recv),
                topk_weights: t.recv_weights.as_ref(),
                topk_idx: t.recv_topk.as_ref(),
                ..Default::default()
            },
            None,
            None,
            stream,
        )?,
    }
    Ok(())
}

fn combine(handle: &Handle<'_>, case: &Case, t: &Tensors<'_>, stream: Stream) -> Fallible<()> {
    let weights = if case.algo == Algo::Ll {
        Some(&t.weights)
    } else {
        None
    }; // LL applies them on receive
    handle.combine(
        &CombineInputs {
            tokens: Some(&t.recv),
            ..Default::default()
        },
        &CombineOutputs {
            tokens: Some(&t.combined),
            topk_weights: weights,
        },
        None,
        stream,
    )?;
    Ok(())
}

fn identify<T: Elem>(rows: &[T], row: usize, s: &Shape, nranks: usize) -> Option<(usize, usize)> {
    let base = row * s.hidden;
    let src = rows[base].to_f64() as i64 - 1;
    let t = rows[base + 1].to_f64() as i64 - 1;
    if src < 0 || src as usize >= nranks || t < 0 || t as usize >= s.tokens {
        return None;
    }
    let (src, t) = (src as usize, t as usize);
    (0..s.hidden)
        .all(|h| rows[base + h].to_f64() == token_value(src, t, h))
        .then_some((src, t))
}

/// The experts' work on the received rows, written back as combine's input; checks dispatch.
#[allow(clippy::needless_range_loop)]
fn check_dispatch_and_compute<T: Elem>(r: &Rank, case: &Case, p: &Problem<'_, T>) -> Fallible<()> {
    let s = case.s;
    let label = case.label::<T>();
    let first = (r.rank * p.local_experts) as i64;
    let routes = |src: usize, t: usize, e: i64| p.all_topk[src][t].contains(&e);
    let counts = p.counts.download(p.local_experts)?;
    match case.algo {
        Algo::Ll => {
            let mut zones = p.recv.download(p.local_experts * p.recv_slots * s.hidden)?;
            for le in 0..p.local_experts {
                let e = first + le as i64;
                let expected = (0..r.nranks)
                    .flat_map(|src| (0..s.tokens).map(move |t| (src, t)))
                    .filter(|&(src, t)| routes(src, t, e))
                    .count();
                let count = counts[le] as usize;
                r.check(count == expected, || {
                    format!(
                        "{label}: expert {e} received {count} tokens, {expected} were sent to it"
                    )
                });
                if count != expected {
                    continue;
                }
                let zone =
                    &mut zones[le * p.recv_slots * s.hidden..(le + 1) * p.recv_slots * s.hidden];
                let mut seen = HashSet::new();
                for i in 0..count {
                    match identify(zone, i, &s, r.nranks) {
                        None => r.check(false, || {
                            format!("{label}: expert {e} row {i} is no token sent")
                        }),
                        Some((src, t)) => {
                            r.check(routes(src, t, e), || format!("{label}: expert {e} got token {t} of rank {src}, routed elsewhere"));
                            r.check(seen.insert((src, t)), || {
                                format!("{label}: expert {e} got token {t} of rank {src} twice")
                            });
                        }
                    }
                }
                for v in &mut zone[..count * s.hidden] {
                    *v = T::from_f64(v.to_f64() * expert_factor(e));
                }
            }
            r.cuda.copy_to_device(p.recv.ptr, &zones)?;
        }
        Algo::Ht => {
            let total = p.total.download(1)?[0] as usize;
            let here = |e: i64| e >= first && e < first + p.local_experts as i64;
            let expected = (0..r.nranks)
                .flat_map(|src| (0..s.tokens).map(move |t| (src, t)))
                .filter(|&(src, t)| p.all_topk[src][t].iter().any(|&e| here(e)))
                .count();
            r.check(total == expected, || {
                format!("{label}: received {total} tokens, {expected} route here")
            });
            for le in 0..p.local_experts {
                let want = (0..r.nranks)
                    .flat_map(|src| (0..s.tokens).map(move |t| (src, t)))
                    .filter(|&(src, t)| routes(src, t, first + le as i64))
                    .count();
                r.check(counts[le] as usize == want, || {
                    format!(
                        "{label}: expert counter {le} is {}, {want} route to it",
                        counts[le]
                    )
                });
            }
            if total != expected {
                return Ok(());
            }
            let mut rows = p.recv.download(p.recv_slots * s.hidden)?;
            let ids = p.recv_topk.download(p.recv_slots * s.topk)?;
            let w = p.recv_weights.download(p.recv_slots * s.topk)?;
            let mut seen = HashSet::new();
            for i in 0..total {
                let Some((src, t)) = identify(&rows, i, &s, r.nranks) else {
                    r.check(false, || format!("{label}: row {i} is no token sent"));
                    continue;
                };
                r.check(seen.insert((src, t)), || {
                    format!("{label}: token {t} of rank {src} received twice")
                });
                // The row's received (local expert id, weight) pairs are those of the sender's
                // top-k that route here, in an order of the library's (0.2.0 lists them by
                // ascending id, then -1 padding): each sent pair received once, the rest -1.
                let row_ids = &ids[i * s.topk..(i + 1) * s.topk];
                let row_w = &w[i * s.topk..(i + 1) * s.topk];
                let mut scale = 0.0;
                let mut routed_here = 0;
                for (k, &e) in p.all_topk[src][t].iter().enumerate() {
                    if !here(e) {
                        continue;
                    }
                    routed_here += 1;
                    let pair = (e - first, weight(&s, k) as f32);
                    let found = row_ids.iter().zip(row_w).any(|(&id, &wt)| (id, wt) == pair);
                    r.check(found, || {
                        format!(
                            "{label}: token {t} of rank {src}: expert {e} (local {}) with weight {} not among its received pairs {row_ids:?} {row_w:?}",
                            pair.0, pair.1
                        )
                    });
                    scale += weight(&s, k) * expert_factor(e);
                }
                let padding = row_ids.iter().filter(|&&id| id == -1).count();
                r.check(padding == s.topk - routed_here, || {
                    format!(
                        "{label}: token {t} of rank {src}: {padding} received ids are -1, expected {}",
                        s.topk - routed_here
                    )
                });
                for h in 0..s.hidden {
                    rows[i * s.hidden + h] = T::from_f64(scale * token_value(src, t, h));
                }
            }
            r.cuda.copy_to_device(p.recv.ptr, &rows)?;
        }
    }
    Ok(())
}

fn check_combined<T: Elem>(r: &Rank, case: &Case, p: &Problem<'_, T>) -> Fallible<()> {
    let s = case.s;
    let label = case.label::<T>();
    let out = p.combined.download(s.tokens * s.hidden)?;
    let (mut bad, mut worst) = (0usize, 0f64);
    for t in 0..s.tokens {
        let scale: f64 = p.all_topk[r.rank][t]
            .iter()
            .enumerate()
            .map(|(k, &e)| weight(&s, k) * expert_factor(e))
            .sum();
        for h in 0..s.hidden {
            let want = scale * token_value(r.rank, t, h);
            let got = out[t * s.hidden + h].to_f64();
            if (got - want).abs() > T::TOLERANCE * (want.abs() + 1.0) || got.is_nan() {
                if bad < 3 {
                    eprintln!("rank {}: FAIL {label}: combined token {t} element {h} is {got}, expected {want}", r.rank);
                }
                bad += 1;
                worst = worst.max((got - want).abs());
            }
        }
    }
    r.check(bad == 0, || {
        format!("{label}: {bad} combined elements wrong (worst error {worst})")
    });
    Ok(())
}

fn run_case<T: Elem>(r: &Rank, comm: &Communicator, case: &Case) -> Fallible<()> {
    let failures_before = r.failures.get();
    let stream = r.stream();
    let mut p = problem::<T>(r, case)?;
    let (local_experts, recv_slots) = (p.local_experts, p.recv_slots);
    let group = Group::create(comm, &group_config::<T>(case, recv_slots))?;
    {
        let mut v = views(&mut p);
        let t = tensors(&mut v, case, local_experts, recv_slots, group.device())?;
        let handle = create_handle(&group, case, &t, stream)?;
        r.sync("ncclEpCreateHandle")?;
        if let Err(error) = dispatch(&handle, case, &t, stream) {
            // NCCL EP 0.2.0's kernels are documented for bf16; a type it refuses before any
            // transfer (ncclInvalidArgument 4 / ncclInvalidUsage 5, on every rank alike) is a
            // SKIP, as in ep_ranks.py and ep_ranks.c.
            let code = error.downcast_ref::<ncclbind::Error>().map(|e| e.code());
            if T::NAME != "bf16" && matches!(code, Some(4) | Some(5)) {
                println!(
                    "rank {}: SKIP {}: NCCL EP refuses it: {error}",
                    r.rank,
                    case.label::<T>()
                );
                drop(t);
                handle.destroy()?;
                group.destroy()?;
                return Ok(());
            }
            return Err(error);
        }
        r.sync("ncclEpDispatch")?;
        // The experts run on the host: the views end here, and begin again for combine.
        drop(t);
        check_dispatch_and_compute(r, case, &p)?;
        let mut v = views(&mut p);
        let t = tensors(&mut v, case, local_experts, recv_slots, group.device())?;
        combine(&handle, case, &t, stream)?;
        r.sync("ncclEpCombine")?;
        drop(t);
        check_combined(r, case, &p)?;
        handle.destroy()?;
    }
    group.destroy()?;
    let passed = r.failures.get() == failures_before;
    if r.rank == 0 || !passed {
        println!(
            "rank {}: {} {}",
            r.rank,
            if passed { "PASS" } else { "FAIL" },
            case.label::<T>()
        );
    }
    Ok(())
}

/// The raw records of one case's dispatch and combine, built once from the same tensors as
/// `dispatch()` and `combine()` pass (what those build on every call, after their checks): the
/// "rust_raw" layer calls the generated `ncclEpDispatch` / `ncclEpCombine` with them, as
/// ep_bench.py's "python_raw" calls the generated Python functions.
struct RawCalls {
    dispatch_in: ncclEpDispatchInputs_t,
    dispatch_out: ncclEpDispatchOutputs_t,
    layout: Option<ncclEpLayoutInfo_t>,
    combine_in: ncclEpCombineInputs_t,
    combine_out: ncclEpCombineOutputs_t,
}

fn raw_calls(case: &Case, t: &Tensors<'_>) -> RawCalls {
    let opt = |tensor: Option<&Tensor<'_>>| tensor.map_or(core::ptr::null_mut(), Tensor::as_raw);
    let mut dispatch_in = NCCL_EP_DISPATCH_INPUTS_INIT();
    dispatch_in.tokens = t.x.as_raw();
    let mut dispatch_out = NCCL_EP_DISPATCH_OUTPUTS_INIT();
    dispatch_out.tokens = t.recv.as_raw();
    let mut combine_in = NCCL_EP_COMBINE_INPUTS_INIT();
    combine_in.tokens = t.recv.as_raw();
    let mut combine_out = NCCL_EP_COMBINE_OUTPUTS_INIT();
    combine_out.tokens = t.combined.as_raw();
    let layout = match case.algo {
        Algo::Ll => {
            let mut info = NCCL_EP_LAYOUT_INFO_INIT();
            info.expert_counters = t.counts.as_raw();
            combine_out.topk_weights = t.weights.as_raw(); // LL applies them on receive
            Some(info)
        }
        Algo::Ht => {
            dispatch_in.topk_weights = t.weights.as_raw();
            dispatch_out.topk_weights = opt(t.recv_weights.as_ref());
            dispatch_out.topk_idx = opt(t.recv_topk.as_ref());
            None
        }
    };
    RawCalls {
        dispatch_in,
        dispatch_out,
        layout,
        combine_in,
        combine_out,
    }
}

/// ncclSuccess, or an error naming the function and the ncclResult_t value it returned.
fn raw_result(function: &str, code: u32) -> Fallible<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{function} returned {code}").into())
    }
}

#[allow(clippy::needless_range_loop)] // `layer` picks the call too, not only the series
fn bench_case<T: Elem>(
    r: &Rank,
    comm: &Communicator,
    case: &Case,
    iterations: usize,
) -> Fallible<()> {
    let stream = r.stream();
    let mut p = problem::<T>(r, case)?;
    let (local_experts, recv_slots) = (p.local_experts, p.recv_slots);
    let group = Group::create(comm, &group_config::<T>(case, recv_slots))?;
    let mut v = views(&mut p);
    let t = tensors(&mut v, case, local_experts, recv_slots, group.device())?;
    let handle = create_handle(&group, case, &t, stream)?;
    let raw = raw_calls(case, &t);
    // [layer][phase]: layer 0 ncclbind::ep, 1 the raw generated calls; interleaved per iteration,
    // in an order that alternates (as ep_bench.py rotates its layers), so neither layer always
    // follows the other.
    let mut times: [[Vec<f64>; 2]; 2] = Default::default();
    for i in 0..iterations + 10 {
        for k in 0..2 {
            let layer = (i + k) % 2;
            let t0 = Instant::now();
            if layer == 0 {
                dispatch(&handle, case, &t, stream)?;
            } else {
                let layout = raw
                    .layout
                    .as_ref()
                    .map_or(core::ptr::null(), |info| info as *const _);
                // SAFETY: the handle and every tensor the records point at are live for the whole
                // loop (the same ones dispatch() passes, checked by its first call); config is NULL.
                raw_result(
                    "ncclEpDispatch",
                    unsafe {
                        ncclEpDispatch(
                            handle.as_raw(),
                            &raw.dispatch_in,
                            &raw.dispatch_out,
                            layout,
                            core::ptr::null(),
                            stream.as_raw(),
                        )
                    }
                    .0,
                )?;
            }
            r.sync("ncclEpDispatch")?;
            let t1 = Instant::now();
            if layer == 0 {
                combine(&handle, case, &t, stream)?;
            } else {
                // SAFETY: as for the dispatch above.
                raw_result(
                    "ncclEpCombine",
                    unsafe {
                        ncclEpCombine(
                            handle.as_raw(),
                            &raw.combine_in,
                            &raw.combine_out,
                            core::ptr::null(),
                            stream.as_raw(),
                        )
                    }
                    .0,
                )?;
            }
            r.sync("ncclEpCombine")?;
            let t2 = Instant::now();
            if i >= 10 {
                times[layer][0].push((t1 - t0).as_secs_f64() * 1e6);
                times[layer][1].push((t2 - t1).as_secs_f64() * 1e6);
            }
        }
    }
    for (layer, name) in ["rust", "rust_raw"].iter().enumerate() {
        for (phase, series) in ["dispatch", "combine"].iter().zip(times[layer].iter_mut()) {
            series.sort_by(f64::total_cmp);
            if r.rank == 0 {
                println!(
                    "BENCH {{\"layer\": \"{name}\", \"algo\": \"{}\", \"phase\": \"{phase}\", \"tokens\": {}, \"hidden\": {}, \
                     \"topk\": {}, \"experts\": {}, \"dtype\": \"{}\", \"us_median\": {:.1}, \"us_p10\": {:.1}}}",
                    case.algo.name(),
                    case.s.tokens,
                    case.s.hidden,
                    case.s.topk,
                    case.s.experts,
                    T::NAME,
                    series[series.len() / 2],
                    series[series.len() / 10]
                );
            }
        }
    }
    handle.destroy()?;
    drop(t);
    group.destroy()?;
    Ok(())
}

fn sizes(bench: bool) -> Vec<Shape> {
    let shape = |tokens, hidden, topk, experts| Shape {
        tokens,
        hidden,
        topk,
        experts,
    };
    if let Ok(list) = env::var("NCCLBIND_EP_SIZES") {
        let parsed: Vec<Shape> = list
            .split(';')
            .filter_map(|entry| {
                let n: Vec<usize> = entry
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .collect();
                (n.len() == 4).then(|| shape(n[0], n[1], n[2], n[3]))
            })
            .collect();
        if !parsed.is_empty() {
            return parsed;
        }
    }
    if bench {
        // The sizes of tests/multigpu/ep/python/ep_bench.py (bench_cases picks them per algorithm).
        vec![
            shape(128, 7168, 8, 256),
            shape(32, 7168, 8, 256),
            shape(128, 2048, 4, 64),
            shape(4096, 7168, 8, 256),
        ]
    } else {
        vec![
            shape(8, 2048, 2, 16),
            shape(64, 4096, 4, 64),
            shape(128, 7168, 8, 256),
        ]
    }
}

/// Whether ep_bench.py measures this size for this algorithm (LL: decode sizes; HT: 128 and
/// 4096 tokens of hidden 7168, top-8 of 256).
fn benched(algo: Algo, s: &Shape) -> bool {
    let key = (s.tokens, s.hidden, s.topk, s.experts);
    match algo {
        Algo::Ll => matches!(
            key,
            (128, 7168, 8, 256) | (32, 7168, 8, 256) | (128, 2048, 4, 64)
        ),
        Algo::Ht => matches!(key, (128, 7168, 8, 256) | (4096, 7168, 8, 256)),
    }
}

fn run_rank(rank: usize, nranks: usize, id_file: &str, bench: bool) -> Fallible<bool> {
    let cuda = CudaRuntime::load()?;
    cuda.set_device(rank as i32)?;
    let id = if rank == 0 {
        let id = UniqueId::new()?;
        let tmp = format!("{id_file}.tmp");
        std::fs::write(&tmp, id.as_bytes())?;
        std::fs::rename(&tmp, id_file)?;
        id
    } else {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(bytes) = std::fs::read(id_file) {
                if let Ok(bytes) = bytes.try_into() {
                    break UniqueId::from_bytes(bytes);
                }
            }
            if Instant::now() > deadline {
                return Err(format!("rank {rank}: no unique id in {id_file}").into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let ep_version = ncclbind::ep::get_version()?; // first: a too-old libnccl is explained here
    let comm = Communicator::init_rank(nranks as i32, &id, rank as i32)?;
    let stream = cuda.create_stream()?;
    if rank == 0 {
        println!(
            "libnccl {}, libnccl_ep {ep_version}, {nranks} ranks",
            ncclbind::nccl_version()?
        );
    }
    let r = Rank {
        rank,
        nranks,
        cuda,
        stream,
        checks: Cell::new(0),
        failures: Cell::new(0),
    };
    let mut seed = 1;
    for algo in [Algo::Ll, Algo::Ht] {
        for s in sizes(bench) {
            for dtype in if bench {
                &["bf16"][..]
            } else {
                &["bf16", "fp32"][..]
            } {
                let case = Case { algo, s, seed };
                seed += 1;
                if bench && env::var("NCCLBIND_EP_SIZES").is_err() && !benched(algo, &s) {
                    continue;
                }
                // NCCLBIND_EP_ALGOS: "ll" or "ht" runs only that algorithm.
                if env::var("NCCLBIND_EP_ALGOS").is_ok_and(|a| !a.is_empty() && a != algo.name()) {
                    continue;
                }
                if s.experts % nranks != 0 {
                    if rank == 0 {
                        println!(
                            "SKIP {}: experts not a multiple of {nranks} ranks",
                            case.label::<f32>()
                        );
                    }
                    continue;
                }
                match (*dtype, bench) {
                    ("bf16", false) => run_case::<BF16>(&r, &comm, &case)?,
                    ("fp32", false) => run_case::<f32>(&r, &comm, &case)?,
                    (_, true) => bench_case::<BF16>(&r, &comm, &case, 200)?,
                    _ => unreachable!(),
                }
            }
        }
    }
    comm.destroy()?;
    r.cuda.destroy_stream(r.stream)?;
    if !bench {
        println!(
            "rank {rank}/{nranks}: {} checks, {} failed",
            r.checks.get(),
            r.failures.get()
        );
    }
    Ok(r.failures.get() == 0)
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    if let (Ok(rank), Ok(nranks), Ok(id_file)) = (
        env::var(RANK_VAR),
        env::var(NRANKS_VAR),
        env::var(ID_FILE_VAR),
    ) {
        let (rank, nranks) = (rank.parse().unwrap_or(0), nranks.parse().unwrap_or(1));
        return match run_rank(rank, nranks, &id_file, bench) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("rank {rank}: FAIL {e}");
                ExitCode::from(3)
            }
        };
    }
    let devices = match CudaRuntime::load().and_then(|cuda| cuda.device_count()) {
        Ok(n) if n > 0 => n as usize,
        Ok(_) => {
            println!("SKIPPED: no GPU (cudaGetDeviceCount found no device)");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            println!("SKIPPED: no GPU ({why})");
            return ExitCode::SUCCESS;
        }
    };
    let nranks = args
        .iter()
        .find_map(|a| a.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(devices);
    if nranks > devices {
        println!("SKIPPED: {nranks} ranks asked, {devices} GPUs present");
        return ExitCode::SUCCESS;
    }
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id_file = env::temp_dir().join(format!("ncclbind-ep-{}-{stamp}.id", std::process::id()));
    let exe = env::current_exe().expect("this program's path");
    let mut children = Vec::new();
    for rank in 0..nranks {
        let mut command = Command::new(&exe);
        command
            .args(&args)
            .env(RANK_VAR, rank.to_string())
            .env(NRANKS_VAR, nranks.to_string())
            .env(ID_FILE_VAR, &id_file);
        for (name, value) in [
            ("NCCL_NVLS_ENABLE", "0"),
            ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
            ("NVSHMEM_DISABLE_NVLS", "1"),
        ] {
            command.env(name, value);
        }
        children.push(command.spawn().expect("start a rank"));
    }
    // A hang fails the run instead of holding the machine.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut statuses = vec![None; nranks];
    while statuses.iter().any(Option::is_none) {
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                if let Ok(Some(exit)) = child.try_wait() {
                    *status = Some(exit.success());
                }
            }
        }
        if Instant::now() > deadline {
            for (rank, (child, status)) in children.iter_mut().zip(statuses.iter_mut()).enumerate()
            {
                if status.is_none() {
                    eprintln!("rank {rank}: killed after 240 s");
                    let _ = child.kill();
                    let _ = child.wait();
                    *status = Some(false);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&id_file);
    let failed = statuses.iter().filter(|s| **s != Some(true)).count();
    println!(
        "{}: {nranks} ranks, {} passed, {failed} failed",
        if failed > 0 { "FAIL" } else { "PASS" },
        nranks - failed
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
