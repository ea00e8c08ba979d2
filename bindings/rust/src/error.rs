//! The crate's one error type: what NCCL or the ncclbind runtime reported, or an argument
//! the crate rejected before calling NCCL.

use core::ffi::{c_char, c_int, CStr};
use std::fmt;
use std::time::Duration;

use crate::library::Version;
use crate::runtime;
use crate::sys::nccl::{ncclDataType_t, ncclResult_t};

/// The crate's result: an [`Error`] on failure.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq, Eq)]
/// Every failure the crate reports: NCCL's, the runtime's (no library, a missing function),
/// an argument rejected before NCCL is called, or a communicator's state.
#[non_exhaustive]
pub enum Error {
    /// NCCL returned a failure code from `function`.
    Nccl {
        /// The NCCL function, by its C name.
        function: &'static str,
        /// The `ncclResult_t` it returned.
        code: u32,
        /// `ncclInvalidUsage`, ...
        name: String,
        /// The loaded NCCL's `ncclGetErrorString`, or the runtime's text for codes it lacks.
        description: String,
        /// NCCL's own account, from `ncclGetLastError` right after the failure ("" if none).
        nccl_message: String,
    },
    /// The library could not be loaded; the message lists every path tried and why each failed.
    LibraryNotFound {
        /// The runtime's account.
        message: String,
    },
    /// The loaded library lacks `function`; the message names the version that first has it
    /// and the loaded library's version and path.
    SymbolNotFound {
        /// The missing function, by its C name.
        function: &'static str,
        /// The runtime's account.
        message: String,
    },
    /// Another failure of the ncclbind runtime (for example a library path set after loading).
    Runtime {
        /// The runtime's `NCCLBIND_ERROR_*` code.
        code: i32,
        /// The runtime's account.
        message: String,
    },

    // Argument checks, made before NCCL is called.
    /// A rank (root, peer, excluded rank, or this process's rank) outside `0..nranks`.
    RankOutOfRange {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// The rank given.
        rank: i32,
        /// The communicator's size.
        nranks: i32,
    },
    /// A communicator size below 1.
    InvalidRankCount {
        /// The size given.
        nranks: i32,
    },
    /// `count * factor` (elements times ranks, or elements times element size) overflows,
    /// or a count does not fit the C `int` NCCL takes.
    CountOverflow {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its element count.
        count: usize,
        /// What the count is multiplied by.
        factor: usize,
    },
    /// A buffer shorter than the operation needs.
    BufferTooSmall {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its length in elements.
        len: usize,
        /// The elements the operation needs.
        needed: usize,
    },
    /// A buffer whose length is not the one the operation needs (shorter would overrun,
    /// longer would leave elements silently out).
    WrongLength {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its length in elements.
        len: usize,
        /// The length the operation needs.
        expected: usize,
    },
    /// A buffer the operation needs on this rank (the root) was not given.
    MissingBuffer {
        /// The argument checked, by its Rust name.
        argument: &'static str,
    },
    /// A buffer whose length does not split evenly across the ranks.
    UnevenCount {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its length in elements.
        len: usize,
        /// The communicator's size.
        nranks: i32,
    },
    /// A negative split color (NCCL reserves them; pass None to join no new communicator).
    InvalidColor {
        /// The color given.
        color: i32,
    },
    /// A null CUDA stream: its meaning depends on how the caller's CUDA code was compiled,
    /// so pass `Stream::LEGACY_DEFAULT` or `Stream::PER_THREAD_DEFAULT` explicitly.
    NullStream,
    /// A reduction op created on another communicator.
    RedOpFromOtherCommunicator,
    /// A PreMulSum op used with data of another type than it was created for.
    RedOpTypeMismatch {
        /// The data type the op was created for.
        op: ncclDataType_t,
        /// The data type of the buffers.
        data: ncclDataType_t,
    },
    /// A reduction op other than sum and avg on complex numbers (`data`, the Rust type), which
    /// NCCL reduces as pairs of reals; `argument` is the op or, for a PreMulSum, its scalar.
    UnsupportedComplexOp {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// The op, as NCCL names it.
        op: String,
        /// The Rust element type.
        data: &'static str,
    },
    /// A list of counts or displacements (one per rank) of another length than the number of
    /// ranks.
    CountsLength {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its length.
        len: usize,
        /// The communicator's size.
        nranks: i32,
    },
    /// Block `index` (`count` elements at `displ`, from `counts_argument[index]` and
    /// `argument[index]`) does not fit `buffer`, which holds `buffer_len` elements.
    BlockPastEnd {
        /// The displacements' argument.
        argument: &'static str,
        /// The counts' argument.
        counts_argument: &'static str,
        /// The block's index (a rank).
        index: usize,
        /// Its displacement in elements.
        displ: usize,
        /// Its element count.
        count: usize,
        /// The buffer's argument.
        buffer: &'static str,
        /// The buffer's length in elements.
        buffer_len: usize,
    },
    /// Receive block `index` overlaps receive block `other` (a lower index); `blocks` are the
    /// two as element ranges, the one that starts first first. `argument` holds their
    /// displacements.
    BlocksOverlap {
        /// The displacements' argument.
        argument: &'static str,
        /// The later block's index (a rank).
        index: usize,
        /// The earlier block's index.
        other: usize,
        /// The two blocks as (start, end) element offsets.
        blocks: [(usize, usize); 2],
    },
    /// `argument` holds `len` elements, which does not fit this rank's block:
    /// `counts_argument[rank]` is `count`.
    OwnBlockLength {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// Its length in elements.
        len: usize,
        /// The counts' argument.
        counts_argument: &'static str,
        /// This rank.
        rank: i32,
        /// This rank's count.
        count: usize,
    },
    /// A unique id of the wrong length.
    UniqueIdLength {
        /// The length given, in bytes.
        len: usize,
    },
    /// A value of an open C enum (`type_name`) that the headers do not define.
    UnknownEnumValue {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// The C enum.
        type_name: &'static str,
        /// The value given.
        value: i64,
    },
    /// A path that cannot be passed to C (it holds a NUL byte).
    InvalidPath {
        /// The path given.
        path: String,
    },
    /// A string argument that cannot be passed to C (it holds a NUL byte).
    NulInString {
        /// The argument checked, by its Rust name.
        argument: &'static str,
    },
    /// A rank outside `0..nranks`, the ranks of a team (an `ncclTeam_t`'s `nRanks`).
    TeamRankOutOfRange {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// The rank given.
        rank: i32,
        /// The team's size.
        nranks: i32,
    },
    /// A null pointer for a view of one or more elements of device memory.
    NullPointer {
        /// The argument checked, by its Rust name.
        argument: &'static str,
    },
    /// A pointer that is not a multiple of its element type's alignment.
    Misaligned {
        /// The argument checked, by its Rust name.
        argument: &'static str,
        /// The address given.
        address: usize,
        /// The alignment the element type needs, in bytes.
        align: usize,
    },
    /// A config option (`field`, its C name in `record`) outside the range NCCL documents.
    ConfigValueOutOfRange {
        /// The C record: `ncclConfig_t` or `ncclCollConfig_t`.
        record: &'static str,
        /// The field, by its C name.
        field: &'static str,
        /// The value given.
        value: i64,
        /// What NCCL accepts, in words.
        allowed: &'static str,
    },
    /// A `CommConfig` option whose `ncclConfig_t` field (`field`, its C name) first appears
    /// in NCCL `since`, newer than the `loaded` library.
    ConfigFieldUnsupported {
        /// The `ncclConfig_t` field, by its C name.
        field: &'static str,
        /// The first NCCL that has it.
        since: Version,
        /// The loaded NCCL.
        loaded: Version,
    },
    /// An NCCL EP argument rejected before NCCL EP was called ([`crate::ep`]): `argument` names
    /// it as the method does (`inputs.tokens`, `topk_idx`, `config`), `problem` says which rule of
    /// policy/nccl_ep.toml it broke, `message` what was wrong, in words.
    Ep {
        /// The argument checked, by its Rust name (a record's field as `record.field`).
        argument: String,
        /// Which kind of rule it broke.
        problem: crate::ep::Problem,
        /// What was wrong, in words naming the values.
        message: String,
    },

    // Communicator state, checked before NCCL is called.
    /// The communicator was aborted through an [`AbortHandle`](crate::AbortHandle) (and
    /// freed): nothing more can be done with it.
    Aborted,
    /// [`AbortHandle::abort`](crate::AbortHandle::abort) after the communicator's owner
    /// destroyed it (or gave it up with `into_raw`).
    CommunicatorGone,
    /// A non-blocking `function` (a communicator's creation) was still in progress after
    /// `waited`, the configured timeout; the half-made communicator was aborted.
    Timeout {
        /// The NCCL function, by its C name.
        function: &'static str,
        /// How long it was waited for.
        waited: Duration,
    },
}

impl Error {
    /// Turns the code a C wrapper returned into an error; reads the thread's runtime and
    /// NCCL messages, so call it right after the failing call, on the same thread.
    #[cold]
    #[inline(never)]
    pub(crate) fn from_code(function: &'static str, code: c_int) -> Error {
        match code {
            runtime::NCCLBIND_ERROR_LIBRARY_NOT_FOUND => Error::LibraryNotFound {
                message: runtime_message(),
            },
            runtime::NCCLBIND_ERROR_SYMBOL_NOT_FOUND => Error::SymbolNotFound {
                function,
                message: runtime_message(),
            },
            code if is_runtime_code(code) => Error::Runtime {
                code,
                message: runtime_message(),
            },
            code => Error::Nccl {
                function,
                code: code as u32,
                // SAFETY: the runtime returns NUL-terminated text for any code.
                name: unsafe { text(runtime::ncclbind_result_name(code)) },
                description: unsafe { text(runtime::ncclbind_result_description(code)) },
                nccl_message: unsafe { text(runtime::ncclbind_nccl_last_error()) },
            },
        }
    }

    /// The code: an `ncclResult_t` value, one of the runtime's `NCCLBIND_ERROR_*` codes,
    /// `NCCLBIND_ERROR_INVALID_ARGUMENT` (0x4E420003) for an argument check, or
    /// `NCCLBIND_ERROR_STATE` (0x4E420004) for an aborted, gone or timed-out communicator.
    pub fn code(&self) -> i32 {
        match self {
            Error::Nccl { code, .. } => *code as i32,
            Error::LibraryNotFound { .. } => runtime::NCCLBIND_ERROR_LIBRARY_NOT_FOUND,
            Error::SymbolNotFound { .. } => runtime::NCCLBIND_ERROR_SYMBOL_NOT_FOUND,
            Error::Runtime { code, .. } => *code,
            Error::Aborted | Error::CommunicatorGone | Error::Timeout { .. } => {
                runtime::NCCLBIND_ERROR_STATE
            }
            _ => runtime::NCCLBIND_ERROR_INVALID_ARGUMENT,
        }
    }

    /// The code's name: `ncclInvalidUsage`, `NCCLBIND_ERROR_SYMBOL_NOT_FOUND`, ...
    pub fn name(&self) -> &str {
        match self {
            Error::Nccl { name, .. } => name,
            Error::Runtime { code, .. } if !KNOWN_RUNTIME_CODES.contains(code) => {
                "unknown ncclbind runtime code"
            }
            // SAFETY: the names of the runtime's known codes are static strings.
            other => unsafe { static_text(runtime::ncclbind_result_name(other.code())) },
        }
    }

    /// NCCL's `ncclGetLastError` text captured with the failure ("" if none).
    pub fn nccl_last_error(&self) -> &str {
        match self {
            Error::Nccl { nccl_message, .. } => nccl_message,
            _ => "",
        }
    }

    /// True for an argument the crate rejected before calling NCCL.
    pub fn is_argument_error(&self) -> bool {
        self.code() == runtime::NCCLBIND_ERROR_INVALID_ARGUMENT
            && !matches!(self, Error::Runtime { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Nccl { function, code, name, description, nccl_message } => {
                write!(f, "{function} failed with {name} ({code}): {description}")?;
                if !nccl_message.is_empty() {
                    write!(f, "; NCCL: {nccl_message}")?;
                }
                Ok(())
            }
            Error::LibraryNotFound { message } | Error::SymbolNotFound { message, .. } => {
                f.write_str(message.trim_end())
            }
            Error::Runtime { code, message } => write!(f, "ncclbind runtime error {code:#x}: {message}"),
            Error::RankOutOfRange { argument, rank, nranks } => {
                write!(f, "{argument} {rank} is outside 0..{nranks} (the communicator's ranks)")
            }
            Error::InvalidRankCount { nranks } => write!(f, "a communicator needs at least 1 rank, not {nranks}"),
            Error::CountOverflow { argument, count, factor } => {
                write!(f, "{argument}: {count} times {factor} overflows")
            }
            Error::BufferTooSmall { argument, len, needed } => {
                write!(f, "{argument} holds {len} elements; the operation needs {needed}")
            }
            Error::WrongLength { argument, len, expected } => {
                write!(f, "{argument} holds {len} elements; the operation needs exactly {expected}")
            }
            Error::MissingBuffer { argument } => write!(f, "{argument} is None on the root, which needs it"),
            Error::UnevenCount { argument, len, nranks } => {
                write!(f, "{argument} holds {len} elements, which do not split evenly across {nranks} ranks")
            }
            Error::InvalidColor { color } => write!(f, "split color {color} is negative"),
            Error::NullStream => f.write_str(
                "null CUDA stream: pass Stream::LEGACY_DEFAULT or Stream::PER_THREAD_DEFAULT explicitly",
            ),
            Error::RedOpFromOtherCommunicator => {
                f.write_str("the reduction op was created on another communicator")
            }
            Error::RedOpTypeMismatch { op, data } => {
                write!(f, "the reduction op was created for {op:?}, the data is {data:?}")
            }
            Error::UnsupportedComplexOp { argument, op, data } => write!(
                f,
                "{argument}: {op} on {data} data; NCCL reduces complex numbers as pairs of reals, \
                 which is exact for only sum and avg"
            ),
            Error::CountsLength { argument, len, nranks } => {
                write!(f, "{argument} has {len} entries; the communicator has {nranks} ranks")
            }
            Error::BlockPastEnd { argument, counts_argument, index, displ, count, buffer, buffer_len } => write!(
                f,
                "{argument}[{index}] + {counts_argument}[{index}] = {displ} + {count} is past the end \
                 of {buffer} ({buffer_len} elements)"
            ),
            Error::BlocksOverlap { argument, index, other, blocks: [(a, b), (c, d)] } => write!(
                f,
                "{argument}[{index}]: receive block {index} overlaps block {other} ([{a}, {b}) and [{c}, {d}) elements)"
            ),
            Error::OwnBlockLength { argument, len, counts_argument, rank, count } => write!(
                f,
                "{argument} holds {len} elements; {counts_argument}[{rank}] (this rank's block) is {count}"
            ),
            Error::UniqueIdLength { len } => {
                write!(f, "a unique id is {} bytes, not {len}", crate::unique_id::UNIQUE_ID_BYTES)
            }
            Error::UnknownEnumValue { argument, type_name, value } => {
                write!(f, "{argument}: {value} is not a value of {type_name}")
            }
            Error::InvalidPath { path } => write!(f, "path {path:?} holds a NUL byte"),
            Error::NulInString { argument } => write!(f, "{argument} holds a NUL byte"),
            Error::TeamRankOutOfRange { argument, rank, nranks } => {
                write!(f, "{argument} {rank} is outside 0..{nranks} (the team's ranks)")
            }
            Error::NullPointer { argument } => {
                write!(f, "{argument} is a null pointer for one or more elements")
            }
            Error::Misaligned { argument, address, align } => write!(
                f,
                "{argument} {address:#x} is not aligned to {align} bytes, as its element type needs"
            ),
            Error::ConfigValueOutOfRange { record, field, value, allowed } => {
                write!(f, "{record}.{field} {value} is out of range: NCCL accepts {allowed}")
            }
            Error::ConfigFieldUnsupported { field, since, loaded } => write!(
                f,
                "ncclConfig_t.{field} first appears in NCCL {since}; the loaded NCCL is {loaded}"
            ),
            Error::Ep { argument, message, .. } => write!(f, "{argument}: {message}"),
            Error::Aborted => f.write_str("the communicator was aborted through an AbortHandle"),
            Error::CommunicatorGone => f.write_str(
                "the communicator is gone (destroyed by its owner), so there is nothing to abort",
            ),
            Error::Timeout { function, waited } => write!(
                f,
                "{function} was still in progress after {waited:?} (the timeout); the communicator was aborted"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for `ncclSuccess`, else the error the code stands for. For results of calls made
/// through [`crate::sys`]: call it right after the call, on the same thread.
#[inline]
pub fn check(function: &'static str, result: ncclResult_t) -> Result<()> {
    if result == ncclResult_t::ncclSuccess {
        Ok(())
    } else {
        Err(Error::from_code(function, result.0 as c_int))
    }
}

/// Like [`check`], for the runtime's own functions (which return an `int`).
#[inline]
pub(crate) fn check_runtime(function: &'static str, code: c_int) -> Result<()> {
    if code == runtime::NCCLBIND_OK {
        Ok(())
    } else {
        Err(Error::from_code(function, code))
    }
}

const KNOWN_RUNTIME_CODES: [c_int; 5] = [
    runtime::NCCLBIND_ERROR_LIBRARY_NOT_FOUND,
    runtime::NCCLBIND_ERROR_SYMBOL_NOT_FOUND,
    runtime::NCCLBIND_ERROR_INVALID_ARGUMENT,
    runtime::NCCLBIND_ERROR_STATE,
    runtime::NCCLBIND_ERROR_FOREIGN_EXCEPTION,
];

fn is_runtime_code(code: c_int) -> bool {
    (code as u32 & 0xFFFF_0000) == 0x4E42_0000
}

fn runtime_message() -> String {
    // SAFETY: the runtime's thread-local message is always NUL-terminated.
    unsafe { text(runtime::ncclbind_last_error()) }
}

/// # Safety
/// `ptr` is null or points to NUL-terminated text.
pub(crate) unsafe fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

/// # Safety
/// `ptr` points to NUL-terminated text that lives as long as the process.
unsafe fn static_text(ptr: *const c_char) -> &'static str {
    CStr::from_ptr(ptr)
        .to_str()
        .unwrap_or("(name is not UTF-8)")
}
