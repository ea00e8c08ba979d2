//! Misuse fuzzing of the safe crate (issue 24, item 6): a seeded generator (SplitMix64, below;
//! no crates) makes, per seed, a few hundred calls of `ncclbind`'s safe API, each a valid call or
//! a valid call with exactly one thing made wrong (a root or peer out of range, a buffer of the
//! wrong length or missing, a count that overflows, an op complex numbers cannot take, counts
//! and displacements of the variable-count collectives that do not fit or overlap, a config
//! value out of range or newer than the library, a null or misaligned view, a call after an
//! abort, an NCCL EP shape that disagrees with its group). Each wrong call must end in the
//! `Error` the rule it broke names, before any library call; each valid one must succeed (or
//! reach the library).
//!
//! Over the stand-in libnccl (tests/python/fake_nccl.c) and libnccl_ep (fake_nccl_ep.c):
//! * valid calls go to a live stand-in communicator over host memory (the stand-in runs them);
//! * wrong calls go to a *poisoned* one: a stand-in communicator destroyed in the stand-in but
//!   still held by a `Communicator` (the pattern of argument_checks.rs, a handle NCCL must never
//!   be given, made observable): a check that let a call through reaches the stand-in, which
//!   counts the use of a freed communicator (fakeUsedAfterFree) or logs it, and touches no
//!   memory. So a missing check is reported ("silent"), never a crash.
//!
//! Outcomes: clean (the expected error, or a valid call that succeeded), raw (a panic, or
//! another outcome than expected), silent (a wrong call accepted or passed to the library). The
//! last line is `misuse_fuzz: tried=N clean=N raw=N silent=N crash=0 hang=0`, written to the
//! real stdout (not libtest's capture); a crash (signal) or a case that hangs prints the same
//! line with crash=1 or hang=1 and ends the process. MISUSE_FUZZ_VERBOSE=1 prints every case.
//!
//! Lifetime misuse that must not compile (`lifetime_misuse_does_not_compile`): snippets compiled
//! against the crate's rlib by the toolchain's rustc (MISUSE_FUZZ_RUSTC, MISUSE_FUZZ_RLIB; Bazel
//! passes both), each expected to fail with its borrow-checker or trait error code, and the same
//! snippets with the misuse removed expected to compile.

mod ep_stand_in;
mod stand_in;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CString};
use std::io::Write;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ncclbind::ep::{self, GroupConfig, Problem, Tensor};
use ncclbind::sys::coll_config_layouts::CollConfigLayout;
use ncclbind::sys::config_layouts::ConfigLayout;
use ncclbind::sys::nccl::ncclCommDestroy;
use ncclbind::sys::nccl_ep::{
    ncclEpAlgorithm_t, ncclEpLayout_t, ncclEpOverflowPolicy_t, ncclEpZeroCopyMode_t,
};
use ncclbind::{
    library_info, CollConfig, CommConfig, Communicator, Complex32, DataType, DeviceSlice,
    DeviceSliceMut, Documented, Error, Group, Library, RedOp, Result, Stream, Team, UniqueId,
    Version,
};

/// The seeds: fixed, so every run makes the same cases (a failure names its seed and index).
const SEEDS: [u64; 12] = [
    1,
    2,
    3,
    0x5EED,
    0xC0FFEE,
    0xDEAD_BEEF,
    24,
    6,
    0x9E37_79B9_7F4A_7C15,
    42,
    1 << 40,
    u64::MAX,
];
/// Generated cases per seed (valid and wrong), besides the fixed lifetime cases.
const CASES_PER_SEED: usize = 300;
/// Percent of generated cases made wrong.
const BAD_PERCENT: u64 = 65;
/// A case running longer than this is a hang.
const HANG_AFTER: Duration = Duration::from_secs(20);
/// PreMulSum ops the stand-in can still create (it has 59 slots per process).
const PREMULSUM_SLOTS: usize = 40;

const STREAM: Stream = Stream::LEGACY_DEFAULT;

// ---- The generator ---------------------------------------------------------------------------

/// SplitMix64 (Steele, Lea, Flood 2014): one u64 of state, every seed a full-period stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn upto(&mut self, n: usize) -> usize {
        self.below(n as u64 + 1) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    /// A buffer length: mostly small, sometimes 0, sometimes up to 64.
    fn len(&mut self) -> usize {
        match self.below(10) {
            0 => 0,
            1..=6 => 1 + self.upto(7),
            _ => self.upto(64),
        }
    }
    /// A length other than `expected`.
    fn wrong_len(&mut self, expected: usize) -> usize {
        loop {
            let len = match self.below(5) {
                0 => expected + 1,
                1 => expected.saturating_sub(1),
                2 => 0,
                3 => expected * 2 + 1,
                _ => self.upto(200),
            };
            if len != expected {
                return len;
            }
        }
    }
    /// A rank outside 0..n: just past the end, far past it, negative, i32's extremes.
    fn bad_rank(&mut self, n: i32) -> i32 {
        match self.below(7) {
            0 => n,
            1 => n + 1 + self.below(16) as i32,
            2 => -1,
            3 => -1 - self.below(1000) as i32,
            4 => i32::MAX,
            5 => i32::MIN,
            _ => i32::MAX - self.below(100) as i32,
        }
    }
    fn rank(&mut self, n: i32) -> i32 {
        self.below(n as u64) as i32
    }
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.upto(i));
        }
    }
}

// ---- Memory --------------------------------------------------------------------------------

/// `len` elements of host memory (the stand-in runs collectives on it), or for lengths past
/// 1 MiB a dangling address: only wrong calls get those, and they must never reach a library.
struct Mem<T> {
    words: Vec<u64>,
    len: usize,
    _type: PhantomData<T>,
}

impl<T: DataType> Mem<T> {
    fn new(len: usize) -> Mem<T> {
        let words = match len.checked_mul(size_of::<T>()) {
            Some(bytes) if bytes <= 1 << 20 => vec![0u64; bytes.div_ceil(8)],
            _ => Vec::new(),
        };
        Mem {
            words,
            len,
            _type: PhantomData,
        }
    }
    fn ptr(&self) -> *mut T {
        if self.words.is_empty() {
            NonNull::dangling().as_ptr()
        } else {
            self.words.as_ptr() as *mut T
        }
    }
    /// Elements `start..start + len` (inside the memory) as a view; 8-byte words align any T.
    fn part(&self, start: usize, len: usize) -> DeviceSlice<'_, T> {
        // SAFETY: host memory the stand-in reads (or a dangling address no library is given);
        // it outlives the view.
        unsafe { DeviceSlice::from_raw_parts(self.ptr().wrapping_add(start), len) }.unwrap()
    }
    fn part_mut(&self, start: usize, len: usize) -> DeviceSliceMut<'_, T> {
        // SAFETY: as above; the stand-in writes it (exact aliases are NCCL's in-place form).
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr().wrapping_add(start), len) }.unwrap()
    }
    fn view(&self) -> DeviceSlice<'_, T> {
        self.part(0, self.len)
    }
    fn view_mut(&self) -> DeviceSliceMut<'_, T> {
        self.part_mut(0, self.len)
    }
}

/// The most elements of T a view may hold (isize::MAX bytes).
fn max_len<T>() -> usize {
    isize::MAX as usize / size_of::<T>()
}

/// A count a view of T may hold whose product with `n` ranks overflows where it can: the
/// largest one, or just past usize::MAX / n.
fn huge<T>(rng: &mut Rng, n: i32) -> usize {
    if rng.chance(50) {
        max_len::<T>()
    } else {
        (usize::MAX / n as usize)
            .saturating_add(1 + rng.upto(3))
            .min(max_len::<T>())
    }
}

// ---- Cases and what they must end in ------------------------------------------------------------

enum Expect {
    /// A wrong call: exactly this error, and no library call.
    Refused(Error),
    /// A wrong call: an error this predicate accepts (described), and no library call.
    RefusedLike(String, Box<dyn Fn(&Error) -> bool>),
    /// A valid call: Ok.
    Ok,
    /// A valid call the stand-in lacks the function of: Ok, or SymbolNotFound naming it.
    Reaches(&'static str),
    /// A call after the communicator's end that must succeed without any library call
    /// (dropping what an aborted communicator owned).
    QuietOk,
}

impl Expect {
    fn wrong(&self) -> bool {
        matches!(
            self,
            Expect::Refused(_) | Expect::RefusedLike(..) | Expect::QuietOk
        )
    }
    fn describe(&self) -> String {
        match self {
            Expect::Refused(e) => format!("Err({e:?})"),
            Expect::RefusedLike(what, _) => format!("Err({what})"),
            Expect::Ok => "Ok".into(),
            Expect::Reaches(f) => format!("Ok or SymbolNotFound({f})"),
            Expect::QuietOk => "Ok without a library call".into(),
        }
    }
}

type Run<'a> = Box<dyn FnOnce(&Communicator) -> Result<()> + 'a>;

struct Case<'a> {
    category: &'static str,
    kind: &'static str,
    what: String,
    expect: Expect,
    run: Run<'a>,
}

fn case<'a>(
    category: &'static str,
    kind: &'static str,
    what: String,
    expect: Expect,
    run: impl FnOnce(&Communicator) -> Result<()> + 'a,
) -> Case<'a> {
    Case {
        category,
        kind,
        what,
        expect,
        run: Box::new(run),
    }
}

fn rank_error(argument: &'static str, rank: i32, nranks: i32) -> Expect {
    Expect::Refused(Error::RankOutOfRange {
        argument,
        rank,
        nranks,
    })
}

fn wrong_length(argument: &'static str, len: usize, expected: usize) -> Expect {
    Expect::Refused(Error::WrongLength {
        argument,
        len,
        expected,
    })
}

fn missing(argument: &'static str) -> Expect {
    Expect::Refused(Error::MissingBuffer { argument })
}

/// `count * n` must equal `len`: the overflow when it overflows, else the wrong length.
fn times_n(argument: &'static str, count: usize, n: i32, len: usize) -> Expect {
    match count.checked_mul(n as usize) {
        None => Expect::Refused(Error::CountOverflow {
            argument,
            count,
            factor: n as usize,
        }),
        Some(expected) => wrong_length(argument, len, expected),
    }
}

fn complex_op(argument: &'static str, op: &'static str) -> Expect {
    Expect::RefusedLike(
        format!("UnsupportedComplexOp {{ argument: {argument:?}, op: {op:?}, .. }}"),
        Box::new(
            move |e| matches!(e, Error::UnsupportedComplexOp { argument: a, op: o, .. } if *a == argument && o == op),
        ),
    )
}

fn ep_refusal(argument: &'static str, problem: Problem) -> Expect {
    Expect::RefusedLike(
        format!("Ep {{ argument: {argument:?}, problem: {problem:?}, .. }}"),
        Box::new(
            move |e| matches!(e, Error::Ep { argument: a, problem: p, .. } if a == argument && *p == problem),
        ),
    )
}

fn unknown_enum(argument: &'static str, value: i64) -> Expect {
    Expect::RefusedLike(
        format!("UnknownEnumValue {{ argument: {argument:?}, value: {value}, .. }}"),
        Box::new(
            move |e| matches!(e, Error::UnknownEnumValue { argument: a, value: v, .. } if *a == argument && *v == value),
        ),
    )
}

const OPS: [(RedOp<'static>, &str); 5] = [
    (RedOp::SUM, "sum"),
    (RedOp::PROD, "prod"),
    (RedOp::MAX, "max"),
    (RedOp::MIN, "min"),
    (RedOp::AVG, "avg"),
];

/// An op T takes (complex numbers: sum and avg only), or with `wrong` one it does not.
fn pick_op<T: DataType>(rng: &mut Rng, wrong: bool) -> (RedOp<'static>, &'static str) {
    if !T::COMPLEX {
        rng.pick(&OPS)
    } else if wrong {
        OPS[1 + rng.below(3) as usize]
    } else {
        rng.pick(&[OPS[0], OPS[4]])
    }
}

/// What a seed's cases share: the communicators' shape, the loaded library, the ops and the
/// EP group made once per seed.
struct Ctx<'a> {
    /// The live communicator (the one the seed's PreMulSum op belongs to).
    live: &'a Communicator,
    n: i32,
    me: i32,
    loaded: Version,
    /// A PreMulSum op over f32, created on the live communicator.
    premulsum: Option<RedOp<'a>>,
    premulsum_slots: &'a Cell<usize>,
    /// The seed's EP group, its num_experts and max_dispatch_tokens_per_rank.
    ep_group: Option<(&'a ep::Group<'a>, usize, usize)>,
}

// ---- Collectives and point-to-point ------------------------------------------------------------

fn collective<'a, T: DataType>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let (n, me) = (cx.n, cx.me);
    let ty = short_name::<T>();
    let count = rng.len();
    let complex_mutation = bad && T::COMPLEX && rng.chance(60);
    let (op, op_name) = pick_op::<T>(rng, complex_mutation);
    let op_expect = || complex_op("op", op_name);
    match rng.below(12) {
        0 => {
            // all_reduce: recv holds as many as send
            let mut recv_len = count;
            let (kind, expect) = if complex_mutation {
                ("complex op", op_expect())
            } else if bad {
                recv_len = rng.wrong_len(count);
                ("recv length", wrong_length("recv", recv_len, count))
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!("all_reduce::<{ty}>(send {count}, recv {recv_len}, {op_name})");
            case("collectives", kind, what, expect, move |comm| {
                let (send, recv) = (Mem::<T>::new(count), Mem::<T>::new(recv_len));
                comm.all_reduce(&send.view(), &mut recv.view_mut(), op, STREAM)
            })
        }
        1 => {
            // in place: a buffer of any length; or out of place over the same memory (NCCL's
            // in-place form, exact aliases)
            let alias = rng.chance(50);
            let (kind, expect) = if complex_mutation {
                ("complex op", op_expect())
            } else {
                ("valid in place", Expect::Ok)
            };
            let what = format!(
                "all_reduce{}::<{ty}>({count}, {op_name})",
                if alias { " (send = recv)" } else { "_in_place" }
            );
            case("in_place", kind, what, expect, move |comm| {
                let buffer = Mem::<T>::new(count);
                if alias {
                    comm.all_reduce(&buffer.view(), &mut buffer.view_mut(), op, STREAM)
                } else {
                    comm.all_reduce_in_place(&mut buffer.view_mut(), op, STREAM)
                }
            })
        }
        2 => {
            // reduce: recv on the root (exactly send's length), optional elsewhere
            let mut root = rng.rank(n);
            let mut recv_len = if root != me && rng.chance(50) {
                None
            } else {
                Some(count)
            };
            let (kind, expect) = if complex_mutation {
                ("complex op", op_expect())
            } else if bad {
                match rng.below(3) {
                    0 => {
                        root = rng.bad_rank(n);
                        ("root out of range", rank_error("root", root, n))
                    }
                    1 if root == me => {
                        recv_len = None;
                        ("missing recv on root", missing("recv"))
                    }
                    _ => {
                        let len = rng.wrong_len(count);
                        recv_len = Some(len);
                        ("recv length", wrong_length("recv", len, count))
                    }
                }
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!("reduce::<{ty}>(send {count}, recv {recv_len:?}, {op_name}, root {root}) on rank {me}/{n}");
            case("collectives", kind, what, expect, move |comm| {
                let send = Mem::<T>::new(count);
                let recv = recv_len.map(Mem::<T>::new);
                let mut recv_view = recv.as_ref().map(Mem::view_mut);
                comm.reduce(&send.view(), recv_view.as_mut(), op, root, STREAM)
            })
        }
        3 => {
            // broadcast: send on the root (exactly recv's length), optional elsewhere
            let mut root = rng.rank(n);
            let mut send_len = if root != me && rng.chance(50) {
                None
            } else {
                Some(count)
            };
            let (kind, expect) = if bad {
                match rng.below(3) {
                    0 => {
                        root = rng.bad_rank(n);
                        ("root out of range", rank_error("root", root, n))
                    }
                    1 if root == me => {
                        send_len = None;
                        ("missing send on root", missing("send"))
                    }
                    _ => {
                        let len = rng.wrong_len(count);
                        send_len = Some(len);
                        ("send length", wrong_length("send", len, count))
                    }
                }
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!(
                "broadcast::<{ty}>(send {send_len:?}, recv {count}, root {root}) on rank {me}/{n}"
            );
            case("collectives", kind, what, expect, move |comm| {
                let recv = Mem::<T>::new(count);
                let send = send_len.map(Mem::<T>::new);
                let send_view = send.as_ref().map(Mem::view);
                comm.broadcast(send_view.as_ref(), &mut recv.view_mut(), root, STREAM)
            })
        }
        4 => {
            let root = if bad { rng.bad_rank(n) } else { rng.rank(n) };
            let (kind, expect) = if bad {
                ("root out of range", rank_error("root", root, n))
            } else {
                ("valid in place", Expect::Ok)
            };
            let what = format!("broadcast_in_place::<{ty}>({count}, root {root}) of {n}");
            case("in_place", kind, what, expect, move |comm| {
                let buffer = Mem::<T>::new(count);
                comm.broadcast_in_place(&mut buffer.view_mut(), root, STREAM)
            })
        }
        5 => {
            // all_gather: recv holds count * n; in place when send is recv's block `me`
            let mut send_len = count;
            let mut recv_len = count * n as usize;
            let in_place = !bad && rng.chance(30);
            let (kind, expect) = if bad && rng.chance(25) {
                send_len = huge::<T>(rng, n);
                recv_len = rng.len();
                (
                    "count x nranks overflows",
                    times_n("recv", send_len, n, recv_len),
                )
            } else if bad {
                recv_len = rng.wrong_len(recv_len);
                (
                    "recv length",
                    wrong_length("recv", recv_len, count * n as usize),
                )
            } else {
                (
                    if in_place { "valid in place" } else { "valid" },
                    Expect::Ok,
                )
            };
            let what = format!(
                "all_gather::<{ty}>(send {send_len}, recv {recv_len}{}) of {n}",
                if in_place { ", in place" } else { "" }
            );
            case(
                if in_place { "in_place" } else { "collectives" },
                kind,
                what,
                expect,
                move |comm| {
                    let recv = Mem::<T>::new(recv_len);
                    if in_place {
                        let send = recv.part(me as usize * count, count);
                        comm.all_gather(&send, &mut recv.view_mut(), STREAM)
                    } else {
                        comm.all_gather(
                            &Mem::<T>::new(send_len).view(),
                            &mut recv.view_mut(),
                            STREAM,
                        )
                    }
                },
            )
        }
        6 => {
            // reduce_scatter: send holds count * n; in place when recv is send's block `me`
            let mut recv_len = count;
            let mut send_len = count * n as usize;
            let in_place = !bad && rng.chance(30);
            let (kind, expect) = if complex_mutation {
                ("complex op", op_expect())
            } else if bad && rng.chance(25) {
                recv_len = huge::<T>(rng, n);
                send_len = rng.len();
                (
                    "count x nranks overflows",
                    times_n("send", recv_len, n, send_len),
                )
            } else if bad {
                send_len = rng.wrong_len(send_len);
                (
                    "send length",
                    wrong_length("send", send_len, count * n as usize),
                )
            } else {
                (
                    if in_place { "valid in place" } else { "valid" },
                    Expect::Ok,
                )
            };
            let what = format!(
                "reduce_scatter::<{ty}>(send {send_len}, recv {recv_len}, {op_name}{}) of {n}",
                if in_place { ", in place" } else { "" }
            );
            case(
                if in_place { "in_place" } else { "collectives" },
                kind,
                what,
                expect,
                move |comm| {
                    let send = Mem::<T>::new(send_len);
                    if in_place {
                        let mut recv = send.part_mut(me as usize * count, count);
                        comm.reduce_scatter(&send.view(), &mut recv, op, STREAM)
                    } else {
                        comm.reduce_scatter(
                            &send.view(),
                            &mut Mem::<T>::new(recv_len).view_mut(),
                            op,
                            STREAM,
                        )
                    }
                },
            )
        }
        7 => {
            // all_to_all: send splits evenly over the ranks, recv as long as send
            let mut send_len = count * n as usize;
            let mut recv_len = send_len;
            let (kind, expect) = if bad && n > 1 && rng.chance(50) {
                send_len = loop {
                    let len = rng.upto(200);
                    if len % n as usize != 0 {
                        break len;
                    }
                };
                Some((
                    "uneven send",
                    Expect::Refused(Error::UnevenCount {
                        argument: "send",
                        len: send_len,
                        nranks: n,
                    }),
                ))
            } else if bad {
                recv_len = rng.wrong_len(send_len);
                Some(("recv length", wrong_length("recv", recv_len, send_len)))
            } else {
                None
            }
            .unwrap_or(("valid", Expect::Ok));
            let what = format!("all_to_all::<{ty}>(send {send_len}, recv {recv_len}) of {n}");
            case("collectives", kind, what, expect, move |comm| {
                let (send, recv) = (Mem::<T>::new(send_len), Mem::<T>::new(recv_len));
                comm.all_to_all(&send.view(), &mut recv.view_mut(), STREAM)
            })
        }
        8 => {
            // gather: recv (count * n) on the root, checked wherever given
            let mut root = rng.rank(n);
            let mut send_len = count;
            let mut recv_len = if root != me && rng.chance(50) {
                None
            } else {
                Some(count * n as usize)
            };
            let (kind, expect) = if bad {
                match rng.below(4) {
                    0 => {
                        root = rng.bad_rank(n);
                        ("root out of range", rank_error("root", root, n))
                    }
                    1 if root == me => {
                        recv_len = None;
                        ("missing recv on root", missing("recv"))
                    }
                    2 => {
                        send_len = huge::<T>(rng, n);
                        let len = rng.len();
                        recv_len = Some(len);
                        (
                            "count x nranks overflows",
                            times_n("recv", send_len, n, len),
                        )
                    }
                    _ => {
                        let len = rng.wrong_len(count * n as usize);
                        recv_len = Some(len);
                        ("recv length", wrong_length("recv", len, count * n as usize))
                    }
                }
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!(
                "gather::<{ty}>(send {send_len}, recv {recv_len:?}, root {root}) on rank {me}/{n}"
            );
            case("collectives", kind, what, expect, move |comm| {
                let send = Mem::<T>::new(send_len);
                let recv = recv_len.map(Mem::<T>::new);
                let mut recv_view = recv.as_ref().map(Mem::view_mut);
                comm.gather(&send.view(), recv_view.as_mut(), root, STREAM)
            })
        }
        9 => {
            // scatter: send (count * n) on the root, checked wherever given
            let mut root = rng.rank(n);
            let mut recv_len = count;
            let mut send_len = if root != me && rng.chance(50) {
                None
            } else {
                Some(count * n as usize)
            };
            let (kind, expect) = if bad {
                match rng.below(4) {
                    0 => {
                        root = rng.bad_rank(n);
                        ("root out of range", rank_error("root", root, n))
                    }
                    1 if root == me => {
                        send_len = None;
                        ("missing send on root", missing("send"))
                    }
                    2 => {
                        recv_len = huge::<T>(rng, n);
                        let len = rng.len();
                        send_len = Some(len);
                        (
                            "count x nranks overflows",
                            times_n("send", recv_len, n, len),
                        )
                    }
                    _ => {
                        let len = rng.wrong_len(count * n as usize);
                        send_len = Some(len);
                        ("send length", wrong_length("send", len, count * n as usize))
                    }
                }
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!(
                "scatter::<{ty}>(send {send_len:?}, recv {recv_len}, root {root}) on rank {me}/{n}"
            );
            case("collectives", kind, what, expect, move |comm| {
                let recv = Mem::<T>::new(recv_len);
                let send = send_len.map(Mem::<T>::new);
                let send_view = send.as_ref().map(Mem::view);
                comm.scatter(send_view.as_ref(), &mut recv.view_mut(), root, STREAM)
            })
        }
        _ => {
            // send / recv: a peer of the communicator. Valid ones run in a group (one rank:
            // a send and a receive of the same length, which the stand-in pairs).
            let is_send = rng.chance(50);
            let peer = if bad { rng.bad_rank(n) } else { rng.rank(n) };
            let (kind, expect) = if bad {
                ("peer out of range", rank_error("peer", peer, n))
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!(
                "{}::<{ty}>({count}, peer {peer}) of {n}",
                if is_send { "send" } else { "recv" }
            );
            case("p2p", kind, what, expect, move |comm| {
                let buffer = Mem::<T>::new(count);
                if bad {
                    return if is_send {
                        comm.send(&buffer.view(), peer, STREAM)
                    } else {
                        comm.recv(&mut buffer.view_mut(), peer, STREAM)
                    };
                }
                let other = Mem::<T>::new(count);
                let group = Group::start()?;
                if is_send || n == 1 {
                    comm.send(&buffer.view(), peer, STREAM)?;
                }
                if !is_send || n == 1 {
                    comm.recv(&mut other.view_mut(), peer, STREAM)?;
                }
                group.end()
            })
        }
    }
}

fn short_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

// ---- Variable-count collectives --------------------------------------------------------------

/// Displacements packed in rank order (saturating: an overflowing one lies past any buffer).
fn packed(counts: &[usize]) -> Vec<usize> {
    let mut offset = 0usize;
    counts
        .iter()
        .map(|&c| {
            let d = offset;
            offset = offset.saturating_add(c);
            d
        })
        .collect()
}

/// The rule "every non-empty block lies inside the buffer": the first block (by rank) that
/// does not, as (index, displ, count).
fn first_past_end(counts: &[usize], displs: &[usize], len: usize) -> Option<(usize, usize, usize)> {
    (0..counts.len())
        .find(|&i| counts[i] > 0 && displs[i].checked_add(counts[i]).is_none_or(|end| end > len))
        .map(|i| (i, displs[i], counts[i]))
}

/// Blocks of `counts` in a random rank order with random gaps (at least 8, the largest count,
/// when `spread`, so that moving one block onto another overlaps those two only); empty blocks
/// get any displacement, even past the end (they are never read or written). Returns the
/// displacements and a buffer length that holds every block.
fn lay_out(rng: &mut Rng, counts: &[usize], spread: bool) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..counts.len()).collect();
    rng.shuffle(&mut order);
    let mut displs = vec![0; counts.len()];
    let mut offset = 0;
    for &i in &order {
        if counts[i] > 0 {
            displs[i] = offset;
            offset += counts[i] + if spread { 8 + rng.upto(3) } else { rng.upto(2) };
        }
    }
    for i in 0..counts.len() {
        if counts[i] == 0 {
            displs[i] = match rng.below(4) {
                0 => usize::MAX,
                _ => rng.upto(offset + 20),
            };
        }
    }
    (displs, offset + rng.upto(3))
}

/// A list of `n` entries made another length (shorter, longer or empty).
fn wrong_count_list(rng: &mut Rng, list: &mut Vec<usize>, n: usize) {
    let len = loop {
        let len = rng.upto(n + 3);
        if len != n {
            break len;
        }
    };
    list.resize(len, rng.upto(8));
}

fn counts_length(argument: &'static str, len: usize, n: i32) -> Expect {
    Expect::Refused(Error::CountsLength {
        argument,
        len,
        nranks: n,
    })
}

fn past_end(
    argument: &'static str,
    counts_argument: &'static str,
    buffer: &'static str,
    counts: &[usize],
    displs: &[usize],
    buffer_len: usize,
) -> Expect {
    match first_past_end(counts, displs, buffer_len) {
        Some((index, displ, count)) => Expect::Refused(Error::BlockPastEnd {
            argument,
            counts_argument,
            index,
            displ,
            count,
            buffer,
            buffer_len,
        }),
        None => panic!("generator: no block past the end of {buffer} ({counts:?} at {displs:?} in {buffer_len})"),
    }
}

/// Makes blocks overflow or leave their buffer: a block moved past the end (or to a
/// displacement whose end overflows), a count past it, or the buffer shortened; with `packed`
/// displacements (recomputed here), a count or the buffer only. Needs a non-empty block, which
/// it makes if there is none. Block `keep`'s count stays small (it sizes a buffer of its own).
fn push_past_end(
    rng: &mut Rng,
    counts: &mut [usize],
    displs: &mut Vec<usize>,
    len: &mut usize,
    keep: Option<usize>,
    is_packed: bool,
) {
    if counts.iter().all(|&c| c == 0) {
        let i = rng.upto(counts.len() - 1);
        counts[i] = *len + 1 + rng.upto(6);
    } else {
        let i = loop {
            let i = rng.upto(counts.len() - 1);
            if counts[i] > 0 {
                break i;
            }
        };
        let end = (0..counts.len())
            .filter(|&j| counts[j] > 0)
            .map(|j| displs[j] + counts[j])
            .max()
            .unwrap();
        match rng.below(4) {
            2 if keep != Some(i) => counts[i] = usize::MAX - rng.upto(100),
            0 if !is_packed => displs[i] = (*len + 1).saturating_sub(counts[i]) + rng.upto(10),
            1 if !is_packed => displs[i] = usize::MAX - rng.upto(counts[i] - 1), // end overflows
            _ => *len = rng.upto(end - 1),
        }
    }
    if is_packed {
        *displs = packed(counts);
    }
}

/// Moves block q onto block p (p != q, both made non-empty), in a `spread` layout: those two
/// overlap and no other pair does. Returns the expected error for `argument`.
fn make_overlap(
    rng: &mut Rng,
    argument: &'static str,
    counts: &mut [usize],
    displs: &mut [usize],
    len: &mut usize,
) -> Expect {
    let n = counts.len();
    let p = rng.upto(n - 1);
    let q = loop {
        let q = rng.upto(n - 1);
        if q != p {
            break q;
        }
    };
    if counts[p] == 0 {
        // a place of its own past every block, then the gap
        counts[p] = 1 + rng.upto(7);
        displs[p] = *len + 8;
    }
    if counts[q] == 0 {
        counts[q] = 1 + rng.upto(7);
    }
    displs[q] = displs[p] + rng.upto(counts[p] - 1);
    let (a, b) = (
        (displs[p], displs[p] + counts[p]),
        (displs[q], displs[q] + counts[q]),
    );
    *len = (*len).max(a.1).max(b.1);
    let (index, other) = (p.max(q), p.min(q));
    Expect::RefusedLike(
        format!("BlocksOverlap {{ argument: {argument:?}, index: {index}, other: {other}, blocks: {a:?} and {b:?} }}"),
        Box::new(move |e| match e {
            Error::BlocksOverlap { argument: arg, index: i, other: o, blocks } => {
                *arg == argument && (*i, *o) == (index, other) && (blocks == &[a, b] || blocks == &[b, a])
            }
            _ => false,
        }),
    )
}

fn small_counts(rng: &mut Rng, n: i32) -> Vec<usize> {
    (0..n)
        .map(|_| if rng.chance(25) { 0 } else { 1 + rng.upto(7) })
        .collect()
}

fn variable_count<'a, T: DataType>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let (n, me) = (cx.n, cx.me);
    let nu = n as usize;
    let ty = short_name::<T>();
    match rng.below(3) {
        0 => {
            // all_to_allv
            let mut send_counts = small_counts(rng, n);
            let mut recv_counts = if n == 1 {
                send_counts.clone()
            } else {
                small_counts(rng, n)
            };
            let (mut send_displs, mut send_len) = if rng.chance(20) {
                // every peer reads the same block: send blocks may overlap
                let c = send_counts.clone();
                (vec![0; nu], c.into_iter().max().unwrap_or(0))
            } else {
                lay_out(rng, &send_counts, false)
            };
            let mutation = if bad {
                rng.below(if n > 1 { 4 } else { 3 })
            } else {
                9
            };
            let (mut recv_displs, mut recv_len) = lay_out(rng, &recv_counts, mutation == 3);
            let (kind, expect) = match mutation {
                0 => {
                    let which = rng.below(4);
                    let list = [
                        &mut send_counts,
                        &mut send_displs,
                        &mut recv_counts,
                        &mut recv_displs,
                    ];
                    let names = ["send_counts", "send_displs", "recv_counts", "recv_displs"];
                    let list = list.into_iter().nth(which as usize).unwrap();
                    wrong_count_list(rng, list, nu);
                    (
                        "a list not one per rank",
                        counts_length(names[which as usize], list.len(), n),
                    )
                }
                1 => {
                    push_past_end(
                        rng,
                        &mut send_counts,
                        &mut send_displs,
                        &mut send_len,
                        None,
                        false,
                    );
                    (
                        "send block past the end",
                        past_end(
                            "send_displs",
                            "send_counts",
                            "send",
                            &send_counts,
                            &send_displs,
                            send_len,
                        ),
                    )
                }
                2 => {
                    push_past_end(
                        rng,
                        &mut recv_counts,
                        &mut recv_displs,
                        &mut recv_len,
                        None,
                        false,
                    );
                    (
                        "recv block past the end",
                        past_end(
                            "recv_displs",
                            "recv_counts",
                            "recv",
                            &recv_counts,
                            &recv_displs,
                            recv_len,
                        ),
                    )
                }
                3 => (
                    "recv blocks overlap",
                    make_overlap(
                        rng,
                        "recv_displs",
                        &mut recv_counts,
                        &mut recv_displs,
                        &mut recv_len,
                    ),
                ),
                _ => ("valid", Expect::Ok),
            };
            let what = format!(
                "all_to_allv::<{ty}>(send {send_len}, {send_counts:?} at {send_displs:?}, recv {recv_len}, {recv_counts:?} at {recv_displs:?}) of {n}"
            );
            case("vcount", kind, what, expect, move |comm| {
                let (send, recv) = (Mem::<T>::new(send_len), Mem::<T>::new(recv_len));
                comm.all_to_allv(
                    &send.view(),
                    &send_counts,
                    &send_displs,
                    &mut recv.view_mut(),
                    &recv_counts,
                    &recv_displs,
                    STREAM,
                )
            })
        }
        1 => {
            // all_gatherv: send is this rank's block; recv blocks packed (None) or placed
            let mut counts = small_counts(rng, n);
            let explicit = rng.chance(60);
            let mutation = if bad {
                rng.below(if n > 1 && explicit { 5 } else { 4 })
            } else {
                9
            };
            let (mut displs, mut recv_len) = if explicit {
                lay_out(rng, &counts, mutation == 4)
            } else {
                let sum = counts.iter().sum::<usize>();
                (packed(&counts), sum + rng.upto(2))
            };
            let mut send_len = counts[me as usize];
            let (kind, expect) = match mutation {
                0 => {
                    if explicit && rng.chance(50) {
                        wrong_count_list(rng, &mut displs, nu);
                        (
                            "a list not one per rank",
                            counts_length("recv_displs", displs.len(), n),
                        )
                    } else {
                        wrong_count_list(rng, &mut counts, nu);
                        (
                            "a list not one per rank",
                            counts_length("recv_counts", counts.len(), n),
                        )
                    }
                }
                1 => {
                    send_len = rng.wrong_len(counts[me as usize]);
                    let e = Error::OwnBlockLength {
                        argument: "send",
                        len: send_len,
                        counts_argument: "recv_counts",
                        rank: me,
                        count: counts[me as usize],
                    };
                    ("send is not this rank's block", Expect::Refused(e))
                }
                2 if !explicit && n > 1 => {
                    // counts whose packed sum overflows
                    for (i, c) in counts.iter_mut().enumerate() {
                        if i != me as usize {
                            *c = usize::MAX / 2 + 1 + rng.upto(100);
                        }
                    }
                    displs = packed(&counts);
                    (
                        "counts overflow",
                        past_end(
                            "recv_displs",
                            "recv_counts",
                            "recv",
                            &counts,
                            &displs,
                            recv_len,
                        ),
                    )
                }
                2 | 3 => {
                    push_past_end(
                        rng,
                        &mut counts,
                        &mut displs,
                        &mut recv_len,
                        Some(me as usize),
                        !explicit,
                    );
                    send_len = counts[me as usize];
                    (
                        "recv block past the end",
                        past_end(
                            "recv_displs",
                            "recv_counts",
                            "recv",
                            &counts,
                            &displs,
                            recv_len,
                        ),
                    )
                }
                4 => {
                    let e =
                        make_overlap(rng, "recv_displs", &mut counts, &mut displs, &mut recv_len);
                    send_len = counts[me as usize];
                    ("recv blocks overlap", e)
                }
                _ => ("valid", Expect::Ok),
            };
            let what = format!(
                "all_gatherv::<{ty}>(send {send_len}, recv {recv_len}, {counts:?} at {}) on rank {me}/{n}",
                if explicit { format!("{displs:?}") } else { "packed".into() }
            );
            case("vcount", kind, what, expect, move |comm| {
                let (send, recv) = (Mem::<T>::new(send_len), Mem::<T>::new(recv_len));
                let displs = explicit.then_some(&displs[..]);
                comm.all_gatherv(&send.view(), &mut recv.view_mut(), &counts, displs, STREAM)
            })
        }
        _ => {
            // reduce_scatterv: send blocks (packed or placed, may overlap: they are read), recv
            // at least this rank's count
            let mut counts = small_counts(rng, n);
            let explicit = rng.chance(60);
            let complex_mutation = bad && T::COMPLEX && rng.chance(60);
            let (op, op_name) = pick_op::<T>(rng, complex_mutation);
            let (mut displs, mut send_len) = if explicit {
                lay_out(rng, &counts, false)
            } else {
                let sum = counts.iter().sum::<usize>();
                (packed(&counts), sum + rng.upto(2))
            };
            let mut recv_len = counts[me as usize] + rng.upto(2);
            let (kind, expect) = if complex_mutation {
                ("complex op", complex_op("op", op_name))
            } else if bad {
                match rng.below(3) {
                    0 => {
                        if explicit && rng.chance(50) {
                            wrong_count_list(rng, &mut displs, nu);
                            (
                                "a list not one per rank",
                                counts_length("send_displs", displs.len(), n),
                            )
                        } else {
                            wrong_count_list(rng, &mut counts, nu);
                            (
                                "a list not one per rank",
                                counts_length("recv_counts", counts.len(), n),
                            )
                        }
                    }
                    1 if counts[me as usize] > 0 => {
                        recv_len = rng.upto(counts[me as usize] - 1);
                        let e = Error::OwnBlockLength {
                            argument: "recv",
                            len: recv_len,
                            counts_argument: "recv_counts",
                            rank: me,
                            count: counts[me as usize],
                        };
                        ("recv shorter than this rank's block", Expect::Refused(e))
                    }
                    _ => {
                        push_past_end(
                            rng,
                            &mut counts,
                            &mut displs,
                            &mut send_len,
                            Some(me as usize),
                            !explicit,
                        );
                        recv_len = recv_len.max(counts[me as usize]);
                        (
                            "send block past the end",
                            past_end(
                                "send_displs",
                                "recv_counts",
                                "send",
                                &counts,
                                &displs,
                                send_len,
                            ),
                        )
                    }
                }
            } else {
                ("valid", Expect::Ok)
            };
            let what = format!(
                "reduce_scatterv::<{ty}>(send {send_len}, recv {recv_len}, {counts:?} at {}, {op_name}) on rank {me}/{n}",
                if explicit { format!("{displs:?}") } else { "packed".into() }
            );
            case("vcount", kind, what, expect, move |comm| {
                let (send, recv) = (Mem::<T>::new(send_len), Mem::<T>::new(recv_len));
                let displs = explicit.then_some(&displs[..]);
                comm.reduce_scatterv(
                    &send.view(),
                    &mut recv.view_mut(),
                    &counts,
                    displs,
                    op,
                    STREAM,
                )
            })
        }
    }
}

// ---- Reduction ops ------------------------------------------------------------------------------

fn reduction_op<'a>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let count = rng.len();
    let premulsum = cx.premulsum.expect("a PreMulSum op per seed");
    match (bad, rng.below(4)) {
        (true, 0) => case(
            "ops",
            "op of another communicator",
            format!("all_reduce::<f32>({count}, PreMulSum of the live communicator) on another"),
            Expect::Refused(Error::RedOpFromOtherCommunicator),
            move |comm| {
                let (send, recv) = (Mem::<f32>::new(count), Mem::<f32>::new(count));
                comm.all_reduce(&send.view(), &mut recv.view_mut(), premulsum, STREAM)
            },
        ),
        (true, 1) => {
            // on the op's own (live) communicator: a missed check would run the call there
            // and return Ok
            let live = cx.live;
            case(
                "ops",
                "op of another type",
                format!("all_reduce::<f64>({count}, PreMulSum over f32) on its communicator"),
                Expect::Refused(Error::RedOpTypeMismatch {
                    op: f32::DATA_TYPE,
                    data: f64::DATA_TYPE,
                }),
                move |_| {
                    let (send, recv) = (Mem::<f64>::new(count), Mem::<f64>::new(count));
                    live.all_reduce(&send.view(), &mut recv.view_mut(), premulsum, STREAM)
                },
            )
        }
        (true, 2) => case(
            "ops",
            "complex PreMulSum scalar",
            "pre_mul_sum(Complex32)".into(),
            complex_op("scalar", "premulsum"),
            |comm| comm.pre_mul_sum(Complex32 { re: 2.0, im: 1.0 }).map(drop),
        ),
        (true, _) => case(
            "ops",
            "empty device scalar",
            "pre_mul_sum_device(empty view)".into(),
            Expect::Refused(Error::BufferTooSmall {
                argument: "scalar",
                len: 0,
                needed: 1,
            }),
            |comm| {
                let scalar = Mem::<f32>::new(0);
                comm.pre_mul_sum_device(scalar.view()).map(drop)
            },
        ),
        (false, 0) if cx.premulsum_slots.get() > 0 => {
            cx.premulsum_slots.set(cx.premulsum_slots.get() - 1);
            let device = rng.chance(50);
            case(
                "ops",
                "valid",
                format!("all_reduce::<f32>({count}, a new PreMulSum, device scalar: {device})"),
                Expect::Ok,
                move |comm| {
                    let scalar = Mem::<f32>::new(1);
                    let op = if device {
                        comm.pre_mul_sum_device(scalar.view())?
                    } else {
                        comm.pre_mul_sum(0.5f32)?
                    };
                    let (send, recv) = (Mem::<f32>::new(count), Mem::<f32>::new(count));
                    comm.all_reduce(&send.view(), &mut recv.view_mut(), op.op(), STREAM)
                },
            )
        }
        (false, _) => case(
            "ops",
            "valid",
            format!("all_reduce::<f32>({count}, the seed's PreMulSum)"),
            Expect::Ok,
            move |comm| {
                let (send, recv) = (Mem::<f32>::new(count), Mem::<f32>::new(count));
                comm.all_reduce(&send.view(), &mut recv.view_mut(), premulsum, STREAM)
            },
        ),
    }
}

// ---- Ranks of constructors, splits and teams ----------------------------------------------------

fn ranks_and_teams<'a>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let n = cx.n;
    match rng.below(3) {
        0 => {
            // init_rank: nranks >= 1, rank in 0..nranks
            let mut nranks = 1 + rng.below(8) as i32;
            let mut rank = rng.rank(nranks);
            let (kind, expect) = if bad && rng.chance(40) {
                let far = -(rng.below(100) as i32);
                nranks = rng.pick(&[0, -1, i32::MIN, far]);
                (
                    "nranks below 1",
                    Expect::Refused(Error::InvalidRankCount { nranks }),
                )
            } else if bad {
                rank = rng.bad_rank(nranks);
                ("rank out of range", rank_error("rank", rank, nranks))
            } else {
                ("valid", Expect::Ok)
            };
            case(
                "ranks",
                kind,
                format!("init_rank({nranks}, rank {rank})"),
                expect,
                move |_| Communicator::init_rank(nranks, &UniqueId::new()?, rank).map(drop),
            )
        }
        1 => {
            // split: a color >= 0 or None (joins none)
            let color = if bad {
                let far = -1 - rng.below(1000) as i32;
                Some(rng.pick(&[-1, -2, i32::MIN, far]))
            } else if rng.chance(30) {
                None
            } else {
                Some(rng.below(1000) as i32)
            };
            let key = rng.next() as i32;
            let (kind, expect) = if let Some(c @ ..=-1) = color {
                (
                    "negative color",
                    Expect::Refused(Error::InvalidColor { color: c }),
                )
            } else {
                ("valid", Expect::Ok)
            };
            case(
                "ranks",
                kind,
                format!("split({color:?}, key {key})"),
                expect,
                move |comm| comm.split(color, key).map(drop),
            )
        }
        _ => {
            // a team's rank: 0..team.nRanks (the stand-in lacks the team functions)
            let any = 1 + rng.below(16) as i32;
            let n_ranks = rng.pick(&[0, 1, 2, n, any, -1]);
            let team_rank = if bad {
                loop {
                    let any = rng.next() as i32;
                    let r = rng.pick(&[
                        n_ranks,
                        n_ranks.saturating_add(1),
                        -1,
                        i32::MAX,
                        i32::MIN,
                        any,
                    ]);
                    if !(0..n_ranks).contains(&r) {
                        break r;
                    }
                }
            } else if n_ranks > 0 {
                rng.rank(n_ranks)
            } else {
                return ranks_and_teams(rng, cx, bad);
            };
            let to_lsa = rng.chance(50);
            let team = Team {
                nRanks: n_ranks,
                rank: 0,
                stride: 1,
            };
            let function = if to_lsa {
                "ncclTeamRankToLsa"
            } else {
                "ncclTeamRankToWorld"
            };
            let (kind, expect) = if bad {
                (
                    "team rank out of range",
                    Expect::Refused(Error::TeamRankOutOfRange {
                        argument: "team_rank",
                        rank: team_rank,
                        nranks: n_ranks,
                    }),
                )
            } else {
                ("valid", Expect::Reaches(function))
            };
            case(
                "ranks",
                kind,
                format!("{function}(team of {n_ranks}, {team_rank})"),
                expect,
                move |comm| {
                    if to_lsa {
                        comm.team_rank_to_lsa(team, team_rank).map(drop)
                    } else {
                        comm.team_rank_to_world(team, team_rank).map(drop)
                    }
                },
            )
        }
    }
}

// ---- Configs ------------------------------------------------------------------------------------

type Setter<C> = fn(&mut C, i32);

/// Every int option of CommConfig by its ncclConfig_t field. What NCCL documents for one (a
/// range, or a flag group's flags) is the crate's own table, `CommConfig::DOCUMENTED`, generated
/// from policy/python_api.toml as Python's check is; an option without an entry there is
/// NCCL's alone to judge.
const COMM_OPTIONS: [(&str, Setter<CommConfig>); 21] = [
    ("blocking", |c, v| c.blocking = Some(v & 1 == 1)),
    ("cgaClusterSize", |c, v| c.cga_cluster_size = Some(v)),
    ("minCTAs", |c, v| c.min_ctas = Some(v)),
    ("maxCTAs", |c, v| c.max_ctas = Some(v)),
    ("splitShare", |c, v| c.split_share = Some(v & 1 == 1)),
    ("trafficClass", |c, v| c.traffic_class = Some(v)),
    ("collnetEnable", |c, v| c.collnet_enable = Some(v & 1 == 1)),
    ("CTAPolicy", |c, v| c.cta_policy = Some(v)),
    ("shrinkShare", |c, v| c.shrink_share = Some(v & 1 == 1)),
    ("nvlsCTAs", |c, v| c.nvls_ctas = Some(v)),
    ("nChannelsPerNetPeer", |c, v| {
        c.n_channels_per_net_peer = Some(v)
    }),
    ("nvlinkCentricSched", |c, v| {
        c.nvlink_centric_sched = Some(v)
    }),
    ("graphUsageMode", |c, v| c.graph_usage_mode = Some(v)),
    ("numRmaCtx", |c, v| c.num_rma_ctx = Some(v)),
    ("maxP2pPeers", |c, v| c.max_p2p_peers = Some(v)),
    ("graphStreamOrdering", |c, v| {
        c.graph_stream_ordering = Some(v)
    }),
    ("launchOrderImplicit", |c, v| {
        c.launch_order_implicit = Some(v)
    }),
    ("numRmaSig", |c, v| c.num_rma_sig = Some(v)),
    ("rmaEagerInit", |c, v| c.rma_eager_init = Some(v)),
    ("hostCftMode", |c, v| c.host_cft_mode = Some(v)),
    ("nvlsHostMode", |c, v| c.nvls_host_mode = Some(v)),
];

const COLL_OPTIONS: [(&str, Setter<CollConfig>); 6] = [
    ("minCTAs", |c, v| c.min_ctas = Some(v)),
    ("maxCTAs", |c, v| c.max_ctas = Some(v)),
    ("nvlsCTAs", |c, v| c.nvls_ctas = Some(v)),
    ("cgaClusterSize", |c, v| c.cga_cluster_size = Some(v)),
    ("forceAlgSelection", |c, v| {
        c.force_alg_selection = Some(v & 1 == 1)
    }),
    ("CTAPolicy", |c, v| c.cta_policy = Some(v)),
];

/// What NCCL documents for `field` of a config (its DOCUMENTED table), or None.
fn documented(
    table: &[(&'static str, Documented, &'static str)],
    field: &str,
) -> Option<Documented> {
    table
        .iter()
        .find(|(f, ..)| *f == field)
        .map(|(_, rule, _)| *rule)
}

/// A value NCCL documents (any int where it documents none).
fn in_range(rng: &mut Rng, rule: Option<Documented>) -> i32 {
    match rule {
        Some(Documented::Range(lo, hi)) => lo + rng.below((hi - lo + 1) as u64) as i32,
        Some(Documented::Flags(mask)) => rng.next() as i32 & mask,
        None => {
            let (any, small) = (rng.next() as i32, rng.below(64) as i32);
            rng.pick(&[0, 1, -1, i32::MAX, i32::MIN, any, small])
        }
    }
}

/// A value NCCL does not document: just past either end of a range, i32's extremes, or a
/// negative value or an unknown flag of a flag group.
fn out_of_range(rng: &mut Rng, rule: Documented) -> i32 {
    let value = match rule {
        Documented::Range(lo, hi) => {
            let (below, above) = (
                lo - 1 - rng.below(1000) as i32,
                hi + 1 + rng.below(1000) as i32,
            );
            rng.pick(&[lo - 1, hi + 1, i32::MIN, i32::MAX, below, above])
        }
        Documented::Flags(mask) => {
            let unknown =
                (1 << (31 - mask.leading_zeros()).min(30) << 1) | (rng.next() as i32 & mask);
            rng.pick(&[-1, i32::MIN, unknown, i32::MAX & !mask])
        }
    };
    assert!(!rule.allows(value), "{value} is documented for {rule:?}");
    value
}

/// One option of `options` that NCCL documents (at random), its setter and what it documents.
fn documented_option<C>(
    rng: &mut Rng,
    options: &[(&'static str, Setter<C>)],
    table: &[(&'static str, Documented, &'static str)],
) -> (&'static str, Setter<C>, Documented) {
    let with: Vec<_> = options
        .iter()
        .filter_map(|&(field, setter)| documented(table, field).map(|rule| (field, setter, rule)))
        .collect();
    assert!(
        !with.is_empty(),
        "no documented option: nothing to put out of range"
    );
    with[rng.below(with.len() as u64) as usize]
}

fn config_range(record: &'static str, field: &'static str, value: i32) -> Expect {
    Expect::RefusedLike(
        format!(
            "ConfigValueOutOfRange {{ record: {record:?}, field: {field:?}, value: {value}, .. }}"
        ),
        Box::new(move |e| {
            matches!(e, Error::ConfigValueOutOfRange { record: r, field: f, value: v, .. }
                if *r == record && *f == field && *v == i64::from(value))
        }),
    )
}

fn config_version(layout_codes: &[i32]) -> Version {
    Version::from_nccl_code(layout_codes[0])
}

/// Options the loaded library has, set to values NCCL's documentation allows; then maybe one
/// wrong thing: a value out of its documented range, an option newer than the library, a rank
/// or size out of range, a negative split color.
fn comm_config<'a>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let loaded = cx.loaded;
    let since = |field: &str| {
        config_version(
            ConfigLayout::first_with(field)
                .expect("a field of ncclConfig_t")
                .version_codes(),
        )
    };
    let mut config = CommConfig::default();
    let mut set = Vec::new();
    for (field, setter) in COMM_OPTIONS {
        if since(field) <= loaded && rng.chance(30) {
            let value = in_range(rng, documented(CommConfig::DOCUMENTED, field));
            setter(&mut config, value);
            set.push(format!("{field}={value}"));
        }
    }
    if rng.chance(20) && since("commName") <= loaded {
        config.comm_name = Some(CString::new(format!("fuzz-{}", rng.below(1000))).unwrap());
        set.push("commName".into());
    }
    if rng.chance(10) {
        config.net_name = Some(c"Socket".into());
        set.push("netName".into());
    }
    if rng.chance(20) {
        config.init_timeout = Some(Duration::from_secs(1 + rng.below(5)));
    }
    let newer: Vec<_> = COMM_OPTIONS
        .iter()
        .filter(|(f, ..)| since(f) > loaded)
        .collect();
    let (mut nranks, mut rank) = (cx.n, cx.me);
    let split = rng.chance(30);
    let mut color = Some(rng.below(100) as i32);
    let mutation = if bad { rng.below(4) } else { 9 };
    let (kind, expect) = match mutation {
        0 => {
            let (field, setter, rule) =
                documented_option(rng, &COMM_OPTIONS, CommConfig::DOCUMENTED);
            let value = out_of_range(rng, rule);
            setter(&mut config, value);
            set.push(format!("{field}={value}"));
            (
                "value out of range",
                config_range("ncclConfig_t", field, value),
            )
        }
        1 if !newer.is_empty() => {
            let &&(field, setter) = &newer[rng.below(newer.len() as u64) as usize];
            let value = in_range(rng, documented(CommConfig::DOCUMENTED, field));
            setter(&mut config, value);
            set.push(format!("{field}={value}"));
            let e = Error::ConfigFieldUnsupported {
                field,
                since: since(field),
                loaded,
            };
            ("option newer than the library", Expect::Refused(e))
        }
        2 if split => {
            let c = rng.pick(&[-1, -7, i32::MIN]);
            color = Some(c);
            (
                "negative color",
                Expect::Refused(Error::InvalidColor { color: c }),
            )
        }
        1..=3 if rng.chance(30) => {
            nranks = rng.pick(&[0, -1, i32::MIN]);
            (
                "nranks below 1",
                Expect::Refused(Error::InvalidRankCount { nranks }),
            )
        }
        1..=3 => {
            rank = rng.bad_rank(nranks);
            ("rank out of range", rank_error("rank", rank, nranks))
        }
        _ => ("valid", Expect::Ok),
    };
    // a wrong rank is the constructor's: make the case one
    let split = split && !matches!(kind, "nranks below 1" | "rank out of range");
    let what = if split {
        format!("split_config({color:?}, {{{}}})", set.join(", "))
    } else {
        format!(
            "init_rank_config({nranks}, rank {rank}, {{{}}})",
            set.join(", ")
        )
    };
    case("comm_config", kind, what, expect, move |comm| {
        if split {
            comm.split_config(color, 0, &config).map(drop)
        } else {
            Communicator::init_rank_config(nranks, &UniqueId::new()?, rank, &config).map(drop)
        }
    })
}

/// Per-call options, after the plain call's checks (kept valid here). The stand-in lacks the
/// *Config collectives, so a valid call ends in SymbolNotFound naming the function.
fn coll_config<'a>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let loaded = cx.loaded;
    // the layout the crate writes: the newest one not newer than the library, else the oldest
    let layout = CollConfigLayout::ALL
        .iter()
        .rev()
        .copied()
        .find(|l| config_version(l.version_codes()) <= loaded)
        .unwrap_or(CollConfigLayout::ALL[0]);
    let has =
        |field: &str| CollConfigLayout::first_with(field).is_some_and(|first| first <= layout);
    let mut config = CollConfig::default();
    let mut set = Vec::new();
    for (field, setter) in COLL_OPTIONS {
        if has(field) && rng.chance(30) {
            let value = in_range(rng, documented(CollConfig::DOCUMENTED, field));
            setter(&mut config, value);
            set.push(format!("{field}={value}"));
        }
    }
    if has("algSelection") && rng.chance(20) {
        config.alg_selection = Some(c"ring".into());
        set.push("algSelection".into());
    }
    if has("userProfilerTag") && rng.chance(20) {
        config.user_profiler_tag = Some(rng.next() >> 1);
        set.push("userProfilerTag".into());
    }
    let mut expect = None;
    let mut kind = "valid";
    if bad {
        let (field, setter, rule) = documented_option(rng, &COLL_OPTIONS, CollConfig::DOCUMENTED);
        let value = out_of_range(rng, rule);
        setter(&mut config, value);
        set.push(format!("{field}={value}"));
        expect = Some(config_range("ncclCollConfig_t", field, value));
        kind = "value out of range";
    }
    let count = rng.len();
    let (n, me) = (cx.n, cx.me);
    let method = rng.below(4);
    let function = [
        "ncclAllReduceConfig",
        "ncclAllGatherConfig",
        "ncclBroadcastConfig",
        "ncclReduceConfig",
    ][method as usize];
    let expect = expect.unwrap_or(Expect::Reaches(function));
    let root = rng.rank(n);
    let what = format!(
        "{function}::<f32>({count}, root {root}, {{{}}}) on rank {me}/{n}",
        set.join(", ")
    );
    case("coll_config", kind, what, expect, move |comm| {
        let send = Mem::<f32>::new(count);
        match method {
            0 => comm.all_reduce_config(
                &send.view(),
                &mut Mem::<f32>::new(count).view_mut(),
                RedOp::SUM,
                STREAM,
                &config,
            ),
            1 => comm.all_gather_config(
                &send.view(),
                &mut Mem::<f32>::new(count * n as usize).view_mut(),
                STREAM,
                &config,
            ),
            2 => comm.broadcast_in_place_config(&mut send.view_mut(), root, STREAM, &config),
            _ => {
                let recv = Mem::<f32>::new(count);
                let mut recv_view = recv.view_mut();
                comm.reduce_config(
                    &send.view(),
                    (root == me).then_some(&mut recv_view),
                    RedOp::MAX,
                    root,
                    STREAM,
                    &config,
                )
            }
        }
    })
}

// ---- Views and streams --------------------------------------------------------------------------

fn view_of<'a, T: DataType>(rng: &mut Rng, bad: bool) -> Case<'a> {
    let align = align_of::<T>();
    let ty = short_name::<T>();
    let mut address = (0x1000_0000 + rng.below(1 << 20) as usize) & !(align - 1);
    let mut len = if rng.chance(20) {
        max_len::<T>() - rng.upto(10)
    } else {
        rng.len()
    };
    let mutation = if bad {
        rng.below(if align > 1 { 3 } else { 2 })
    } else {
        9
    };
    let (kind, expect) = match mutation {
        0 => {
            address = 0;
            len = len.max(1);
            (
                "null pointer",
                Expect::Refused(Error::NullPointer { argument: "ptr" }),
            )
        }
        1 => {
            let past = max_len::<T>() + 1 + rng.upto(1000);
            len = rng.pick(&[
                max_len::<T>() + 1,
                usize::MAX,
                max_len::<T>().saturating_mul(2),
                past,
            ]);
            (
                "more bytes than isize",
                Expect::Refused(Error::CountOverflow {
                    argument: "len",
                    count: len,
                    factor: size_of::<T>(),
                }),
            )
        }
        2 => {
            address += 1 + rng.upto(align - 2);
            (
                "misaligned",
                Expect::Refused(Error::Misaligned {
                    argument: "ptr",
                    address,
                    align,
                }),
            )
        }
        _ => {
            if rng.chance(15) {
                (address, len) = (0, 0); // cudaMalloc(0)
            }
            ("valid", Expect::Ok)
        }
    };
    let writable = rng.chance(50);
    let what = format!(
        "DeviceSlice{}::<{ty}>::from_raw_parts({address:#x}, {len})",
        if writable { "Mut" } else { "" }
    );
    case("views", kind, what, expect, move |_| {
        // SAFETY: the views are made and dropped, never given to a call.
        unsafe {
            if writable {
                DeviceSliceMut::<T>::from_raw_parts(address as *mut T, len).map(drop)
            } else {
                DeviceSlice::<T>::from_raw_parts(address as *const T, len).map(drop)
            }
        }
    })
}

fn stream_of<'a>(rng: &mut Rng, bad: bool) -> Case<'a> {
    let raw = if bad { 0usize } else { 1 + rng.upto(1 << 20) };
    let expect = if bad {
        Expect::Refused(Error::NullStream)
    } else {
        Expect::Ok
    };
    case(
        "views",
        if bad { "null stream" } else { "valid" },
        format!("Stream::from_raw({raw:#x})"),
        expect,
        move |_| {
            // SAFETY: the stream is made and dropped, never given to a call.
            unsafe { Stream::from_raw(raw as *mut c_void) }.map(drop)
        },
    )
}

// ---- NCCL EP ------------------------------------------------------------------------------------

const LL: ncclEpAlgorithm_t = ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY;
const HT: ncclEpAlgorithm_t = ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT;

/// The layouts a group's algorithm has.
fn layouts_of(algorithm: ncclEpAlgorithm_t) -> [ncclEpLayout_t; 2] {
    if algorithm == LL {
        [
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            ncclEpLayout_t::NCCL_EP_LAYOUT_RANK_MAJOR,
        ]
    } else {
        [
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT,
        ]
    }
}

fn ep_config(rng: &mut Rng, n: i32, algorithm: ncclEpAlgorithm_t) -> GroupConfig {
    let max_tokens = 1 + rng.below(16) as u32;
    GroupConfig {
        algorithm,
        num_experts: n as u32 * (1 + rng.below(4) as u32),
        max_dispatch_tokens_per_rank: max_tokens,
        max_recv_tokens_per_rank: if algorithm == HT {
            max_tokens * n as u32 * 2
        } else {
            0
        },
        max_token_bytes: 512 * (1 + rng.below(4) as u32),
        ..GroupConfig::default()
    }
}

fn ep_case<'a>(rng: &mut Rng, cx: &Ctx<'a>, bad: bool) -> Case<'a> {
    let n = cx.n;
    let (group, experts, max_tokens) = cx.ep_group.expect("an EP group per seed");
    match rng.below(3) {
        0 => {
            // Group::create: counts above 0, known enum values, experts split evenly
            let algorithm = rng.pick(&[LL, HT]);
            let mut config = ep_config(rng, n, algorithm);
            let mutation = if bad {
                rng.below(if n > 1 { 6 } else { 5 })
            } else {
                9
            };
            let (kind, expect) = match mutation {
                0 => {
                    config.num_experts = 0;
                    (
                        "no experts",
                        ep_refusal("config.num_experts", Problem::Config),
                    )
                }
                1 => {
                    config.max_dispatch_tokens_per_rank = 0;
                    (
                        "no tokens",
                        ep_refusal("config.max_dispatch_tokens_per_rank", Problem::Config),
                    )
                }
                2 => {
                    config.algorithm = ncclEpAlgorithm_t(rng.pick(&[2, 7, 100, -1, i32::MAX]) as _);
                    (
                        "unknown algorithm",
                        unknown_enum("algorithm", config.algorithm.0 as i64),
                    )
                }
                3 => {
                    config.zero_copy = ncclEpZeroCopyMode_t(rng.pick(&[3, 9, -1]) as _);
                    (
                        "unknown zero_copy",
                        unknown_enum("zero_copy", config.zero_copy.0 as i64),
                    )
                }
                4 => {
                    config.overflow_policy = ncclEpOverflowPolicy_t(rng.pick(&[3, 11, -2]) as _);
                    (
                        "unknown overflow_policy",
                        unknown_enum("overflow_policy", config.overflow_policy.0 as i64),
                    )
                }
                5 => {
                    config.num_experts = loop {
                        let e = 1 + rng.below(64) as u32;
                        if e % n as u32 != 0 {
                            break e;
                        }
                    };
                    (
                        "experts not split evenly",
                        ep_refusal("config", Problem::Limit),
                    )
                }
                _ => ("valid", Expect::Ok),
            };
            let what = format!(
                "ep::Group::create(algorithm {}, experts {}, max tokens {}) over {n} ranks",
                config.algorithm.0, config.num_experts, config.max_dispatch_tokens_per_rank
            );
            case("ep", kind, what, expect, move |comm| {
                ep::Group::create(comm, &config).map(drop)
            })
        }
        1 => {
            // create_handle: topk_idx [tokens, top_k] of int32/int64 on the group's device,
            // tokens <= max_dispatch_tokens_per_rank, 1 <= top_k <= num_experts
            let mut tokens = 1 + rng.upto(max_tokens - 1);
            let mut top_k = 1 + rng.upto(experts.min(8) - 1);
            let mut int64 = rng.chance(50);
            let mut dtype: Option<&str> = None;
            let mut shape_rank = 2;
            let mut device = group.device();
            let mut layout = rng.pick(&layouts_of(group.algorithm()));
            let mutation = if bad { rng.below(8) } else { 9 };
            let (kind, expect) = match mutation {
                0 => {
                    top_k = experts + 1 + rng.upto(3);
                    (
                        "top_k above experts",
                        ep_refusal("topk_idx", Problem::Limit),
                    )
                }
                1 => {
                    tokens = max_tokens + 1 + rng.upto(8);
                    (
                        "more tokens than the group's maximum",
                        ep_refusal("topk_idx", Problem::Limit),
                    )
                }
                2 => {
                    top_k = 0;
                    ("top_k 0", ep_refusal("topk_idx", Problem::Limit))
                }
                3 => {
                    shape_rank = rng.pick(&[1, 3]);
                    ("not 2-D", ep_refusal("topk_idx", Problem::Shape))
                }
                4 => {
                    dtype = Some(rng.pick(&["f32", "u8", "f64"]));
                    ("element type", ep_refusal("topk_idx", Problem::DataType))
                }
                5 => {
                    device += 1 + rng.below(3) as i32;
                    ("another device", ep_refusal("topk_idx", Problem::Device))
                }
                6 => {
                    layout = if group.algorithm() == LL {
                        ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT
                    } else {
                        ncclEpLayout_t::NCCL_EP_LAYOUT_RANK_MAJOR
                    };
                    (
                        "layout of the other algorithm",
                        ep_refusal("layout", Problem::Value),
                    )
                }
                7 => {
                    layout = ncclEpLayout_t(rng.pick(&[4, 42, -1]) as _);
                    ("unknown layout", unknown_enum("layout", layout.0 as i64))
                }
                _ => {
                    int64 = rng.chance(50);
                    ("valid", Expect::Ok)
                }
            };
            let shape: Vec<usize> = match shape_rank {
                1 => vec![tokens],
                3 => vec![tokens, top_k, 1],
                _ => vec![tokens, top_k],
            };
            let what = format!(
                "create_handle(layout {}, topk_idx {shape:?} {} on device {device}) of a group of {experts} experts, max {max_tokens} tokens, algorithm {}",
                layout.0,
                dtype.unwrap_or(if int64 { "i64" } else { "i32" }),
                group.algorithm().0
            );
            case("ep", kind, what, expect, move |_| match dtype {
                Some("f32") => create_handle::<f32>(group, layout, &shape, device),
                Some("u8") => create_handle::<u8>(group, layout, &shape, device),
                Some(_) => create_handle::<f64>(group, layout, &shape, device),
                None if int64 => create_handle::<i64>(group, layout, &shape, device),
                None => create_handle::<i32>(group, layout, &shape, device),
            })
        }
        _ => {
            // Tensor::new: a shape whose elements are exactly the memory's, of real numbers
            let shape: Vec<usize> = (0..1 + rng.below(3)).map(|_| 1 + rng.upto(6)).collect();
            let elements: usize = shape.iter().product();
            let mut len = elements;
            let mut shape_given = shape.clone();
            let mut complex = false;
            let mutation = if bad { rng.below(3) } else { 9 };
            let (kind, expect) = match mutation {
                0 => {
                    len = rng.wrong_len(elements);
                    (
                        "shape disagrees with the memory",
                        ep_refusal("shape", Problem::Shape),
                    )
                }
                1 => {
                    shape_given.clear();
                    len = rng.len();
                    ("no dimension", ep_refusal("shape", Problem::Shape))
                }
                2 => {
                    complex = true;
                    ("complex elements", ep_refusal("memory", Problem::DataType))
                }
                _ => ("valid", Expect::Ok),
            };
            let what = format!(
                "Tensor::new({}memory {len}, shape {shape_given:?})",
                if complex { "complex " } else { "" }
            );
            case("ep", kind, what, expect, move |_| {
                if complex {
                    let m = Mem::<Complex32>::new(len);
                    Tensor::new(&m.view(), &shape_given, 0).map(drop)
                } else {
                    let m = Mem::<u8>::new(len);
                    Tensor::new(&m.view(), &shape_given, 0).map(drop)
                }
            })
        }
    }
}

/// A handle of `group` routed by a topk_idx tensor of T of `shape` on `device`, then dropped.
fn create_handle<T: DataType>(
    group: &ep::Group<'_>,
    layout: ncclEpLayout_t,
    shape: &[usize],
    device: i32,
) -> Result<()> {
    let memory = Mem::<T>::new(shape.iter().product());
    let view = memory.view();
    let topk_idx = Tensor::new(&view, shape, device)?;
    let handle = group.create_handle(layout, &topk_idx, None, None, STREAM)?;
    drop(handle);
    Ok(())
}

// ---- Running and counting -----------------------------------------------------------------------

#[derive(Clone, Copy, Default)]
struct Tally {
    tried: usize,
    wrong: usize,
    clean: usize,
    raw: usize,
    silent: usize,
}

static TRIED: AtomicUsize = AtomicUsize::new(0);
static CLEAN: AtomicUsize = AtomicUsize::new(0);
static RAW: AtomicUsize = AtomicUsize::new(0);
static SILENT: AtomicUsize = AtomicUsize::new(0);
/// The case under way (its index in the run) and its seed, for the crash and hang reports.
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);
static STARTED_MS: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// A panic inside a case: its message (the case is counted raw); outside one, the default.
    static PANIC_MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
    static IN_CASE: Cell<bool> = const { Cell::new(false) };
}

struct Fuzz<'s> {
    nccl: &'s stand_in::StandIn,
    ep: &'s ep_stand_in::FakeEp,
    categories: BTreeMap<&'static str, Tally>,
    kinds: BTreeMap<(&'static str, &'static str), usize>,
    failures: Vec<String>,
    verbose: bool,
    clock: Instant,
}

impl Fuzz<'_> {
    fn run(&mut self, seed: u64, case: Case<'_>, comm: &Communicator) {
        let index = TRIED.load(Ordering::SeqCst);
        CURRENT.store(index, Ordering::SeqCst);
        CURRENT_SEED.store(seed, Ordering::SeqCst);
        STARTED_MS.store(self.clock.elapsed().as_millis() as u64, Ordering::SeqCst);
        if self.verbose {
            println!(
                "#{index} seed {seed:#x} [{}/{}] {}: expect {}",
                case.category,
                case.kind,
                case.what,
                case.expect.describe()
            );
        }
        let freed_uses = self.nccl.used_after_free();
        // SAFETY: no arguments.
        let ep_freed_uses = unsafe { (self.ep.used_after_free)() };
        self.nccl.clear();
        self.ep.take_calls();
        let run = case.run;
        IN_CASE.with(|c| c.set(true));
        let result = catch_unwind(AssertUnwindSafe(|| run(comm)));
        IN_CASE.with(|c| c.set(false));
        // a group's start and end name no communicator: the valid point-to-point cases open
        // one themselves, and a call inside one is seen by the communicator it names
        let mut contacts: Vec<String> = self
            .nccl
            .take_calls()
            .into_iter()
            .filter(|call| call != "group_start" && call != "group_end")
            .collect();
        contacts.extend(self.ep.take_calls());
        // SAFETY: as above.
        let ep_freed_now = unsafe { (self.ep.used_after_free)() };
        if self.nccl.used_after_free() != freed_uses || ep_freed_now != ep_freed_uses {
            contacts.push("a call on a freed communicator, group or handle".into());
        }
        let reached = !contacts.is_empty();
        let wrong = case.expect.wrong();
        // (outcome, why) with outcome 0 clean, 1 raw, 2 silent
        let (outcome, why) = match (&case.expect, result) {
            (_, Err(_)) => (
                1,
                format!(
                    "panicked: {}",
                    PANIC_MESSAGE
                        .with(|m| m.borrow_mut().take())
                        .unwrap_or_default()
                ),
            ),
            (Expect::QuietOk, Ok(Ok(()))) if reached => {
                (2, format!("reached the library: {contacts:?}"))
            }
            (Expect::QuietOk, Ok(Ok(()))) => (0, String::new()),
            (Expect::Refused(_) | Expect::RefusedLike(..), Ok(Ok(()))) => (2, "accepted".into()),
            (Expect::Refused(_) | Expect::RefusedLike(..), Ok(Err(e)))
                if reached || matches!(e, Error::Nccl { .. } | Error::SymbolNotFound { .. }) =>
            {
                let seen = if reached {
                    format!(" (the stand-in saw {contacts:?})")
                } else {
                    String::new()
                };
                (
                    2,
                    format!("passed to the library{seen}, which answered {e:?}"),
                )
            }
            (Expect::Refused(expected), Ok(Err(e))) if *expected == e => (0, String::new()),
            (Expect::RefusedLike(_, accepts), Ok(Err(e))) if accepts(&e) => (0, String::new()),
            (Expect::Ok, Ok(Ok(()))) => (0, String::new()),
            (Expect::Reaches(_), Ok(Ok(()))) => (0, String::new()),
            (Expect::Reaches(f), Ok(Err(Error::SymbolNotFound { function, .. })))
                if function == *f =>
            {
                (0, String::new())
            }
            (_, Ok(Err(e))) => (1, format!("got Err({e:?})")),
        };
        let tally = self.categories.entry(case.category).or_default();
        tally.tried += 1;
        tally.wrong += usize::from(wrong);
        *self.kinds.entry((case.category, case.kind)).or_default() += 1;
        TRIED.fetch_add(1, Ordering::SeqCst);
        match outcome {
            0 => {
                tally.clean += 1;
                CLEAN.fetch_add(1, Ordering::SeqCst);
            }
            1 => {
                tally.raw += 1;
                RAW.fetch_add(1, Ordering::SeqCst);
            }
            _ => {
                tally.silent += 1;
                SILENT.fetch_add(1, Ordering::SeqCst);
            }
        }
        if outcome != 0 {
            self.failures.push(format!(
                "{} #{index} seed {seed:#x} [{}/{}] {}: expected {}, {why}",
                ["clean", "raw", "silent"][outcome],
                case.category,
                case.kind,
                case.what,
                case.expect.describe()
            ));
        }
    }
}

fn summary(crash: usize, hang: usize) -> String {
    format!(
        "misuse_fuzz: tried={} clean={} raw={} silent={} crash={crash} hang={hang}",
        TRIED.load(Ordering::SeqCst) + crash + hang,
        CLEAN.load(Ordering::SeqCst),
        RAW.load(Ordering::SeqCst),
        SILENT.load(Ordering::SeqCst),
    )
}

/// To the process's stdout, past libtest's capture (the line is for a harness to read).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

// A crash (a signal) in a case: the summary line with crash=1, then the process ends. Only
// async-signal-safe calls (write, _exit) and atomics here.
extern "C" {
    fn signal(signum: c_int, handler: usize) -> usize;
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    fn _exit(status: c_int) -> !;
}
const CRASH_SIGNALS: [c_int; 5] = [
    4,  /* SIGILL */
    6,  /* SIGABRT */
    7,  /* SIGBUS */
    8,  /* SIGFPE */
    11, /* SIGSEGV */
];

struct Line {
    bytes: [u8; 512],
    len: usize,
}

impl Line {
    fn text(&mut self, s: &str) {
        for &b in s.as_bytes() {
            if self.len < self.bytes.len() {
                self.bytes[self.len] = b;
                self.len += 1;
            }
        }
    }
    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[i..] {
            self.text(std::str::from_utf8(&[d]).unwrap_or("?"));
        }
    }
}

extern "C" fn on_crash(signum: c_int) {
    let mut line = Line {
        bytes: [0; 512],
        len: 0,
    };
    line.text("\nmisuse_fuzz: signal ");
    line.number(signum as u64);
    line.text(" in case #");
    line.number(CURRENT.load(Ordering::SeqCst) as u64);
    line.text(" of seed ");
    line.number(CURRENT_SEED.load(Ordering::SeqCst));
    line.text(" (MISUSE_FUZZ_VERBOSE=1 prints every case)\nmisuse_fuzz: tried=");
    line.number(TRIED.load(Ordering::SeqCst) as u64 + 1);
    line.text(" clean=");
    line.number(CLEAN.load(Ordering::SeqCst) as u64);
    line.text(" raw=");
    line.number(RAW.load(Ordering::SeqCst) as u64);
    line.text(" silent=");
    line.number(SILENT.load(Ordering::SeqCst) as u64);
    line.text(" crash=1 hang=0\n");
    // SAFETY: a buffer of `len` bytes; write and _exit are async-signal-safe.
    unsafe {
        write(1, line.bytes.as_ptr().cast(), line.len);
        _exit(128 + signum);
    }
}

/// A case that runs past HANG_AFTER: the summary line with hang=1, then the process ends.
fn watchdog(clock: Instant) {
    std::thread::spawn(move || {
        let mut last = usize::MAX;
        while !DONE.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
            let current = TRIED.load(Ordering::SeqCst);
            let started = Duration::from_millis(STARTED_MS.load(Ordering::SeqCst));
            if current == last
                && clock.elapsed().saturating_sub(started) > HANG_AFTER
                && !DONE.load(Ordering::SeqCst)
            {
                say(&format!(
                    "misuse_fuzz: case #{} of seed {:#x} has run for over {HANG_AFTER:?}",
                    CURRENT.load(Ordering::SeqCst),
                    CURRENT_SEED.load(Ordering::SeqCst)
                ));
                say(&summary(0, 1));
                std::process::exit(1);
            }
            last = current;
        }
    });
}

/// A stand-in communicator of `n` ranks (this one `me`) destroyed in the stand-in: a call that
/// reaches it touches no memory and is counted (fakeUsedAfterFree). Never dropped.
fn poisoned(n: i32, me: i32) -> ManuallyDrop<Communicator> {
    let raw = Communicator::init_rank(n, &UniqueId::new().unwrap(), me)
        .unwrap()
        .into_raw();
    // SAFETY: a communicator the stand-in made; it never frees one, only marks it destroyed.
    assert_eq!(unsafe { ncclCommDestroy(raw) }.0, 0);
    // SAFETY: rank and size are the ones it was made with; never destroyed again (ManuallyDrop).
    ManuallyDrop::new(unsafe { Communicator::from_raw_parts(raw, me, n) })
}

type FakeEpSetNranks = unsafe extern "C" fn(c_int);

#[test]
fn misuse_fuzz() {
    // the stand-in libnccl's handle (its lock released: setup below takes it again), then both
    // stand-ins loaded and the lock held for the whole run
    let (nccl, serial) = stand_in::stand_in();
    drop(serial);
    let (fake_ep, _serial) = ep_stand_in::setup();
    let ep_hook = stand_in::hooks(&library_info(Library::NcclEp).unwrap().path);
    // SAFETY: fake_nccl_ep.c's fakeEpSetNranks(int).
    let set_ep_nranks =
        unsafe { std::mem::transmute::<*mut c_void, FakeEpSetNranks>(ep_hook(c"fakeEpSetNranks")) };
    let loaded = library_info(Library::Nccl).unwrap().version;

    let clock = Instant::now();
    let mut fuzz = Fuzz {
        nccl,
        ep: fake_ep,
        categories: BTreeMap::new(),
        kinds: BTreeMap::new(),
        failures: Vec::new(),
        verbose: std::env::var_os("MISUSE_FUZZ_VERBOSE").is_some_and(|v| v != "0"),
        clock,
    };
    let previous_hook = std::sync::Arc::new(std::panic::take_hook());
    let outside_cases = std::sync::Arc::clone(&previous_hook);
    std::panic::set_hook(Box::new(move |info| {
        if !IN_CASE.with(Cell::get) {
            return outside_cases(info);
        }
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        PANIC_MESSAGE.with(|m| *m.borrow_mut() = Some(format!("{message}{location}")));
    }));
    // SAFETY: a handler that calls async-signal-safe functions only; restored below.
    let previous_handlers: Vec<usize> = CRASH_SIGNALS
        .iter()
        .map(|&s| unsafe { signal(s, on_crash as extern "C" fn(c_int) as usize) })
        .collect();
    watchdog(clock);
    let premulsum_slots = Cell::new(PREMULSUM_SLOTS);

    for seed in SEEDS {
        let mut rng = Rng(seed);
        let n = 1 + rng.below(8) as i32;
        let me = rng.rank(n);
        // SAFETY: an int argument.
        unsafe { set_ep_nranks(n) };
        let live = Communicator::init_rank(n, &UniqueId::new().unwrap(), me).unwrap();
        let bad = poisoned(n, me);
        let psum = live.pre_mul_sum(2.0f32).unwrap();
        premulsum_slots.set(premulsum_slots.get() - 1);
        let algorithm = rng.pick(&[LL, HT]);
        let group_config = ep_config(&mut rng, n, algorithm);
        let group = ep::Group::create(&live, &group_config).unwrap();
        let cx = Ctx {
            live: &live,
            n,
            me,
            loaded,
            premulsum: Some(psum.op()),
            premulsum_slots: &premulsum_slots,
            ep_group: Some((
                &group,
                group_config.num_experts as usize,
                group_config.max_dispatch_tokens_per_rank as usize,
            )),
        };
        for _ in 0..CASES_PER_SEED {
            let wrong = rng.chance(BAD_PERCENT);
            let case = match rng.below(100) {
                0..=29 => any_type(&mut rng, &cx, wrong, Gen::Collective),
                30..=44 => any_type(&mut rng, &cx, wrong, Gen::VariableCount),
                45..=49 => reduction_op(&mut rng, &cx, wrong),
                50..=56 => ranks_and_teams(&mut rng, &cx, wrong),
                57..=66 => comm_config(&mut rng, &cx, wrong),
                67..=73 => coll_config(&mut rng, &cx, wrong),
                74..=81 => any_type(&mut rng, &cx, wrong, Gen::View),
                82..=83 => stream_of(&mut rng, wrong),
                _ => ep_case(&mut rng, &cx, wrong),
            };
            let comm = if case.expect.wrong() { &*bad } else { &live };
            fuzz.run(seed, case, comm);
        }
        lifetimes(&mut fuzz, &mut rng, seed, &cx);
        drop(cx);
        group.destroy().unwrap();
        drop(psum);
        live.destroy().unwrap();
    }

    DONE.store(true, Ordering::SeqCst);
    for (&signum, &handler) in CRASH_SIGNALS.iter().zip(&previous_handlers) {
        // SAFETY: the handler that was installed before.
        unsafe { signal(signum, handler) };
    }
    let _ = std::panic::take_hook(); // holds a clone of the previous hook
    match std::sync::Arc::try_unwrap(previous_hook) {
        Ok(hook) => std::panic::set_hook(hook),
        Err(_) => unreachable!("the fuzz hook was dropped above"),
    }

    for failure in fuzz.failures.iter().take(40) {
        say(&format!("misuse_fuzz: {failure}"));
    }
    if fuzz.failures.len() > 40 {
        say(&format!(
            "misuse_fuzz: ... and {} more",
            fuzz.failures.len() - 40
        ));
    }
    for (category, t) in &fuzz.categories {
        let kinds = fuzz
            .kinds
            .iter()
            .filter(|((c, _), _)| c == category)
            .count();
        say(&format!(
            "misuse_fuzz[{category}]: tried={} wrong={} valid={} kinds={kinds} clean={} raw={} silent={}",
            t.tried,
            t.wrong,
            t.tried - t.wrong,
            t.clean,
            t.raw,
            t.silent
        ));
    }
    say(&format!(
        "misuse_fuzz: {:.2} s",
        clock.elapsed().as_secs_f64()
    ));
    say(&summary(0, 0));
    let (raw, silent) = (RAW.load(Ordering::SeqCst), SILENT.load(Ordering::SeqCst));
    assert!(
        raw == 0 && silent == 0,
        "{raw} raw and {silent} silent outcomes (listed above)"
    );
    // every category both refused and accepted something
    for (category, t) in &fuzz.categories {
        assert!(
            t.wrong > 0 && t.wrong < t.tried,
            "{category}: {} wrong of {}",
            t.wrong,
            t.tried
        );
    }
}

#[derive(Clone, Copy)]
enum Gen {
    Collective,
    VariableCount,
    View,
}

fn any_type<'a>(rng: &mut Rng, cx: &Ctx<'a>, wrong: bool, generator: Gen) -> Case<'a> {
    macro_rules! with {
        ($t:ty) => {
            match generator {
                Gen::Collective => collective::<$t>(rng, cx, wrong),
                Gen::VariableCount => variable_count::<$t>(rng, cx, wrong),
                Gen::View => {
                    let _ = cx;
                    view_of::<$t>(rng, wrong)
                }
            }
        };
    }
    match rng.below(6) {
        0 => with!(f32),
        1 => with!(f64),
        2 => with!(i32),
        3 => with!(u8),
        4 => with!(i64),
        _ => with!(Complex32),
    }
}

// ---- Lifetimes at run time ----------------------------------------------------------------------

/// Use after an abort: every valid call on a communicator an AbortHandle aborted is
/// Error::Aborted, before NCCL (which freed it); what it owned (a PreMulSum op, a registered
/// buffer, a window) drops without a library call; an abort after the owner's destroy (or
/// into_raw) is CommunicatorGone.
fn lifetimes(fuzz: &mut Fuzz<'_>, rng: &mut Rng, seed: u64, cx: &Ctx<'_>) {
    let (n, me) = (cx.n, cx.me);
    let doomed = Communicator::init_rank(n, &UniqueId::new().unwrap(), me).unwrap();
    let handle = doomed.abort_handle();
    let memory = Mem::<f32>::new(16);
    let op = doomed.pre_mul_sum(3.0f32).unwrap();
    let registered = doomed.register(memory.part(0, 8)).unwrap();
    let window = doomed
        .register_window(memory.part_mut(8, 8), ncclbind::WindowFlags(0))
        .unwrap();
    let aborted = case(
        "lifetimes",
        "abort",
        "AbortHandle::abort on a live communicator".into(),
        Expect::Ok,
        |_| handle.abort(),
    );
    fuzz.run(seed, aborted, &doomed);
    let again = case(
        "lifetimes",
        "abort twice",
        "AbortHandle::abort again".into(),
        Expect::Ok,
        |_| handle.abort(),
    );
    fuzz.run(seed, again, &doomed);
    // the valid calls of the generators, on the aborted communicator
    for _ in 0..20 {
        let mut case = match rng.below(3) {
            0 | 1 => any_type(rng, cx, false, Gen::Collective),
            _ => any_type(rng, cx, false, Gen::VariableCount),
        };
        case.category = "lifetimes";
        case.kind = "call after abort";
        case.what = format!("{} after abort", case.what);
        case.expect = Expect::Refused(Error::Aborted);
        fuzz.run(seed, case, &doomed);
    }
    let count = 1 + rng.upto(7);
    let op_raw = op.op();
    let use_op = case(
        "lifetimes",
        "call after abort",
        format!("all_reduce::<f32>({count}, its PreMulSum) after abort"),
        Expect::Refused(Error::Aborted),
        move |comm| {
            let (send, recv) = (Mem::<f32>::new(count), Mem::<f32>::new(count));
            comm.all_reduce(&send.view(), &mut recv.view_mut(), op_raw, STREAM)
        },
    );
    fuzz.run(seed, use_op, &doomed);
    let drops = case(
        "lifetimes",
        "drop after abort",
        "drop a PreMulSum, a registered buffer and a window of an aborted communicator".into(),
        Expect::QuietOk,
        move |_| {
            drop(op);
            drop(registered);
            drop(window);
            Ok(())
        },
    );
    fuzz.run(seed, drops, &doomed);
    let gone = case(
        "lifetimes",
        "destroy after abort",
        "destroy an aborted communicator, as_raw null".into(),
        Expect::QuietOk,
        move |_| {
            assert!(doomed.as_raw().is_null());
            doomed.destroy()
        },
    );
    let elsewhere = poisoned(1, 0);
    fuzz.run(seed, gone, &elsewhere);
    // abort after the owner let go
    let owner = Communicator::init_rank(n, &UniqueId::new().unwrap(), me).unwrap();
    let late = owner.abort_handle();
    let into_raw = rng.chance(50);
    let raw = if into_raw {
        Some(owner.into_raw())
    } else {
        owner.destroy().unwrap();
        None
    };
    let what = format!(
        "AbortHandle::abort after the owner's {}",
        if into_raw { "into_raw" } else { "destroy" }
    );
    fuzz.run(
        seed,
        case(
            "lifetimes",
            "abort after destroy",
            what,
            Expect::Refused(Error::CommunicatorGone),
            move |_| late.abort(),
        ),
        &elsewhere,
    );
    if let Some(raw) = raw {
        // SAFETY: the stand-in's communicator, given up by into_raw: destroyed once, here.
        unsafe { ncclCommDestroy(raw) };
    }
    drop(memory);
}

// ---- Lifetimes at compile time -----------------------------------------------------------------

/// Misuse the borrow checker must refuse: (name, the error code, the misuse, the same code
/// without it). Each pair is one function over these parameters.
const COMPILE_FAIL: &[(&str, &str, &str, &str)] = &[
    (
        "communicator used after drop",
        "E0382",
        "drop(comm); let _ = comm.rank();",
        "let _ = comm.rank(); drop(comm);",
    ),
    (
        "communicator used after destroy",
        "E0382",
        "comm.destroy()?; comm.all_reduce_in_place(&mut buf, RedOp::SUM, STREAM)?;",
        "comm.all_reduce_in_place(&mut buf, RedOp::SUM, STREAM)?; comm.destroy()?;",
    ),
    (
        "a read view of a writable view outliving it",
        "E0597",
        "let read; { let inner = unsafe { DeviceSliceMut::from_raw_parts(ptr, 4)? }; read = inner.as_slice(); } let _ = read.len();",
        "let inner = unsafe { DeviceSliceMut::from_raw_parts(ptr, 4)? }; let read = inner.as_slice(); let _ = read.len();",
    ),
    (
        "send and recv aliasing one writable view",
        "E0502",
        "let read = buf.as_slice(); comm.all_reduce(&read, &mut buf, RedOp::SUM, STREAM)?;",
        "let read = buf.as_slice(); let _ = read.len(); comm.all_reduce_in_place(&mut buf, RedOp::SUM, STREAM)?;",
    ),
    (
        "a PreMulSum op outliving its PreMulSum",
        "E0597",
        "let op; { let premulsum = comm.pre_mul_sum(2.0f32)?; op = premulsum.op(); } comm.all_reduce_in_place(&mut buf, op, STREAM)?;",
        "let premulsum = comm.pre_mul_sum(2.0f32)?; let op = premulsum.op(); comm.all_reduce_in_place(&mut buf, op, STREAM)?;",
    ),
    (
        "a PreMulSum across its communicator's destroy",
        "E0505",
        "let premulsum = comm.pre_mul_sum(2.0f32)?; comm.destroy()?; drop(premulsum);",
        "let premulsum = comm.pre_mul_sum(2.0f32)?; drop(premulsum); comm.destroy()?;",
    ),
    (
        "a registered buffer across its communicator's destroy",
        "E0505",
        "let registered = comm.register(buf.as_slice())?; comm.destroy()?; drop(registered);",
        "let registered = comm.register(buf.as_slice())?; drop(registered); comm.destroy()?;",
    ),
    (
        "a registered buffer outliving the view it registered",
        "E0505",
        "let registered = comm.register(buf.as_slice())?; drop(buf); drop(registered);",
        "let registered = comm.register(buf.as_slice())?; drop(registered); drop(buf);",
    ),
    (
        "a window across its communicator's destroy",
        "E0505",
        "let window = comm.register_window(buf, WindowFlags(0))?; comm.destroy()?; drop(window);",
        "let window = comm.register_window(buf, WindowFlags(0))?; drop(window); comm.destroy()?;",
    ),
    (
        "an EP group across its communicator's destroy",
        "E0505",
        "let group = ep::Group::create(&comm, &ep::GroupConfig::default())?; comm.destroy()?; drop(group);",
        "let group = ep::Group::create(&comm, &ep::GroupConfig::default())?; drop(group); comm.destroy()?;",
    ),
    (
        "an EP handle across its group's destroy",
        "E0505",
        "let group = ep::Group::create(&comm, &ep::GroupConfig::default())?; let handle = group.init_handle(ep::LAYOUT, None, 2, None)?; group.destroy()?; drop(handle);",
        "let group = ep::Group::create(&comm, &ep::GroupConfig::default())?; let handle = group.init_handle(ep::LAYOUT, None, 2, None)?; drop(handle); group.destroy()?;",
    ),
    (
        "an EP tensor outliving its memory's view",
        "E0597",
        "let tensor; { let view = buf.as_slice(); tensor = ep::Tensor::new(&view, &[4], 0)?; } drop(tensor);",
        "let view = buf.as_slice(); let tensor = ep::Tensor::new(&view, &[4], 0)?; drop(tensor);",
    ),
    (
        "a communicator shared between threads (Send, not Sync)",
        "E0277",
        "std::thread::scope(|s| { s.spawn(|| comm.rank()); });",
        "std::thread::scope(|s| { s.spawn(move || comm.rank()); });",
    ),
    (
        "a group moved to another thread (NCCL groups are per thread)",
        "E0277",
        "let group = Group::start()?; std::thread::spawn(move || drop(group)).join().unwrap();",
        "let group = Group::start()?; drop(group);",
    ),
];

/// The snippet crate: one function per snippet, over a communicator, a writable view and its
/// pointer. `ep::LAYOUT` stands for a layout value.
fn snippet_crate(bodies: &[&str]) -> String {
    let mut text = String::from(
        "#![allow(unused, unreachable_code, clippy::all)]\n\
         use ncclbind::{Communicator, DeviceSlice, DeviceSliceMut, Group, RedOp, Result, Stream, WindowFlags};\n\
         const STREAM: Stream = Stream::LEGACY_DEFAULT;\n\
         mod ep_layout { pub const LAYOUT: ncclbind::sys::nccl_ep::ncclEpLayout_t = ncclbind::sys::nccl_ep::ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR; }\n\
         mod ep { pub use ncclbind::ep::*; pub use super::ep_layout::LAYOUT; }\n",
    );
    for (i, body) in bodies.iter().enumerate() {
        text.push_str(&format!(
            "pub fn case_{i}(comm: Communicator, mut buf: DeviceSliceMut<'static, f32>, ptr: *mut f32) -> Result<()> {{ {body} Ok(()) }}\n"
        ));
    }
    text
}

/// rustc's error codes in its output.
fn error_codes(stderr: &str) -> Vec<String> {
    stderr
        .match_indices("error[E")
        .map(|(i, _)| stderr[i + 6..].chars().take_while(|c| *c != ']').collect())
        .collect()
}

#[test]
fn lifetime_misuse_does_not_compile() {
    let (Some(rustc), Some(rlib)) = (
        std::env::var_os("MISUSE_FUZZ_RUSTC"),
        std::env::var_os("MISUSE_FUZZ_RLIB"),
    ) else {
        panic!("set MISUSE_FUZZ_RUSTC (the toolchain's rustc) and MISUSE_FUZZ_RLIB (libncclbind.rlib built by it); Bazel passes both");
    };
    let scratch = std::env::var_os("TEST_TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join("misuse_fuzz_compile");
    std::fs::create_dir_all(&scratch).unwrap();
    let compile = |name: &str, source: String| {
        let path = scratch.join(format!("{name}.rs"));
        std::fs::write(&path, source).unwrap();
        let output = std::process::Command::new(&rustc)
            .args([
                "--edition",
                "2021",
                "--crate-type",
                "lib",
                "--emit=metadata",
                "--crate-name",
                name,
                "-o",
            ])
            .arg(scratch.join(format!("lib{name}.rmeta")))
            .arg("--extern")
            .arg({
                let mut arg = std::ffi::OsString::from("ncclbind=");
                arg.push(&rlib);
                arg
            })
            .arg(&path)
            .output()
            .expect("run rustc");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // The misuse removed: every snippet compiles (so each failure below is its misuse's).
    let fixed: Vec<&str> = COMPILE_FAIL.iter().map(|c| c.3).collect();
    let (ok, stderr) = compile("misuse_fixed", snippet_crate(&fixed));
    assert!(
        ok,
        "the snippets without their misuse must compile:\n{stderr}"
    );
    let results: Vec<(usize, bool, String)> = std::thread::scope(|s| {
        let compile = &compile;
        let jobs: Vec<_> = COMPILE_FAIL
            .iter()
            .enumerate()
            .map(|(i, case)| {
                s.spawn(move || {
                    let (ok, stderr) = compile(&format!("misuse_{i}"), snippet_crate(&[case.2]));
                    (i, ok, stderr)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let mut wrong = Vec::new();
    for (i, ok, stderr) in results {
        let (name, code, ..) = COMPILE_FAIL[i];
        let codes = error_codes(&stderr);
        let verdict = if ok {
            "COMPILED (the misuse is accepted)".to_string()
        } else if codes.iter().all(|c| c == code) && !codes.is_empty() {
            format!("refused: {code}")
        } else {
            format!("refused with {codes:?}, expected {code} only:\n{stderr}")
        };
        say(&format!("misuse_fuzz compile-fail: {name}: {verdict}"));
        if !verdict.starts_with("refused: ") {
            wrong.push(name);
        }
    }
    say(&format!(
        "misuse_fuzz compile-fail: tried={} refused={} accepted_or_other={}",
        COMPILE_FAIL.len(),
        COMPILE_FAIL.len() - wrong.len(),
        wrong.len()
    ));
    assert!(
        wrong.is_empty(),
        "lifetime misuse not refused as expected: {wrong:?}"
    );
}
