//! One rank of ncclbind.bench's Rust backend: the safe crate's Communicator methods, with the
//! same arguments and JSON lines as the Python worker (bindings/python/ncclbind/bench/worker.py
//! says the protocol; collectives.py the layouts and the fill pattern, which `value` and
//! `expected` compute alike). CUDA is loaded with dlopen; with --host-memory the buffers are
//! host memory, for a stand-in libnccl on a CPU machine (tests/python/test_bench_cli.py).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::Instant;

use ncclbind::sys::nccl::ncclDataType_t;
use ncclbind::{
    Communicator, DataType, DataTypeInfo, DeviceSlice, DeviceSliceMut, Group, RedOp,
    RegisteredBuffer, Stream, UniqueId, Window, WindowFlags, BF16, F16, UNIQUE_ID_BYTES,
};

type Fallible<T> = Result<T, String>;

unsafe extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// The CUDA runtime calls this worker makes, found with dlsym in libcudart.
struct Cuda {
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    free: unsafe extern "C" fn(*mut c_void) -> c_int,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    memset: unsafe extern "C" fn(*mut c_void, c_int, usize) -> c_int,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, u32) -> c_int,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> c_int,
    device_synchronize: unsafe extern "C" fn() -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

impl Cuda {
    fn load() -> Fallible<Cuda> {
        let mut names: Vec<String> = std::env::var("NCCLBIND_CUDART_PATH").into_iter().collect();
        names.extend(["libcudart.so.13", "libcudart.so.12", "libcudart.so"].map(String::from));
        for name in names {
            let c_name = CString::new(name).map_err(|e| e.to_string())?;
            // SAFETY: dlopen with a NUL-terminated name.
            let lib = unsafe { dlopen(c_name.as_ptr(), 2 | 0x100) }; // RTLD_NOW | RTLD_GLOBAL
            if lib.is_null() {
                continue;
            }
            let symbol = |s: &str| -> Fallible<*mut c_void> {
                let c = CString::new(s).unwrap();
                // SAFETY: lib is a live handle; c is NUL-terminated.
                let p = unsafe { dlsym(lib, c.as_ptr()) };
                if p.is_null() {
                    Err(format!("libcudart lacks {s}"))
                } else {
                    Ok(p)
                }
            };
            // SAFETY (for the callers): F is the function-pointer type of the symbol.
            unsafe fn function<F: Copy>(address: *mut c_void) -> F {
                assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
                std::mem::transmute_copy(&address)
            }
            // SAFETY: each symbol is the CUDA runtime function of that name, with this signature.
            unsafe {
                return Ok(Cuda {
                    set_device: function(symbol("cudaSetDevice")?),
                    malloc: function(symbol("cudaMalloc")?),
                    free: function(symbol("cudaFree")?),
                    memcpy: function(symbol("cudaMemcpy")?),
                    memset: function(symbol("cudaMemset")?),
                    stream_create: function(symbol("cudaStreamCreateWithFlags")?),
                    stream_synchronize: function(symbol("cudaStreamSynchronize")?),
                    device_synchronize: function(symbol("cudaDeviceSynchronize")?),
                    error_string: function(symbol("cudaGetErrorString")?),
                });
            }
        }
        Err("no libcudart found (set NCCLBIND_CUDART_PATH)".into())
    }

    fn check(&self, call: &str, code: c_int) -> Fallible<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorString returns a static string for any code.
        let text = unsafe { CStr::from_ptr((self.error_string)(code)) };
        Err(format!("{call}: {}", text.to_string_lossy()))
    }
}

/// Device memory (or host memory for a stand-in libnccl) and the stream the rank works on.
struct Memory {
    cuda: Option<Cuda>,
    stream: *mut c_void,
}

impl Memory {
    fn alloc(&self, bytes: usize) -> Fallible<*mut u8> {
        let bytes = bytes.max(8);
        match &self.cuda {
            None => Ok(Box::leak(vec![0u64; bytes.div_ceil(8)].into_boxed_slice())
                .as_mut_ptr()
                .cast()),
            Some(c) => {
                let mut p = std::ptr::null_mut();
                // SAFETY: an out-pointer and a byte count.
                c.check("cudaMalloc", unsafe { (c.malloc)(&mut p, bytes) })?;
                Ok(p.cast())
            }
        }
    }

    fn nccl_alloc(&self, bytes: usize) -> Fallible<*mut u8> {
        if self.cuda.is_none() {
            return self.alloc(bytes);
        }
        let mut p = std::ptr::null_mut();
        // SAFETY: ncclMemAlloc writes a device pointer of `bytes` bytes to p.
        ncclbind::check("ncclMemAlloc", unsafe {
            ncclbind::sys::nccl::ncclMemAlloc(&mut p, bytes.max(8))
        })
        .map_err(|e| e.to_string())?;
        Ok(p.cast())
    }

    fn free(&self, p: *mut u8) -> Fallible<()> {
        match &self.cuda {
            None => Ok(()), // host buffers of a stand-in run live until the process exits
            // SAFETY: p came from cudaMalloc and no queued work uses it (the stream is synced).
            Some(c) => c.check("cudaFree", unsafe { (c.free)(p.cast()) }),
        }
    }

    fn copy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: c_int) -> Fallible<()> {
        match &self.cuda {
            // SAFETY: both ranges are `bytes` long and do not overlap (a host staging buffer).
            None => unsafe {
                std::ptr::copy_nonoverlapping(src, dst, bytes);
                Ok(())
            },
            // SAFETY: as above, one side on the device.
            Some(c) => c.check("cudaMemcpy", unsafe {
                (c.memcpy)(dst.cast(), src.cast(), bytes, kind)
            }),
        }
    }

    fn zero(&self, p: *mut u8, bytes: usize) -> Fallible<()> {
        match &self.cuda {
            // SAFETY: p holds `bytes` bytes.
            None => unsafe {
                std::ptr::write_bytes(p, 0, bytes);
                Ok(())
            },
            // SAFETY: as above, on the device.
            Some(c) => c.check("cudaMemset", unsafe { (c.memset)(p.cast(), 0, bytes) }),
        }
    }

    /// Waits for the fill's cudaMemset and cudaMemcpy. They run on the legacy default stream,
    /// which the rank's stream (cudaStreamNonBlocking) does not wait for, and a cudaMemcpy from
    /// pageable host memory may return before its last DMA has landed: without this wait the
    /// next collective can send the tail of the input before it is there (seen on H200 as
    /// wrong elements in one in-place all_gather, intermittently).
    fn settle_fill(&self) -> Fallible<()> {
        match &self.cuda {
            None => Ok(()),
            // SAFETY: a plain CUDA runtime call.
            Some(c) => c.check("cudaDeviceSynchronize", unsafe { (c.device_synchronize)() }),
        }
    }

    fn sync(&self) -> Fallible<()> {
        match &self.cuda {
            None => Ok(()),
            // SAFETY: the stream is alive for the whole run.
            Some(c) => c.check("cudaStreamSynchronize", unsafe {
                (c.stream_synchronize)(self.stream)
            }),
        }
    }
}

/// The element types: values go through f64 (they are small integers, or halves for avg).
trait Element: DataType + Copy + Send + Sync {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! numeric {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
numeric!(i8, u8, i32, u32, i64, u64, f32, f64);

impl Element for F16 {
    fn from_f64(v: f64) -> Self {
        // Exact for the small integers this worker writes (no rounding, no subnormals needed).
        let x = (v as f32).to_bits();
        let (sign, exp, mant) = ((x >> 16) & 0x8000, ((x >> 23) & 0xff) as i32, x & 0x7f_ffff);
        let e = exp - 127 + 15;
        F16(if exp == 0 || e <= 0 {
            sign as u16
        } else if e >= 31 {
            (sign | 0x7c00) as u16
        } else {
            (sign | ((e as u32) << 10) | (mant >> 13)) as u16
        })
    }
    fn to_f64(self) -> f64 {
        let h = self.0 as u32;
        let (sign, exp, mant) = (
            if h & 0x8000 != 0 { -1.0 } else { 1.0 },
            (h >> 10) & 0x1f,
            h & 0x3ff,
        );
        sign * match exp {
            0 => mant as f64 * 2f64.powi(-24),
            31 => f64::INFINITY,
            _ => (1.0 + mant as f64 / 1024.0) * 2f64.powi(exp as i32 - 15),
        }
    }
}

impl Element for BF16 {
    fn from_f64(v: f64) -> Self {
        BF16(((v as f32).to_bits() >> 16) as u16)
    }
    fn to_f64(self) -> f64 {
        f32::from_bits((self.0 as u32) << 16) as f64
    }
}

/// The layouts and what each rank receives: generated/collectives.rs, rendered from
/// policy/vocabulary.toml [collectives] (the C worker and the Python bench read the same).
#[path = "../generated/collectives.rs"]
mod collectives;
use collectives::{Layout, COLLECTIVES, OPS};

fn layout(coll: &str, bytes: usize, size: usize, n: usize) -> Layout {
    collectives::layout(coll, bytes / size, n).unwrap_or_default()
}

struct Args {
    rank: i32,
    nranks: i32,
    device: i32,
    uid_file: String,
    collectives: Vec<String>,
    sizes: Vec<usize>,
    iters: Vec<usize>,
    warmups: Vec<usize>,
    dtype: String,
    op: usize,
    root: i32,
    check: usize,
    blocking: bool,
    register: i32,
    host_memory: bool,
}

impl Args {
    fn parse() -> Fallible<Args> {
        let mut map = HashMap::new();
        let mut host_memory = false;
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--host-memory" {
                host_memory = true;
            } else if let Some(name) = flag.strip_prefix("--") {
                map.insert(
                    name.to_string(),
                    it.next().ok_or(format!("{flag}: no value"))?,
                );
            } else {
                return Err(format!("unexpected argument {flag}"));
            }
        }
        let get = |k: &str| map.get(k).cloned().ok_or(format!("--{k} is required"));
        let num = |k: &str| -> Fallible<i64> {
            get(k)?
                .parse()
                .map_err(|_| format!("--{k}: not an integer"))
        };
        let list = |k: &str| -> Fallible<Vec<usize>> {
            get(k)?
                .split(',')
                .map(|s| s.parse().map_err(|_| format!("--{k}: {s} is not a count")))
                .collect()
        };
        let op_name = get("op")?;
        Ok(Args {
            rank: num("rank")? as i32,
            nranks: num("nranks")? as i32,
            device: num("device")? as i32,
            uid_file: get("uid-file")?,
            collectives: get("collectives")?.split(',').map(String::from).collect(),
            sizes: list("sizes")?,
            iters: list("iters")?,
            warmups: list("warmups")?,
            dtype: get("dtype")?,
            op: OPS
                .iter()
                .position(|o| *o == op_name)
                .ok_or(format!("--op: unknown {op_name}"))?,
            root: num("root")? as i32,
            check: num("check")? as usize,
            blocking: num("blocking")? != 0,
            register: num("register")? as i32,
            host_memory,
        })
    }

    fn value(&self, rank: usize, index: usize, rep: usize) -> f64 {
        if self.op == 1 {
            return if (index + rank + rep) % self.nranks as usize == 0 {
                2.0
            } else {
                1.0
            };
        }
        ((index + 3 * rank + rep) % 7 + 1) as f64
    }

    fn reduced(&self, index: usize, rep: usize) -> f64 {
        let mut acc = self.value(0, index, rep);
        for r in 1..self.nranks as usize {
            let v = self.value(r, index, rep);
            acc = match self.op {
                1 => acc * v,
                2 => acc.max(v),
                3 => acc.min(v),
                _ => acc + v,
            };
        }
        if self.op == 4 {
            acc / self.nranks as f64
        } else {
            acc
        }
    }

    /// What this rank holds at recv[i] afterwards; None where nothing is defined.
    fn expected(&self, coll: &str, l: Layout, i: usize, rep: usize) -> Option<f64> {
        let (me, n, root) = (self.rank as usize, self.nranks as usize, self.root as usize);
        collectives::received(
            coll,
            i,
            l.count,
            n,
            me,
            root,
            |r, j| self.value(r, j, rep),
            |j| self.reduced(j, rep),
        )
    }

    fn tolerance(&self) -> (f64, f64) {
        // avg (op 4): vocabulary.toml's avg_tolerance of the type; every other op is exact
        match self.op {
            4 => collectives::avg_tolerance(&self.dtype).unwrap_or((0.0, 0.0)),
            _ => (0.0, 0.0),
        }
    }
}

/// One collective on raw pointers of the rank's buffers, through the safe crate.
fn call<T: Element>(
    comm: &Communicator,
    a: &Args,
    coll: &str,
    send: *mut T,
    recv: *mut T,
    l: Layout,
    stream: Stream,
) -> ncclbind::Result<()> {
    let op = RedOp::from_raw(ncclbind::sys::nccl::ncclRedOp_t(a.op as _));
    let n = a.nranks as usize;
    let recv_len = if coll == "all_gather" || coll == "all_to_all" {
        l.count * n
    } else {
        l.count
    };
    let send_len = if coll == "reduce_scatter" || coll == "all_to_all" {
        l.count * n
    } else {
        l.count
    };
    // SAFETY: both pointers are inside this rank's buffers, which hold the layout's lengths and
    // outlive the call's completion (the stream is synchronized before they are freed). In place
    // the two views overlap where NCCL defines the in-place layout of the collective.
    let (s, mut r) = unsafe {
        (
            DeviceSlice::from_raw_parts(send, send_len)?,
            DeviceSliceMut::from_raw_parts(recv, recv_len)?,
        )
    };
    let in_place = send == recv;
    match coll {
        "all_reduce" if in_place => comm.all_reduce_in_place(&mut r, op, stream),
        "all_reduce" => comm.all_reduce(&s, &mut r, op, stream),
        "all_gather" => comm.all_gather(&s, &mut r, stream),
        "reduce_scatter" => comm.reduce_scatter(&s, &mut r, op, stream),
        "broadcast" if in_place => comm.broadcast_in_place(&mut r, a.root, stream),
        "broadcast" => comm.broadcast(Some(&s), &mut r, a.root, stream),
        "reduce" => comm.reduce(&s, Some(&mut r), op, a.root, stream),
        "all_to_all" => comm.all_to_all(&s, &mut r, stream),
        _ => {
            let group = Group::start()?;
            comm.send(&s, (a.rank + 1) % a.nranks, stream)?;
            comm.recv(&mut r, (a.rank + a.nranks - 1) % a.nranks, stream)?;
            group.end()
        }
    }
}

/// Threads over a host buffer: a GiB of values is a second or more on one core.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(32)
}

fn parallel_chunks<T: Send>(data: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    let size = data.len().div_ceil(threads()).max(1 << 16);
    std::thread::scope(|scope| {
        for (k, chunk) in data.chunks_mut(size).enumerate() {
            let f = &f;
            scope.spawn(move || f(k * size, chunk));
        }
    });
}

fn parallel_count<T: Sync>(data: &[T], bad: impl Fn(usize, &T) -> bool + Sync) -> usize {
    let size = data.len().div_ceil(threads()).max(1 << 16);
    std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .chunks(size)
            .enumerate()
            .map(|(k, chunk)| {
                let bad = &bad;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .enumerate()
                        .filter(|(i, v)| bad(k * size + i, v))
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

fn emit_result(
    coll: &str,
    l: Layout,
    size: usize,
    in_place: bool,
    time_us: f64,
    wrong: Option<usize>,
    iters: usize,
) {
    let wrong = wrong.map_or("null".to_string(), |w| w.to_string());
    println!(
        "{{\"event\": \"result\", \"collective\": \"{coll}\", \"size\": {}, \"count\": {}, \"in_place\": {}, \
         \"time_us\": {time_us:.6}, \"wrong\": {wrong}, \"iters\": {iters}}}",
        l.send.max(l.recv) * size,
        l.count,
        in_place as i32
    );
}

fn run<T: Element>(a: &Args, comm: &Communicator, mem: &Memory, stream: Stream) -> Fallible<()> {
    let e = |x: ncclbind::Error| x.to_string();
    let size = std::mem::size_of::<T>();
    let n = a.nranks as usize;
    let me = a.rank as usize;
    let token = mem.alloc(4)?.cast::<f32>();
    let barrier = || -> Fallible<()> {
        // SAFETY: token is one f32 of this rank's memory, alive for the run.
        let mut t = unsafe { DeviceSliceMut::from_raw_parts(token, 1) }.map_err(e)?;
        comm.all_reduce_in_place(&mut t, RedOp::SUM, stream)
            .map_err(e)?;
        mem.sync()
    };
    let mut registrations: Vec<RegisteredBuffer<'_>> = Vec::new();
    let mut windows: Vec<Window<'_>> = Vec::new();
    for coll in &a.collectives {
        if !COLLECTIVES.contains(&coll.as_str()) {
            return Err(format!("--collectives: unknown {coll}"));
        }
        let layouts: Vec<Layout> = a.sizes.iter().map(|&b| layout(coll, b, size, n)).collect();
        let max_send = layouts.iter().map(|l| l.send).max().unwrap_or(0).max(1);
        let max_buf = layouts
            .iter()
            .map(|l| l.send.max(l.recv))
            .max()
            .unwrap_or(0)
            .max(1);
        let registered = a.register != 0;
        let alloc = |elems: usize| {
            if registered {
                mem.nccl_alloc(elems * size)
            } else {
                mem.alloc(elems * size)
            }
        };
        let (sendbuf, recvbuf) = (alloc(max_send)?.cast::<T>(), alloc(max_buf)?.cast::<T>());
        if registered {
            for (p, len) in [(sendbuf, max_send), (recvbuf, max_buf)] {
                if a.register == 1 {
                    // SAFETY: p holds len elements of ncclMemAlloc memory, kept until the end.
                    let view = unsafe { DeviceSlice::from_raw_parts(p, len) }.map_err(e)?;
                    registrations.push(comm.register(view).map_err(e)?);
                } else {
                    // SAFETY: as above.
                    let view = unsafe { DeviceSliceMut::from_raw_parts(p, len) }.map_err(e)?;
                    windows.push(
                        comm.register_window(view, WindowFlags::COLL_SYMMETRIC)
                            .map_err(e)?,
                    );
                }
            }
        }
        let mut host: Vec<T> = vec![T::from_f64(0.0); max_buf];
        let (last, first) = (layouts[layouts.len() - 1], layouts[0]);
        for (l, count) in [
            (last, a.warmups[0]),
            (first, a.warmups.get(1).copied().unwrap_or(0)),
        ] {
            for _ in 0..if l.count > 0 { count } else { 0 } {
                call(comm, a, coll, sendbuf, recvbuf, l, stream).map_err(e)?;
            }
        }
        mem.sync()?;
        for (l, &iters) in layouts.iter().zip(&a.iters) {
            let l = *l;
            if l.count == 0 {
                continue;
            }
            for in_place in [false, true] {
                // SAFETY (pointer arithmetic): the offsets stay inside the receive buffer (max_buf).
                let (send, recv) = if in_place {
                    unsafe {
                        (
                            recvbuf.add(l.send_in_place * me),
                            recvbuf.add(l.recv_in_place * me),
                        )
                    }
                } else {
                    (sendbuf, recvbuf)
                };
                let fill = |host: &mut Vec<T>, rep: usize| -> Fallible<()> {
                    mem.zero(recvbuf.cast(), max_buf * size)?;
                    if !in_place {
                        mem.zero(sendbuf.cast(), max_send * size)?;
                    }
                    parallel_chunks(&mut host[..l.send], |start, chunk| {
                        for (k, slot) in chunk.iter_mut().enumerate() {
                            *slot = T::from_f64(a.value(me, start + k, rep));
                        }
                    });
                    mem.copy(send.cast(), host.as_ptr().cast(), l.send * size, 1)?;
                    mem.settle_fill()
                };
                if a.check > 0 {
                    fill(&mut host, 0)?;
                }
                call(comm, a, coll, send, recv, l, stream).map_err(e)?;
                mem.sync()?;
                barrier()?;
                let t0 = Instant::now();
                for _ in 0..iters {
                    call(comm, a, coll, send, recv, l, stream).map_err(e)?;
                    if a.blocking {
                        mem.sync()?;
                        barrier()?;
                    }
                }
                mem.sync()?;
                let time_us = t0.elapsed().as_secs_f64() * 1e6 / iters as f64;
                let checked = a.check > 0 && (!in_place || collectives::in_place_checked(coll));
                let mut wrong = None;
                if checked {
                    let (abs_tol, rel_tol) = a.tolerance();
                    let mut bad = 0;
                    for rep in 1..=a.check {
                        fill(&mut host, rep)?;
                        call(comm, a, coll, send, recv, l, stream).map_err(e)?;
                        mem.sync()?;
                        mem.copy(host.as_mut_ptr().cast(), recv.cast(), l.recv * size, 2)?;
                        if a.expected(coll, l, 0, rep).is_some() {
                            bad += parallel_count(&host[..l.recv], |i, got| {
                                let want = a.expected(coll, l, i, rep).unwrap_or(f64::NAN);
                                let got = got.to_f64();
                                got.is_nan() || (got - want).abs() > abs_tol + rel_tol * want.abs()
                            });
                        }
                        if bad > 0 {
                            break;
                        }
                    }
                    wrong = Some(bad);
                }
                emit_result(coll, l, size, in_place, time_us, wrong, iters);
            }
        }
        if !registered {
            mem.free(sendbuf.cast())?;
            mem.free(recvbuf.cast())?;
        }
    }
    mem.sync()?;
    drop(windows);
    drop(registrations);
    Ok(())
}

fn share_unique_id(a: &Args) -> Fallible<UniqueId> {
    if a.rank == 0 {
        let id = UniqueId::new().map_err(|e| e.to_string())?;
        let tmp = format!("{}.tmp", a.uid_file);
        std::fs::write(&tmp, id.as_bytes()).map_err(|e| format!("--uid-file {tmp}: {e}"))?;
        std::fs::rename(&tmp, &a.uid_file)
            .map_err(|e| format!("--uid-file {}: {e}", a.uid_file))?;
        return Ok(id);
    }
    let start = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(&a.uid_file) {
            if let Ok(array) = <[u8; UNIQUE_ID_BYTES]>::try_from(bytes.as_slice()) {
                return Ok(UniqueId::from_bytes(array));
            }
        }
        if start.elapsed().as_secs() > 300 {
            return Err(format!(
                "--uid-file {}: rank 0 wrote no unique id in 300 s",
                a.uid_file
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn main_result() -> Fallible<()> {
    let a = Args::parse()?;
    let cuda = if a.host_memory {
        None
    } else {
        Some(Cuda::load()?)
    };
    let mut stream_raw = std::ptr::null_mut();
    if let Some(c) = &cuda {
        // SAFETY: plain CUDA runtime calls with an out-pointer.
        c.check("cudaSetDevice", unsafe { (c.set_device)(a.device) })?;
        c.check("cudaStreamCreateWithFlags", unsafe {
            (c.stream_create)(&mut stream_raw, 1)
        })?;
    }
    // SAFETY: a stream of this rank's device, alive until the process exits; with host memory the
    // stand-in ignores streams, and the legacy default stream is a valid handle to pass.
    let stream = if cuda.is_some() {
        unsafe { Stream::from_raw(stream_raw.cast()) }.map_err(|e| e.to_string())?
    } else {
        Stream::LEGACY_DEFAULT
    };
    let mem = Memory {
        cuda,
        stream: stream_raw,
    };
    // nccl-tests' names, as vocabulary.toml gives them (ncclbind::DATA_TYPES)
    let Some(data_type) = DataTypeInfo::by_nccl_tests_name(&a.dtype) else {
        println!(
            "{{\"event\": \"unsupported\", \"reason\": \"--dtype {}\"}}",
            a.dtype
        );
        return Ok(());
    };
    let id = share_unique_id(&a)?;
    let comm = Communicator::init_rank(a.nranks, &id, a.rank).map_err(|e| e.to_string())?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    println!(
        "{{\"event\": \"ready\", \"rank\": {}, \"pid\": {}, \"host\": \"{}\", \"device\": {}, \"pci_bus\": 0, \
         \"device_name\": \"{}\", \"notes\": []}}",
        a.rank,
        std::process::id(),
        host.trim(),
        a.device,
        if a.host_memory { "host memory (stand-in)" } else { "?" }
    );
    match data_type.data_type {
        ncclDataType_t::ncclInt8 => run::<i8>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclUint8 => run::<u8>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclInt32 => run::<i32>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclUint32 => run::<u32>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclInt64 => run::<i64>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclUint64 => run::<u64>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclFloat16 => run::<F16>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclFloat32 => run::<f32>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclFloat64 => run::<f64>(&a, &comm, &mem, stream),
        ncclDataType_t::ncclBfloat16 => run::<BF16>(&a, &comm, &mem, stream),
        other => {
            println!(
                "{{\"event\": \"unsupported\", \"reason\": \"--dtype {} ({other:?})\"}}",
                a.dtype
            );
            return Ok(());
        }
    }?;
    comm.destroy().map_err(|e| e.to_string())?;
    println!("{{\"event\": \"done\"}}");
    Ok(())
}

fn main() {
    if let Err(message) = main_result() {
        eprintln!("ncclbind_bench_worker: {message}");
        std::process::exit(1);
    }
}
