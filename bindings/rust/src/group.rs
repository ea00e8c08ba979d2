//! Group calls: NCCL operations between `ncclGroupStart` and `ncclGroupEnd` are launched
//! together (needed, for example, for send/recv pairs or one thread driving many GPUs).

use std::marker::PhantomData;

use crate::error::{check, Result};
use crate::sys::nccl::{ncclGroupEnd, ncclGroupStart};

/// An open group; dropping it ends the group (ignoring the result), [`Group::end`] reports it.
/// Groups are per thread in NCCL, so a `Group` cannot leave its thread.
#[must_use = "the group ends when this guard is dropped"]
pub struct Group {
    _per_thread: PhantomData<*const ()>,
}

impl Group {
    /// Opens a group on this thread (`ncclGroupStart`); groups nest.
    pub fn start() -> Result<Group> {
        // SAFETY: no arguments; NCCL keeps the group depth per thread.
        check("ncclGroupStart", unsafe { ncclGroupStart() })?;
        Ok(Group {
            _per_thread: PhantomData,
        })
    }

    /// Ends the group and launches its operations (it may block).
    pub fn end(self) -> Result<()> {
        std::mem::forget(self);
        // SAFETY: this guard's ncclGroupStart is still open.
        check("ncclGroupEnd", unsafe { ncclGroupEnd() })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: this guard's ncclGroupStart is still open.
        unsafe { ncclGroupEnd() };
    }
}
