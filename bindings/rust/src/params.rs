//! NCCL's process-wide parameter registry (NCCL 2.30.7 and newer): [`keys`], [`get`] (the
//! value as NCCL prints it), [`bind`] (a [`Param`] to read by type), [`dump`] (to NCCL's log).
//! Generated from policy/nccl.toml (owners `params` and `Param`); with an older
//! libnccl each returns [`Error::SymbolNotFound`](crate::Error::SymbolNotFound).
//!
//! ```no_run
//! for key in ncclbind::params::keys()? {
//!     println!("{key} = {}", ncclbind::params::get(&key)?);
//! }
//! let subsys = ncclbind::params::bind("NCCL_DEBUG_SUBSYS")?;
//! let mask = subsys.get_u64()?; // NCCL refuses another type than the parameter's
//! # let _ = mask;
//! # Ok::<(), ncclbind::Error>(())
//! ```

use crate::error::{check, Error, Result};
use crate::sys::nccl::*;

/// A parameter bound by [`bind`]: NCCL's `ncclParamHandle_t`, which NCCL owns for the life of
/// the process (nothing to free, so it is `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    handle: ncclParamHandle_t,
}

impl Param {
    fn from_raw(handle: ncclParamHandle_t) -> Param {
        Param { handle }
    }

    /// The raw `ncclParamHandle_t`, for [`crate::sys`] calls.
    pub fn as_raw(&self) -> ncclParamHandle_t {
        self.handle
    }
}

include!("generated/params_calls.rs");
include!("generated/param_calls.rs");
