//! The id every rank of a new communicator must share, created on one rank and sent to the
//! others by any means (its 128 bytes).

use core::ffi::c_char;
use std::fmt;

use crate::error::{check, Error, Result};
use crate::sys::nccl::{ncclGetUniqueId, ncclUniqueId, NCCL_UNIQUE_ID_BYTES};

/// The size of a unique id in bytes (`NCCL_UNIQUE_ID_BYTES`, 128).
pub const UNIQUE_ID_BYTES: usize = NCCL_UNIQUE_ID_BYTES as usize;

const _: () = assert!(size_of::<ncclUniqueId>() == UNIQUE_ID_BYTES);
const _: () = assert!(size_of::<c_char>() == 1);

/// An `ncclUniqueId`: rank 0 creates it ([`UniqueId::new`]) and every rank passes the same
/// bytes to [`Communicator::init_rank`](crate::Communicator::init_rank).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct UniqueId(ncclUniqueId);

impl UniqueId {
    /// A fresh id from `ncclGetUniqueId` (it needs no GPU; NCCL picks a network interface).
    pub fn new() -> Result<UniqueId> {
        let mut id = ncclUniqueId::default();
        // SAFETY: `id` is a valid out-pointer.
        check("ncclGetUniqueId", unsafe { ncclGetUniqueId(&mut id) })?;
        Ok(UniqueId(id))
    }

    /// The id another rank sent as bytes ([`UniqueId::as_bytes`]).
    pub fn from_bytes(bytes: [u8; UNIQUE_ID_BYTES]) -> UniqueId {
        let mut id = ncclUniqueId::default();
        for (internal, byte) in id.internal.iter_mut().zip(bytes) {
            *internal = byte as c_char;
        }
        UniqueId(id)
    }

    /// The id's bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        // SAFETY: `internal` is UNIQUE_ID_BYTES c_chars, and c_char has u8's size and alignment.
        unsafe { &*self.0.internal.as_ptr().cast::<[u8; UNIQUE_ID_BYTES]>() }
    }

    /// The `ncclUniqueId` NCCL is passed.
    pub fn as_raw(&self) -> &ncclUniqueId {
        &self.0
    }
}

impl TryFrom<&[u8]> for UniqueId {
    type Error = Error;

    fn try_from(bytes: &[u8]) -> Result<UniqueId> {
        let bytes: [u8; UNIQUE_ID_BYTES] = bytes
            .try_into()
            .map_err(|_| Error::UniqueIdLength { len: bytes.len() })?;
        Ok(UniqueId::from_bytes(bytes))
    }
}

impl PartialEq for UniqueId {
    fn eq(&self, other: &UniqueId) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for UniqueId {}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UniqueId(")?;
        for byte in &self.as_bytes()[..16] {
            write!(f, "{byte:02x}")?;
        }
        f.write_str("...)")
    }
}
