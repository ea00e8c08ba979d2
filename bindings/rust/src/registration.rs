//! Buffers registered with a communicator, and memory windows: both deregister on drop and
//! borrow the communicator and the memory, so neither can outlive what it refers to.

use core::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ops::BitOr;

use crate::communicator::Communicator;
use crate::data_type::DataType;
use crate::device_slice::{DeviceSlice, DeviceSliceMut};
use crate::error::{check, Result};
use crate::sys::nccl::{
    ncclCommDeregister, ncclCommRegister, ncclCommWindowDeregister, ncclCommWindowRegister,
    ncclWindow_t, NCCL_WIN_COLL_SYMMETRIC, NCCL_WIN_DEFAULT,
};

/// A buffer registered with `ncclCommRegister` (zero-copy for collectives that use it).
pub struct RegisteredBuffer<'a> {
    comm: &'a Communicator,
    handle: *mut c_void,
    _memory: PhantomData<&'a ()>,
}

/// Flags of `ncclCommWindowRegister` (`NCCL_WIN_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowFlags(pub c_int);

impl WindowFlags {
    /// `NCCL_WIN_DEFAULT`: no flags.
    pub const DEFAULT: WindowFlags = WindowFlags(NCCL_WIN_DEFAULT);
    /// Every rank registers a buffer of the same size (symmetric memory collectives).
    pub const COLL_SYMMETRIC: WindowFlags = WindowFlags(NCCL_WIN_COLL_SYMMETRIC);
}

impl BitOr for WindowFlags {
    type Output = WindowFlags;

    fn bitor(self, other: WindowFlags) -> WindowFlags {
        WindowFlags(self.0 | other.0)
    }
}

/// A memory window (`ncclCommWindowRegister`): peers may access the memory, so the window
/// holds the only writable view of it.
pub struct Window<'a> {
    comm: &'a Communicator,
    raw: ncclWindow_t,
    _memory: PhantomData<&'a mut ()>,
}

impl Window<'_> {
    /// The NCCL window, or null once an [`AbortHandle`](crate::AbortHandle) aborted the
    /// communicator, which freed the window with it.
    pub fn as_raw(&self) -> ncclWindow_t {
        match self.comm.shared_live() {
            Ok(()) => self.raw,
            Err(_) => std::ptr::null_mut(),
        }
    }

    /// The communicator the window was registered with (the generated window calls check
    /// that it is still live).
    pub(crate) fn communicator(&self) -> &Communicator {
        self.comm
    }
}

impl Communicator {
    /// Registers `buffer` for zero-copy use by collectives on this communicator.
    pub fn register<'a, T: DataType>(
        &'a self,
        buffer: DeviceSlice<'a, T>,
    ) -> Result<RegisteredBuffer<'a>> {
        let mut handle = std::ptr::null_mut();
        // Cannot overflow: DeviceSlice::from_raw_parts checked it.
        let bytes = buffer.len() * size_of::<T>();
        // SAFETY: the view covers `len` elements of device memory; `handle` is an out-pointer.
        check("ncclCommRegister", unsafe {
            ncclCommRegister(
                self.enter()?.raw(),
                buffer.as_ptr() as *mut c_void,
                bytes,
                &mut handle,
            )
        })?;
        Ok(RegisteredBuffer {
            comm: self,
            handle,
            _memory: PhantomData,
        })
    }

    /// Registers `buffer` as a window (collective: every rank calls it).
    pub fn register_window<'a, T: DataType>(
        &'a self,
        mut buffer: DeviceSliceMut<'a, T>,
        flags: WindowFlags,
    ) -> Result<Window<'a>> {
        let mut raw: ncclWindow_t = std::ptr::null_mut();
        let bytes = buffer.len() * size_of::<T>();
        // SAFETY: the view covers `len` elements of device memory; `raw` is an out-pointer.
        check("ncclCommWindowRegister", unsafe {
            ncclCommWindowRegister(
                self.enter()?.raw(),
                buffer.as_mut_ptr().cast(),
                bytes,
                &mut raw,
                flags.0,
            )
        })?;
        Ok(Window {
            comm: self,
            raw,
            _memory: PhantomData,
        })
    }
}

// After an abort handle aborted the communicator, ncclCommAbort has freed its registrations
// and windows with it: nothing is left to deregister, and the handles must not reach NCCL.
impl Drop for RegisteredBuffer<'_> {
    fn drop(&mut self) {
        if let Ok(comm) = self.comm.enter() {
            // SAFETY: the handle came from ncclCommRegister on this communicator, which is live.
            unsafe { ncclCommDeregister(comm.raw(), self.handle) };
        }
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        if let Ok(comm) = self.comm.enter() {
            // SAFETY: the window came from ncclCommWindowRegister on this communicator, which
            // is live.
            unsafe { ncclCommWindowDeregister(comm.raw(), self.raw) };
        }
    }
}
