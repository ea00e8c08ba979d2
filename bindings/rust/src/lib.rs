//! NCCL for Rust, over the ncclbind C runtime.
//!
//! Two layers:
//! * [`sys`]: generated from NCCL's headers. `#[repr(C)]` mirrors of every struct (one per
//!   layout where versions differ, checked against clang's layout at compile time), enums
//!   as newtypes, constants, initializers, and every function under its NCCL name. The
//!   functions are the generated C wrappers, which load libnccl on first use and return the
//!   runtime's error codes when the library or the function is missing.
//! * This crate root: a safe API. [`Error`] carries NCCL's code, name and last-error text;
//!   [`Communicator`] owns a communicator (RAII, `Send` but not `Sync`) and checks ranks and
//!   counts before NCCL sees them, and hands out an [`AbortHandle`] (`Send + Sync`) that
//!   aborts it from another thread; [`Group`], [`PreMulSum`], [`RegisteredBuffer`] and
//!   [`Window`] release what they hold on drop and borrow what they depend on. The
//!   variable-count collectives ([`Communicator::all_to_allv`], `all_gatherv`,
//!   `reduce_scatterv`) are grouped sends, receives or reduces, their counts checked first;
//!   [`Complex32`] and [`Complex64`] travel as pairs of reals, summed or averaged only.
//!
//! Threads: a [`Communicator`] is used by one thread at a time (it is `Send`, not `Sync`); an
//! [`AbortHandle`] aborts it from any thread. The abort stops new calls ([`Error::Aborted`]),
//! lets a call under way return first ([`ABORT_GRACE`]; one blocked in NCCL is revoked where the
//! library has `ncclCommRevoke`, then gets [`REVOKE_GRACE`]), and frees the communicator once,
//! whoever else aborts or drops it. Only a call still blocked inside NCCL after that sees the
//! free, as NCCL's error: ending such a call is what `ncclCommAbort` is for.
//!
//! The library is found by the runtime: a copy already in the process, else
//! `NCCLBIND_NCCL_PATH` (or [`set_library_path`]), else `$CUDA_HOME/lib{,64}`, else the
//! dynamic loader's search.
//!
//! ```no_run
//! use ncclbind::{Communicator, DeviceSlice, DeviceSliceMut, RedOp, Stream, UniqueId};
//!
//! # fn device_buffers() -> (*const f32, *mut f32, *mut std::ffi::c_void) { unimplemented!() }
//! # fn main() -> ncclbind::Result<()> {
//! // Rank 0 creates the id and sends its bytes (id.as_bytes()) to the other ranks.
//! let id = UniqueId::new()?;
//! let comm = Communicator::init_rank(1, &id, 0)?;
//! // Device memory and a stream from your CUDA code:
//! let (send_ptr, recv_ptr, raw_stream) = device_buffers();
//! let send = unsafe { DeviceSlice::from_raw_parts(send_ptr, 1024)? };
//! let mut recv = unsafe { DeviceSliceMut::from_raw_parts(recv_ptr, 1024)? };
//! let stream = unsafe { Stream::from_raw(raw_stream)? };
//! comm.all_reduce(&send, &mut recv, RedOp::SUM, stream)?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// Generated from the headers: an item carries the doc NCCL's header gives it, and many have none.
// Rendered into src/generated/sys/ with the crate's other generated code (one folder name for
// everything generated); `ncclbind::sys` is its path.
#[allow(missing_docs)]
#[path = "generated/sys/mod.rs"]
pub mod sys;

mod abort;
mod call_results;
mod coll_config;
mod communicator;
mod config;
mod data_type;
pub mod dev_comm;
mod device_slice;
pub mod ep;
mod error;
mod group;
mod library;
pub mod params;
mod reduction;
mod registration;
mod runtime;
mod stream;
mod unique_id;
mod variable_count;

pub use abort::{AbortHandle, ABORT_GRACE, REVOKE_GRACE};
pub use coll_config::CollConfig;
pub use communicator::{CftLeInfo, Communicator, ShrinkMode};
pub use config::CommConfig;
#[doc(hidden)]
pub use config::Documented;
pub use data_type::{Complex32, Complex64, DataType, DataTypeInfo, BF16, DATA_TYPES, F16};
pub use device_slice::{DeviceSlice, DeviceSliceMut};
pub use error::{check, Error, Result};
pub use group::Group;
pub use library::{
    add_search_dir, library_info, nccl_version, set_library_path, CudaBuild, Library, LibraryInfo,
    Version,
};
pub use params::Param;
pub use reduction::{PreMulSum, RedOp};
pub use registration::{RegisteredBuffer, Window, WindowFlags};
pub use stream::Stream;
pub use unique_id::{UniqueId, UNIQUE_ID_BYTES};

/// `ncclTeam_t` (nRanks, rank, stride): what [`Communicator::team_world`] and the other team
/// methods return and [`Communicator::team_rank_to_world`] / [`Communicator::team_rank_to_lsa`] take.
pub type Team = sys::nccl::ncclTeam_t;
