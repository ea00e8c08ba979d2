//! NCCL EP (expert-parallel dispatch and combine for mixture-of-experts layers), safe.
//!
//! A [`Group`] is built over a [`Communicator`] it borrows; a [`Handle`] (a layout and the
//! current top-k routing) borrows its group; a [`Tensor`] describes device memory it borrows
//! (a [`DeviceSlice`] or [`DeviceSliceMut`]) with a shape and the CUDA device it is on. So a
//! handle cannot outlive its group, nor a group its communicator, nor a tensor its memory, and
//! `destroy(self)` leaves nothing to use after it: use-after-destroy does not compile.
//!
//! The methods (ep/generated/methods.rs), the record and config types (ep/generated/classes.rs)
//! and the checks (ep/generated/checks.rs) are rendered from policy/nccl_ep.toml, the
//! policy the Python layer `ncclbind.ep` is rendered from too. Before NCCL EP is called they check,
//! as Python does: each tensor's element type, rank and every extent in the mode (the group's
//! algorithm and the handle's layout), its device against the group's, the limits between the
//! group's, the routing's and the call's dimensions (top-k at most the expert count, at most
//! `max_dispatch_tokens_per_rank` tokens), and a token row's bytes in transit (by the call's
//! quantization recipe) at most the group's `max_token_bytes`. Every rule is generated code, none
//! is looked up at run time: a tensor rule is one function, a `match` on the mode with its
//! element types, rank and extents written out; each set of limits a method of `Symbols`; the
//! group's symbols one function that reads each config field and computes each quotient; each
//! precondition a `require_<name>` and the preconditions a new group meets `met_at_creation`
//! (what a method's success meets is written into the method); each method's token-row rule a
//! `row_bytes_<method>`, a `match` on the recipe with each term written out. The helpers below
//! word the refusals and sum a row; ep/generated/policy.rs holds only names (symbols, element
//! types) and the modes. A refusal is [`Error::Ep`] naming the argument.
//!
//! A [`Group`] also keeps the policy's preconditions it meets (`[preconditions]`: states NCCL EP
//! asserts, ending the process, such as `enable_mask` for the mask calls and an LL handle made
//! before `mask_clean`); a method that needs one the group lacks is [`Error::Ep`] with
//! [`Problem::Precondition`], naming the method and the precondition, before NCCL EP is called.
//!
//! libnccl_ep compiles its kernels at run time against `$NCCL_HOME/include`, which must hold the
//! NCCL release its host code was built with; the runtime checks it when libnccl_ep loads, and
//! [`kernel_headers`] says what it found. [`Group::create`] refuses a `NCCL_HOME` of another
//! release ([`KernelHeaders::Mismatch`]: [`Error::Ep`] with [`Problem::KernelHeaders`], argument
//! `NCCL_HOME`) before NCCL EP is called; when `NCCL_HOME` is unset with no matching home to set
//! it to ([`KernelHeaders::Unset`]), an `ncclInternalError` of an EP call carries the runtime's
//! message after NCCL's own (`nccl_message`), as a hint.
//!
//! NCCL EP sets no error text of its own, so a failed EP call carries NCCL's last-error text, one
//! per process that every NCCL warning overwrites (on 2x H200, the GDRCopy warning of
//! `ncclEpCreateGroup`). It is read once after each group or handle is made; when a failed call's
//! text is still that one, `nccl_message` is [`STALE_LAST_ERROR`] and the text in quotes.

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use crate::communicator::Communicator;
use crate::data_type::DataType;
use crate::device_slice::{DeviceSlice, DeviceSliceMut};
use crate::error::{text, Error, Result};
use crate::runtime;
use crate::stream::Stream;
use crate::sys::nccl::{ncclDataType_t, ncclResult_t};
use crate::sys::nccl_ep::*;

include!("generated/policy.rs");
include!("generated/checks.rs");
include!("generated/classes.rs");
include!("generated/methods.rs");

/// Which kind of rule an NCCL EP argument broke ([`Error::Ep`]'s `problem`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Problem {
    /// An element type the rule does not allow.
    DataType,
    /// A rank or an extent other than the rule's shape in the mode.
    Shape,
    /// A limit between dimensions (top-k above the expert count, more tokens than the group's
    /// maximum, experts not split evenly over the ranks, a token row of more bytes than the
    /// group's `max_token_bytes`, ...).
    Limit,
    /// A tensor on another CUDA device than the group's.
    Device,
    /// A tensor the mode (algorithm and layout) does not use.
    NotInMode,
    /// A layout the group's algorithm does not have, or an enum value the headers lack.
    Value,
    /// A config field out of range (a required count of 0).
    Config,
    /// A host array of the wrong length.
    Length,
    /// A required tensor that was not given.
    Missing,
    /// A state the group must be in for the method (the policy's `[preconditions]`: a config
    /// field set at creation, or a method that must have succeeded on the group first).
    Precondition,
    /// `NCCL_HOME` holds another NCCL release's headers than the one libnccl_ep's run-time
    /// kernel compiles need ([`KernelHeaders::Mismatch`]); the message is the runtime's.
    KernelHeaders,
}

/// Whether `NCCL_HOME` holds the NCCL headers libnccl_ep's run-time kernel compiles need: the
/// runtime's `ncclbind_kernel_headers`, decided when libnccl_ep loaded ([`kernel_headers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelHeaders {
    /// Nothing to check against: no release registered for this libnccl_ep version (or it
    /// could not be loaded: then the message is the load error).
    Unknown,
    /// `NCCL_HOME` holds the release's headers (the user's, or set by the runtime).
    Match,
    /// The user's `NCCL_HOME` holds another release's headers, or none readable.
    Mismatch,
    /// `NCCL_HOME` is unset and there was no home of the release to set it to: NCCL EP's first
    /// kernel compile fails (`ncclInternalError`).
    Unset,
}

/// Loads libnccl_ep if needed and says whether `NCCL_HOME` holds the NCCL release its kernels
/// need, with the runtime's message: libnccl_ep's version, that release, `NCCL_HOME` and the
/// release there, and the fix.
pub fn kernel_headers() -> (KernelHeaders, String) {
    let mut message = core::ptr::null();
    // SAFETY: the out-pointer is a local; the runtime returns a status and sets it to
    // NUL-terminated text (or leaves it null).
    let status =
        unsafe { runtime::ncclbind_kernel_headers(runtime::NCCLBIND_LIB_NCCL_EP, &mut message) };
    let status = match status {
        runtime::NCCLBIND_KERNEL_HEADERS_MATCH => KernelHeaders::Match,
        runtime::NCCLBIND_KERNEL_HEADERS_MISMATCH => KernelHeaders::Mismatch,
        runtime::NCCLBIND_KERNEL_HEADERS_UNSET => KernelHeaders::Unset,
        _ => KernelHeaders::Unknown,
    };
    // SAFETY: null or NUL-terminated text the runtime keeps for the process (or the thread's
    // last error), copied here at once.
    (status, unsafe { text(message) })
}

/// What `nccl_message` says before NCCL's last-error text, quoted, when that text is the one NCCL
/// held right after the last EP group or handle was made: not this call's (NCCL EP gave none).
pub const STALE_LAST_ERROR: &str =
    "NCCL EP gave no reason; NCCL's last error is unchanged since the \
    last EP group or handle was made, so it is likely not this call's: ";

/// NCCL's last-error text right after the last EP group or handle was made ([`check`]).
static MADE_LAST_ERROR: Mutex<String> = Mutex::new(String::new());

/// The NCCL EP functions that make a group or a handle.
fn makes(function: &str) -> bool {
    matches!(
        function,
        "ncclEpCreateGroup" | "ncclEpCreateHandle" | "ncclEpInitHandle"
    )
}

/// [`crate::check`] for NCCL EP's calls (the generated methods call it). A success of a call that
/// makes a group or handle reads NCCL's last-error text (inlined, `function` is a constant: the
/// other calls pay nothing); a failure is [`failed`]'s.
#[inline(always)]
fn check(function: &'static str, result: ncclResult_t) -> Result<()> {
    if result != ncclResult_t::ncclSuccess {
        return Err(failed(function, result));
    }
    if makes(function) {
        // SAFETY: the runtime returns NUL-terminated text (or null), copied here at once.
        let text = unsafe { text(runtime::ncclbind_nccl_last_error()) };
        *MADE_LAST_ERROR
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = text;
    }
    Ok(())
}

/// A failed NCCL EP call's error: NCCL's last-error text, when it is the one read after the last
/// group or handle was made (and the call makes none), after [`STALE_LAST_ERROR`]; then, for an
/// `ncclInternalError` while `NCCL_HOME` was left unset ([`KernelHeaders::Unset`], the likely
/// cause: a kernel compile failed), the runtime's message as a hint.
#[cold]
#[inline(never)]
fn failed(function: &'static str, result: ncclResult_t) -> Error {
    match Error::from_code(function, result.0 as c_int) {
        Error::Nccl {
            function,
            code,
            name,
            description,
            mut nccl_message,
        } => {
            if !nccl_message.is_empty()
                && !makes(function)
                && *MADE_LAST_ERROR
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    == nccl_message
            {
                nccl_message = format!("{STALE_LAST_ERROR}\"{nccl_message}\"");
            }
            if code == ncclResult_t::ncclInternalError.0 {
                nccl_message = match kernel_headers() {
                    (KernelHeaders::Unset, hint) if nccl_message.is_empty() => {
                        format!("hint: {hint}")
                    }
                    (KernelHeaders::Unset, hint) => format!("{nccl_message}\nhint: {hint}"),
                    _ => nccl_message,
                };
            }
            Error::Nccl {
                function,
                code,
                name,
                description,
                nccl_message,
            }
        }
        other => other,
    }
}

fn refuse(argument: impl std::fmt::Display, problem: Problem, message: String) -> Error {
    Error::Ep {
        argument: argument.to_string(),
        problem,
        message,
    }
}

/// An argument's name as errors give it: `inputs.tokens`, or `topk_idx` (an empty field). Kept
/// as two parts so that naming costs nothing until a check fails.
#[derive(Clone, Copy)]
struct Arg<'a>(&'a str, &'a str);

impl std::fmt::Display for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.1.is_empty() {
            f.write_str(self.0)
        } else {
            write!(f, "{}.{}", self.0, self.1)
        }
    }
}

fn missing(argument: Arg<'_>, doc: &str) -> Error {
    refuse(argument, Problem::Missing, format!("is required ({doc})"))
}

// ---- Tensors --------------------------------------------------------------------------------

/// A shaped view of device memory, as NCCL EP takes it (`ncclEpTensor_t`): borrows the memory
/// for `'a`, so the memory outlives every call that is given the tensor.
pub struct Tensor<'a> {
    // Boxed: NCCL EP is given these addresses, which stay put however the Tensor moves.
    raw: NonNull<ncclEpTensor_t>,
    sizes: NonNull<[usize]>,
    device: i32,
    _memory: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape())
            .field("data_type", &self.data_type())
            .field("device", &self.device)
            .finish()
    }
}

impl Drop for Tensor<'_> {
    fn drop(&mut self) {
        // SAFETY: both came from Box::into_raw in `describe` and are freed once, here.
        unsafe {
            drop(Box::from_raw(self.raw.as_ptr()));
            drop(Box::from_raw(self.sizes.as_ptr()));
        }
    }
}

impl<'a> Tensor<'a> {
    /// A tensor of `shape` over `memory` (read by NCCL EP: tokens, routing, weights) on CUDA
    /// device `device`. The shape's elements must be exactly the slice's.
    pub fn new<T: DataType>(
        memory: &'a DeviceSlice<'_, T>,
        shape: &[usize],
        device: i32,
    ) -> Result<Tensor<'a>> {
        Self::describe::<T>(memory.as_ptr() as *mut c_void, memory.len(), shape, device)
    }

    /// A tensor of `shape` over `memory` that NCCL EP writes (received tokens, counters,
    /// combined output) on CUDA device `device`. The shape's elements must be exactly the slice's.
    pub fn new_mut<T: DataType>(
        memory: &'a mut DeviceSliceMut<'_, T>,
        shape: &[usize],
        device: i32,
    ) -> Result<Tensor<'a>> {
        let len = memory.len();
        Self::describe::<T>(memory.as_mut_ptr().cast(), len, shape, device)
    }

    fn describe<T: DataType>(
        data: *mut c_void,
        len: usize,
        shape: &[usize],
        device: i32,
    ) -> Result<Tensor<'a>> {
        if T::ELEMENTS_PER_VALUE != 1 {
            return Err(refuse(
                "memory",
                Problem::DataType,
                "NCCL EP tensors hold real numbers, not complex ones".into(),
            ));
        }
        if shape.is_empty() {
            return Err(refuse(
                "shape",
                Problem::Shape,
                "a tensor needs at least one dimension".into(),
            ));
        }
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if elements != Some(len) {
            return Err(refuse(
                "shape",
                Problem::Shape,
                format!("{shape:?} holds {elements:?} elements, the memory {len}"),
            ));
        }
        let sizes = NonNull::from(Box::leak(shape.to_vec().into_boxed_slice()));
        let mut raw = NCCL_EP_TENSOR_INIT();
        raw.ndim = shape.len() as u32;
        raw.datatype = T::DATA_TYPE;
        raw.data = data;
        raw.sizes = sizes.as_ptr().cast();
        Ok(Tensor {
            raw: NonNull::from(Box::leak(Box::new(raw))),
            sizes,
            device,
            _memory: PhantomData,
        })
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> &[usize] {
        // SAFETY: owned by self, never written after `describe`.
        unsafe { self.sizes.as_ref() }
    }

    /// The element type.
    pub fn data_type(&self) -> ncclDataType_t {
        // SAFETY: owned by self; NCCL EP only reads a user-initialised descriptor.
        unsafe { self.raw.as_ref().datatype }
    }

    /// The CUDA device the memory is on (as given).
    pub fn device(&self) -> i32 {
        self.device
    }

    /// The descriptor NCCL EP is given; valid while `self` is.
    pub fn as_raw(&self) -> *mut ncclEpTensor_t {
        self.raw.as_ptr()
    }

    /// The device address of the first element.
    pub fn data_ptr(&self) -> *mut c_void {
        // SAFETY: owned by self; NCCL EP only reads a user-initialised descriptor.
        unsafe { self.raw.as_ref().data }
    }
}

// ---- Modes and symbols ------------------------------------------------------------------------

fn mode_of(algorithm: ncclEpAlgorithm_t, layout: ncclEpLayout_t, argument: &str) -> Result<Mode> {
    MODES
        .iter()
        .find(|(_, a, l)| *a == algorithm && *l == layout)
        .map(|(mode, _, _)| *mode)
        .ok_or_else(|| {
            let fitting: Vec<String> = MODES
                .iter()
                .filter(|(_, a, _)| *a == algorithm)
                .map(|(_, _, l)| format!("{l:?}"))
                .collect();
            refuse(
                argument,
                Problem::Value,
                format!(
                    "{layout:?} is not a layout of the group's {algorithm:?} (it has {})",
                    fitting.join(", ")
                ),
            )
        })
}

/// The symbols of one call: the group's, the handle's, and those its tensors bind. The limits
/// between them are its generated `limits_*` methods (ep/generated/checks.rs), one per set of
/// symbols that becomes known together.
#[derive(Clone, Copy, Debug, Default)]
struct Symbols([Option<usize>; SYMBOL_COUNT]);

impl Symbols {
    fn get(&self, symbol: Sym) -> Option<usize> {
        self.0[symbol as usize]
    }

    fn set(&mut self, symbol: Sym, value: usize) {
        self.0[symbol as usize] = Some(value);
    }
}

// ---- What the generated checks (ep/generated/checks.rs) call: the refusals' words -------------
// Built only when a check fails (#[cold]): a passing call allocates nothing.

/// A limit broken: `problem` (`top_k = 5 is above num_experts = 4`), then the policy's sentence.
#[cold]
fn broken_limit(argument: Arg<'_>, problem: std::fmt::Arguments<'_>, doc: &str) -> Error {
    refuse(argument, Problem::Limit, format!("{problem} ({doc})"))
}

/// A tensor given in a mode its rule does not use (`modes`: the ones it does, as the policy lists them).
#[cold]
fn not_in_mode(argument: Arg<'_>, mode: Mode, modes: &str) -> Error {
    refuse(
        argument,
        Problem::NotInMode,
        format!("not used in {} (only in {modes}); pass None", mode.name()),
    )
}

/// An element type other than `expected` (the rule's names in the mode; `mode`: the call's, named
/// where the rule's element types depend on it).
#[cold]
fn wrong_data_type(
    argument: Arg<'_>,
    tensor: &Tensor<'_>,
    expected: &str,
    mode: Option<Mode>,
    doc: &str,
) -> Error {
    let in_mode = mode.map_or_else(String::new, |mode| format!(" in {}", mode.name()));
    refuse(
        argument,
        Problem::DataType,
        format!(
            "element type {:?}, expected {expected}{in_mode} ({doc})",
            tensor.data_type()
        ),
    )
}

/// A rank other than the rule's `rank` (`shape`: the rule's shape in the mode, as text).
#[cold]
fn wrong_rank(argument: Arg<'_>, extents: &[usize], rank: usize, shape: &str, doc: &str) -> Error {
    refuse(
        argument,
        Problem::Shape,
        format!(
            "{}-D tensor of shape {extents:?}, expected {rank}-D {shape} ({doc})",
            extents.len()
        ),
    )
}

/// Extent `index` other than `value`, the value of the rule's dimension `dim` (as text).
#[cold]
fn wrong_extent(
    argument: Arg<'_>,
    extents: &[usize],
    shape: &str,
    index: usize,
    dim: &str,
    value: usize,
) -> Error {
    refuse(
        argument,
        Problem::Shape,
        format!(
            "shape {extents:?}, expected {shape}: extent {index} is {}, but {dim} = {value}",
            extents[index]
        ),
    )
}

/// The checks of one call, in argument order: the symbols bound so far, the mode, the device.
struct Call {
    symbols: Symbols,
    mode: Option<Mode>,
    device: Option<i32>,
    /// The spec's method name (limits may be scoped to methods).
    method: &'static str,
}

impl Call {
    /// Extent `index` of `extents` against `symbol` (a dimension of the rule's shape `shape`):
    /// compared when the call knows the symbol, else bound to it; true when newly bound (the
    /// generated check then tests the limits it involves).
    fn bind_or_compare(
        &mut self,
        argument: Arg<'_>,
        extents: &[usize],
        index: usize,
        symbol: Sym,
        shape: &str,
    ) -> Result<bool> {
        match self.symbols.get(symbol) {
            None => {
                self.symbols.set(symbol, extents[index]);
                Ok(true)
            }
            Some(value) if value != extents[index] => Err(wrong_extent(
                argument,
                extents,
                shape,
                index,
                SYMBOL_NAMES[symbol as usize],
                value,
            )),
            Some(_) => Ok(false),
        }
    }

    /// The last check of every tensor: on the group's device. The descriptor NCCL EP is given.
    fn placed(&self, argument: Arg<'_>, tensor: &Tensor<'_>) -> Result<*mut ncclEpTensor_t> {
        if let Some(device) = self.device {
            if tensor.device() != device {
                return Err(refuse(
                    argument,
                    Problem::Device,
                    format!(
                        "on CUDA device {}, the EP group on device {device}",
                        tensor.device()
                    ),
                ));
            }
        }
        Ok(tensor.as_raw())
    }

    /// A routing extent becomes a handle symbol (num_tokens, top_k): extent `index` of `tensor`,
    /// where it has one (its rank is checked after, with its rule). The generated method then
    /// tests the limits its symbols involve.
    fn bind(&mut self, symbol: Sym, tensor: &Tensor<'_>, index: usize) {
        if let Some(&extent) = tensor.shape().get(index) {
            self.symbols.set(symbol, extent);
        }
    }

    fn host_array(&self, argument: &str, values: &[c_int], length: Sym) -> Result<*const c_int> {
        let expected = self.symbols.get(length).unwrap_or(0);
        if values.len() != expected {
            return Err(refuse(
                argument,
                Problem::Length,
                format!(
                    "{} values, expected {expected} ({})",
                    values.len(),
                    SYMBOL_NAMES[length as usize]
                ),
            ));
        }
        Ok(values.as_ptr())
    }
}

fn check_enum<T: Copy + PartialEq + std::fmt::Debug>(
    argument: &'static str,
    type_name: &'static str,
    value: T,
    known: &[T],
    raw: i64,
) -> Result<()> {
    if known.contains(&value) {
        Ok(())
    } else {
        Err(Error::UnknownEnumValue {
            argument,
            type_name,
            value: raw,
        })
    }
}

// ---- What the generated token-row rules and preconditions (ep/generated/checks.rs) call -------

/// An element type's name and bytes per element ([`ELEMENT_TYPES`]).
fn element_type(data_type: ncclDataType_t) -> Option<(&'static str, usize)> {
    ELEMENT_TYPES
        .iter()
        .find(|(t, _, _)| *t == data_type)
        .map(|&(_, name, bytes)| (name, bytes))
}

/// One part of a token row in transit, as a generated `row_bytes_<method>` writes it out: the
/// last extent of `tensor` (None: not given, adds nothing; `name`: as errors give it), divided by
/// `per` (rounded up), in elements of `data_type` (None: the tensor's own).
struct RowTerm<'a> {
    name: &'static str,
    tensor: Option<&'a Tensor<'a>>,
    per: usize,
    data_type: Option<ncclDataType_t>,
}

impl RowTerm<'_> {
    /// The term's last extent, its elements (the extent / per, rounded up), and its element
    /// type's name and bytes; None where the tensor is not given (a checked tensor has a
    /// dimension and one of the policy's element types).
    fn measure(&self) -> Option<(usize, usize, &'static str, usize)> {
        let tensor = self.tensor?;
        let extent = *tensor.shape().last()?;
        let (name, bytes) = element_type(self.data_type.unwrap_or_else(|| tensor.data_type()))?;
        Some((extent, extent.div_ceil(self.per), name, bytes))
    }
}

/// A token row of `terms` (one recipe's, written out by a generated `row_bytes_<method>`) at most
/// `budget`, the group's symbol `budget_name` (None: not known, not checked). A refusal names
/// `argument` (the rule's first tensor) and says `recipe` (`config.quant_recipe
/// NCCL_EP_DISP_QUANT_NONE`), each term's bytes and `doc`.
fn row_fits(
    argument: &'static str,
    terms: &[RowTerm<'_>],
    budget: Option<usize>,
    budget_name: &str,
    recipe: &str,
    doc: &str,
) -> Result<()> {
    let Some(budget) = budget else {
        return Ok(());
    };
    let total = terms
        .iter()
        .filter_map(RowTerm::measure)
        .fold(0usize, |total, (_, elements, _, bytes)| {
            total.saturating_add(elements.saturating_mul(bytes))
        });
    if total <= budget {
        return Ok(());
    }
    // The message, built only when the check fails (a passing call allocates nothing).
    let parts: Vec<String> = terms
        .iter()
        .filter_map(|term| {
            let (extent, elements, name, bytes) = term.measure()?;
            let count = if term.per == 1 {
                extent.to_string()
            } else {
                format!("{extent} / {} = {elements}", term.per)
            };
            Some(format!("{} {count} x {name} ({bytes} B)", term.name))
        })
        .collect();
    Err(refuse(
        argument,
        Problem::Limit,
        format!(
            "token row bytes = {total} is above {budget_name} = {budget} ({recipe}: {}; {doc})",
            parts.join(" + ")
        ),
    ))
}

/// A group that lacks precondition `name` (`doc`: what it is) refuses `method`; `state` says why
/// (`is HT`, `has GroupConfig.enable_mask = 0`, `no create_handle ... has succeeded on it`).
#[cold]
fn unmet(method: &str, name: &str, doc: &str, state: impl std::fmt::Display) -> Error {
    refuse(
        "group",
        Problem::Precondition,
        format!("{method} needs {doc} (precondition {name}); this group {state}"),
    )
}

impl Precondition {
    /// The precondition's bit in Group::met.
    fn bit(self) -> u32 {
        1 << self as u32
    }
}

// Group::met holds one bit per precondition.
const _: () = assert!(Precondition::ALL.len() <= u32::BITS as usize);

// ---- Group and Handle -------------------------------------------------------------------------

/// An NCCL EP group: the expert-parallel state built over one communicator, which it borrows.
/// Dropped, it is destroyed (`ncclEpGroupDestroy`); [`Group::destroy`] reports the result.
pub struct Group<'c> {
    raw: ncclEpGroup_t,
    comm: &'c Communicator,
    algorithm: ncclEpAlgorithm_t,
    device: i32,
    symbols: Symbols,
    /// The preconditions met, one bit per [`Precondition`]; a Cell: handle creation (`&self`,
    /// the handles borrow the group) meets some.
    met: Cell<u32>,
}

impl std::fmt::Debug for Group<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("raw", &self.raw)
            .field("algorithm", &self.algorithm)
            .field("device", &self.device)
            .finish()
    }
}

impl<'c> Group<'c> {
    /// What [`Group::create`] checks before NCCL EP is called: the group's symbols from its
    /// communicator and config with the limits they involve (the generated `group_symbols`,
    /// naming `argument`), then `NCCL_HOME`'s kernel headers (a [`KernelHeaders::Mismatch`] is
    /// refused, naming `NCCL_HOME`).
    fn symbols_of(
        comm: &Communicator,
        config: &ncclEpGroupConfig_t,
        argument: Arg<'_>,
    ) -> Result<Symbols> {
        let symbols = group_symbols(comm.size() as usize, config, argument)?;
        if let (KernelHeaders::Mismatch, message) = kernel_headers() {
            return Err(refuse("NCCL_HOME", Problem::KernelHeaders, message));
        }
        Ok(symbols)
    }

    fn made(
        raw: ncclEpGroup_t,
        comm: &'c Communicator,
        config: &ncclEpGroupConfig_t,
        symbols: Symbols,
        device: i32,
    ) -> Group<'c> {
        Group {
            raw,
            comm,
            algorithm: config.algorithm,
            device,
            symbols,
            met: Cell::new(met_at_creation(config)),
        }
    }

    /// A method that meets `precondition` succeeded on the group (the generated method tests
    /// that the precondition holds for the group's algorithm).
    fn meet(&self, precondition: Precondition) {
        self.met.set(self.met.get() | precondition.bit());
    }

    fn call(&self, method: &'static str) -> Call {
        Call {
            symbols: self.symbols,
            mode: None,
            device: Some(self.device),
            method,
        }
    }

    /// The communicator the group was built over.
    pub fn communicator(&self) -> &'c Communicator {
        self.comm
    }

    /// The group's algorithm (low latency or high throughput).
    pub fn algorithm(&self) -> ncclEpAlgorithm_t {
        self.algorithm
    }

    /// The CUDA device of the group's communicator.
    pub fn device(&self) -> i32 {
        self.device
    }

    /// The names of the policy's preconditions the group meets now (`mask`, `rdma_buffer`, ...).
    pub fn preconditions(&self) -> Vec<&'static str> {
        Precondition::ALL
            .into_iter()
            .filter(|p| self.met.get() & p.bit() != 0)
            .map(Precondition::name)
            .collect()
    }

    /// The `ncclEpGroup_t` (for calls through [`crate::sys`]); valid while `self` is.
    pub fn as_raw(&self) -> ncclEpGroup_t {
        self.raw
    }

    /// Destroys the group now (`ncclEpGroupDestroy`) and reports NCCL EP's result. Its
    /// handles borrow it, so none is left.
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the group is live and owned; `self` is gone, so nothing uses it again.
        check("ncclEpGroupDestroy", unsafe { ncclEpGroupDestroy(raw) })
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        // SAFETY: as in destroy; a failure cannot be reported from drop.
        let _ = unsafe { ncclEpGroupDestroy(self.raw) };
    }
}

/// A routing handle of one group (which it borrows): a layout and the current top-k routing,
/// used by dispatch and combine. Dropped, it is destroyed (`ncclEpHandleDestroy`).
pub struct Handle<'g> {
    raw: ncclEpHandle_t,
    group: &'g Group<'g>,
    layout: ncclEpLayout_t,
    mode: Mode,
    symbols: Symbols,
}

impl std::fmt::Debug for Handle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("raw", &self.raw)
            .field("layout", &self.layout)
            .field("mode", &self.mode.name())
            .finish()
    }
}

impl<'g> Handle<'g> {
    fn call(&self, method: &'static str) -> Call {
        Call {
            symbols: self.symbols,
            mode: Some(self.mode),
            device: Some(self.group.device),
            method,
        }
    }

    /// The group the handle belongs to.
    pub fn group(&self) -> &'g Group<'g> {
        self.group
    }

    /// The handle's layout.
    pub fn layout(&self) -> ncclEpLayout_t {
        self.layout
    }

    /// The routing's token count and top-k (after create_handle or update; None after
    /// init_handle until update).
    pub fn routing(&self) -> Option<(usize, usize)> {
        Some((
            self.symbols.get(Sym::NumTokens)?,
            self.symbols.get(Sym::TopK)?,
        ))
    }

    /// The `ncclEpHandle_t` (for calls through [`crate::sys`]); valid while `self` is.
    pub fn as_raw(&self) -> ncclEpHandle_t {
        self.raw
    }

    /// Destroys the handle now (`ncclEpHandleDestroy`) and reports NCCL EP's result.
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle is live and owned; `self` is gone, so nothing uses it again.
        check("ncclEpHandleDestroy", unsafe { ncclEpHandleDestroy(raw) })
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: as in destroy; a failure cannot be reported from drop.
        let _ = unsafe { ncclEpHandleDestroy(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    //! The generated checks (ep/generated/checks.rs) over hand-made calls, no library needed:
    //! each refusal's exact words and the symbols a passing check binds; the token rows, the
    //! preconditions and the group's symbols likewise.
    use super::*;

    /// A tensor over no memory (the checks read its descriptor only) of any element type.
    fn tensor(shape: &[usize], data_type: ncclDataType_t, device: i32) -> Tensor<'static> {
        let memory = NonNull::<u8>::dangling().as_ptr().cast();
        let tensor = Tensor::describe::<u8>(memory, shape.iter().product(), shape, device).unwrap();
        // SAFETY: owned by the tensor, never given to NCCL EP.
        unsafe { (*tensor.raw.as_ptr()).datatype = data_type };
        tensor
    }

    /// A call of `method` in `mode` on a group of 2 ranks, 4 experts and 8 tokens per rank.
    fn call(mode: Option<Mode>, method: &'static str) -> Call {
        let mut symbols = Symbols::default();
        for (symbol, value) in [
            (Sym::NumRanks, 2),
            (Sym::NumExperts, 4),
            (Sym::MaxDispatchTokensPerRank, 8),
            (Sym::MaxTokenBytes, 4096),
            (Sym::NumLocalExperts, 2),
        ] {
            symbols.set(symbol, value);
        }
        Call {
            symbols,
            mode,
            device: Some(0),
            method,
        }
    }

    fn refusal(result: Result<*mut ncclEpTensor_t>) -> (String, Problem, String) {
        match result {
            Err(Error::Ep {
                argument,
                problem,
                message,
            }) => (argument, problem, message),
            other => panic!("expected Error::Ep, got {other:?}"),
        }
    }

    const TOKENS: &str = "received tokens: LL expert-major [local experts, ranks x max tokens, \
        hidden], LL rank-major [ranks, max tokens, hidden], HT [receive slots, hidden]";
    const LL_SHAPE: &str = "[num_local_experts, num_ranks * max_dispatch_tokens_per_rank, hidden]";

    #[test]
    fn a_tensor_rule_refuses_in_its_words() {
        let ll = Some(Mode::LlExpertMajor);
        let bf16 = ncclDataType_t::ncclBfloat16;
        let arg = Arg("outputs", "tokens");
        let cases: [(Result<*mut ncclEpTensor_t>, Problem, String); 7] = [
            (
                dispatch_outputs_topk_weights(
                    &mut call(ll, "dispatch"),
                    Arg("outputs", "topk_weights"),
                    &tensor(&[2], ncclDataType_t::ncclFloat32, 0),
                ),
                Problem::NotInMode,
                "not used in ll_expert_major (only in ll_rank_major, ht_flat, ht_expert_major); \
                 pass None"
                    .into(),
            ),
            (
                dispatch_outputs_tokens(
                    &mut call(ll, "dispatch"),
                    arg,
                    &tensor(&[2], ncclDataType_t::ncclInt32, 0),
                ),
                Problem::DataType,
                format!(
                    "element type ncclInt32, expected bfloat16 or float16 or float32 or \
                     float8_e4m3fn or float8_e5m2 or uint8 ({TOKENS})"
                ),
            ),
            (
                layout_info_expert_counters(
                    &mut call(ll, "dispatch"),
                    arg,
                    &tensor(&[2], ncclDataType_t::ncclInt64, 0),
                ),
                Problem::DataType,
                "element type ncclInt64, expected int32 in ll_expert_major (per local expert: \
                 received tokens (LL expert-major at dispatch; HT at handle time))"
                    .into(),
            ),
            (
                dispatch_outputs_tokens(&mut call(ll, "dispatch"), arg, &tensor(&[2, 16], bf16, 0)),
                Problem::Shape,
                format!("2-D tensor of shape [2, 16], expected 3-D {LL_SHAPE} ({TOKENS})"),
            ),
            (
                dispatch_outputs_tokens(
                    &mut call(ll, "dispatch"),
                    arg,
                    &tensor(&[2, 15, 512], bf16, 0),
                ),
                Problem::Shape,
                format!(
                    "shape [2, 15, 512], expected {LL_SHAPE}: extent 1 is 15, but \
                     num_ranks * max_dispatch_tokens_per_rank = 16"
                ),
            ),
            (
                combine_inputs_tokens(
                    &mut call(ll, "combine"),
                    Arg("inputs", "tokens"),
                    &tensor(&[2, 16, 256], bf16, 0),
                ),
                Problem::Limit,
                "hidden = 256 is not a multiple of 512 (NCCL EP 0.2.0's LL combine kernel needs \
                 hidden to be a multiple of 512 (its ll_ep.cuh static_asserts))"
                    .into(),
            ),
            (
                dispatch_outputs_tokens(
                    &mut call(ll, "dispatch"),
                    arg,
                    &tensor(&[2, 16, 512], bf16, 1),
                ),
                Problem::Device,
                "on CUDA device 1, the EP group on device 0".into(),
            ),
        ];
        for (result, problem, message) in cases {
            let (argument, got, text) = refusal(result);
            assert!(argument.ends_with("topk_weights") || argument.ends_with("tokens"));
            assert_eq!((got, text), (problem, message));
        }
    }

    #[test]
    fn a_passing_check_binds_the_call_symbols_it_is_first_to_give() {
        let mut call = call(Some(Mode::HtFlat), "dispatch");
        let bf16 = ncclDataType_t::ncclBfloat16;
        let arg = Arg("outputs", "tokens");
        assert!(dispatch_outputs_tokens(&mut call, arg, &tensor(&[6, 128], bf16, 0)).is_ok());
        assert_eq!(call.symbols.get(Sym::NumRecvSlots), Some(6));
        assert_eq!(call.symbols.get(Sym::Hidden), Some(128));
        let (_, problem, message) = refusal(dispatch_outputs_scales(
            &mut call,
            Arg("outputs", "scales"),
            &tensor(&[5, 4], ncclDataType_t::ncclFloat32, 0),
        ));
        assert_eq!(problem, Problem::Shape);
        assert_eq!(
            message,
            "shape [5, 4], expected [num_recv_slots, scale_elems]: extent 0 is 5, but \
             num_recv_slots = 6"
        );
    }

    #[test]
    fn the_limits_of_a_set_of_symbols_are_tested_in_the_spec_order() {
        let mut symbols = call(None, "create").symbols;
        symbols.set(Sym::NumExperts, 3);
        let group = symbols.limits_group(Arg("config", ""), None, None);
        assert_eq!(
            group,
            Err(Error::Ep {
                argument: "config".into(),
                problem: Problem::Limit,
                message: "num_experts = 3 is not a multiple of num_ranks = 2 (experts are split \
                          evenly over the ranks)"
                    .into(),
            })
        );
        // both broken: top_k's limit comes first in nccl_ep.toml
        let mut call = call(Some(Mode::HtFlat), "update");
        let routing = tensor(&[9, 5], ncclDataType_t::ncclInt64, 0);
        call.bind(Sym::NumTokens, &routing, 0);
        call.bind(Sym::TopK, &routing, 1);
        let (argument, _, message) = refusal(
            call.symbols
                .limits_num_tokens_top_k(Arg("topk_idx", ""), call.mode, Some(call.method))
                .map(|()| core::ptr::null_mut()),
        );
        assert_eq!(argument, "topk_idx");
        assert_eq!(
            message,
            "top_k = 5 is above num_experts = 4 (top-k cannot exceed the expert count)"
        );
    }

    fn ep_refusal(result: Result<()>) -> (String, Problem, String) {
        refusal(result.map(|()| core::ptr::null_mut()))
    }

    const ROW_DOC: &str = "a token row in transit, quantized data and scales included, must fit \
        the group's GroupConfig.max_token_bytes, by which NCCL EP sizes its buffers (nccl_ep.h: \
        ncclEpGroupConfig_t)";

    #[test]
    fn a_token_row_over_its_budget_names_the_first_terms_tensor() {
        let bf16 = ncclDataType_t::ncclBfloat16;
        let (tokens, scales) = (
            tensor(&[4, 512], bf16, 0),
            tensor(&[4, 5], ncclDataType_t::ncclFloat32, 0),
        );
        let recipe = |value| DispatchConfig {
            quant_recipe: ncclEpDispQuant_t(value),
            ..DispatchConfig::default()
        };
        let (ds, fwd) = (recipe(2), recipe(1));
        let inputs = DispatchInputs {
            tokens: Some(&tokens),
            scales: Some(&scales),
            ..Default::default()
        };
        let scales_only = DispatchInputs {
            scales: Some(&scales),
            ..Default::default()
        };
        let mut call = call(Some(Mode::LlExpertMajor), "dispatch");
        for (budget, config, inputs, row) in [
            // DS_FP8E3M4: a byte per element and a float32 scale per 128 elements: 512 + 4 x 4
            (
                527,
                &ds,
                &inputs,
                "528 is above max_token_bytes = 527 (config.quant_recipe \
                 NCCL_EP_DISP_QUANT_DS_FP8E3M4: inputs.tokens 512 x float8_e4m3fn (1 B) + \
                 inputs.tokens 512 / 128 = 4 x float32 (4 B)",
            ),
            // QUANT_FWD without tokens: the scales alone are over, the refusal still names the
            // rule's first tensor
            (
                19,
                &fwd,
                &scales_only,
                "20 is above max_token_bytes = 19 (config.quant_recipe NCCL_EP_DISP_QUANT_FWD: \
                 inputs.scales 5 x float32 (4 B)",
            ),
        ] {
            call.symbols.set(Sym::MaxTokenBytes, budget);
            assert_eq!(
                ep_refusal(row_bytes_dispatch(&call, Some(config), inputs)),
                (
                    "inputs.tokens".into(),
                    Problem::Limit,
                    format!("token row bytes = {row}; {ROW_DOC})")
                )
            );
        }
        // exactly the budget; a recipe the policy does not list; no config (NONE: 512 x 2 B)
        call.symbols.set(Sym::MaxTokenBytes, 528);
        assert_eq!(row_bytes_dispatch(&call, Some(&ds), &inputs), Ok(()));
        assert_eq!(row_bytes_dispatch(&call, Some(&recipe(3)), &inputs), Ok(()));
        let (_, _, message) = ep_refusal(row_bytes_dispatch(&call, None, &inputs));
        assert!(message.starts_with(
            "token row bytes = 1024 is above max_token_bytes = 528 (config.quant_recipe \
             NCCL_EP_DISP_QUANT_NONE: inputs.tokens 512 x bfloat16 (2 B); a token row"
        ));
        let combine = CombineInputs {
            tokens: Some(&tokens),
            ..Default::default()
        };
        let (argument, _, message) = ep_refusal(row_bytes_combine(&call, None, &combine));
        assert_eq!(argument, "inputs.tokens");
        assert!(message.contains("NCCL_EP_COMB_QUANT_NONE: inputs.tokens 512 x bfloat16 (2 B);"));
    }

    #[test]
    fn a_missing_precondition_says_why_the_group_lacks_it() {
        const MASK: &str = "a low-latency group created with GroupConfig(enable_mask=1) (NCCL EP \
            0.2.0 aborts the process otherwise) (precondition mask); this group";
        const RDMA: &str = "the low-latency group's RDMA buffer: create a handle on the group \
            first (create_handle or init_handle), or create it with an explicit \
            GroupConfig.rdma_buffer_size (NCCL EP 0.2.0 aborts the process otherwise) \
            (precondition rdma_buffer); this group";
        let (ll, ht) = (
            ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
            ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT,
        );
        let mask = Precondition::Mask.bit();
        let cases: [(Result<()>, String); 5] = [
            // the config field off at creation
            (
                require_mask(ll, 0, "mask_query"),
                format!("mask_query needs {MASK} has GroupConfig.enable_mask = 0"),
            ),
            // an algorithm the precondition is not of
            (
                require_mask(ht, 0, "error_clear"),
                format!("error_clear needs {MASK} is HT"),
            ),
            (
                require_mask(ncclEpAlgorithm_t(7), 0, "error_clear"),
                format!("error_clear needs {MASK} is ncclEpAlgorithm_t(7)"),
            ),
            // the config field off and no set_by method run
            (
                require_rdma_buffer(ll, mask, "mask_clean"),
                format!(
                    "mask_clean needs {RDMA} has GroupConfig.rdma_buffer_size = 0 and no \
                     create_handle or init_handle has succeeded on it"
                ),
            ),
            (
                require_rdma_buffer(ht, mask, "mask_clean"),
                format!("mask_clean needs {RDMA} is HT"),
            ),
        ];
        for (result, message) in cases {
            assert_eq!(
                ep_refusal(result),
                ("group".into(), Problem::Precondition, message)
            );
        }
        assert_eq!(require_mask(ht, mask, "mask_query"), Ok(()));
        let both = mask | Precondition::RdmaBuffer.bit();
        assert_eq!(require_rdma_buffer(ll, both, "mask_clean"), Ok(()));
    }

    #[test]
    fn a_new_group_meets_the_preconditions_its_algorithm_and_config_give() {
        let config = |algorithm, enable_mask, rdma_buffer_size| ncclEpGroupConfig_t {
            algorithm,
            enable_mask,
            rdma_buffer_size,
            ..NCCL_EP_GROUP_CONFIG_INIT()
        };
        let (ll, ht) = (
            ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
            ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT,
        );
        let met = |config| {
            Precondition::ALL
                .into_iter()
                .filter(|p| met_at_creation(&config) & p.bit() != 0)
                .map(Precondition::name)
                .collect::<Vec<_>>()
        };
        assert_eq!(met(config(ll, 0, 0)), Vec::<&str>::new());
        assert_eq!(met(config(ll, 1, 0)), ["mask"]);
        assert_eq!(met(config(ll, 1, 1 << 20)), ["mask", "rdma_buffer"]);
        assert_eq!(met(config(ht, 1, 1 << 20)), Vec::<&str>::new());
    }

    #[test]
    fn the_group_symbols_are_its_config_fields_and_their_quotients() {
        let mut config = NCCL_EP_GROUP_CONFIG_INIT();
        config.num_experts = 8;
        config.max_dispatch_tokens_per_rank = 16;
        config.max_token_bytes = 4096;
        let symbols = group_symbols(2, &config, Arg("config", "")).unwrap();
        for (symbol, value) in [
            (Sym::NumRanks, Some(2)),
            (Sym::NumExperts, Some(8)),
            (Sym::MaxDispatchTokensPerRank, Some(16)),
            (Sym::MaxTokenBytes, Some(4096)),
            (Sym::NumLocalExperts, Some(4)),
            (Sym::NumTokens, None),
            (Sym::Hidden, None),
        ] {
            assert_eq!(symbols.get(symbol), value, "{symbol:?}");
        }
        assert_eq!(
            group_symbols(3, &config, Arg("config", "")).map(|_| ()),
            Err(Error::Ep {
                argument: "config".into(),
                problem: Problem::Limit,
                message: "num_experts = 8 is not a multiple of num_ranks = 3 (experts are split \
                          evenly over the ranks)"
                    .into(),
            })
        );
    }
}
