//! Typed views of device memory: what the collectives read and write. Rust cannot see into
//! device memory, so making a view is the one `unsafe` step; the calls then check counts.

use std::marker::PhantomData;

use crate::data_type::DataType;
use crate::error::{Error, Result};

/// `len` elements of device memory that NCCL reads.
#[derive(Clone, Copy, Debug)]
pub struct DeviceSlice<'a, T> {
    ptr: *const T,
    len: usize,
    _memory: PhantomData<&'a [T]>,
}

/// `len` elements of device memory that NCCL writes.
#[derive(Debug)]
pub struct DeviceSliceMut<'a, T> {
    ptr: *mut T,
    len: usize,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: a view is an address and a length; which thread enqueues work on it does not matter.
unsafe impl<T: Sync> Send for DeviceSlice<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for DeviceSlice<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for DeviceSliceMut<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for DeviceSliceMut<'_, T> {}

fn check_byte_size<T>(len: usize) -> Result<()> {
    let size = size_of::<T>();
    match len.checked_mul(size) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(Error::CountOverflow {
            argument: "len",
            count: len,
            factor: size,
        }),
    }
}

/// What a view's pointer must be: aligned for `T` and, for one or more elements, not null.
/// Null with `len` 0 is accepted: `cudaMalloc(0)` gives null, and NCCL reads no element.
fn check_pointer<T>(address: usize, len: usize) -> Result<()> {
    if address == 0 && len > 0 {
        return Err(Error::NullPointer { argument: "ptr" });
    }
    if address % align_of::<T>() != 0 {
        return Err(Error::Misaligned {
            argument: "ptr",
            address,
            align: align_of::<T>(),
        });
    }
    Ok(())
}

fn inside(start: usize, len: usize, view_len: usize) -> bool {
    start.checked_add(len).is_some_and(|end| end <= view_len)
}

impl<'a, T: DataType> DeviceSlice<'a, T> {
    /// A view of `len` elements at `ptr`. Fails if `len` elements overflow `isize` bytes
    /// ([`Error::CountOverflow`]), if `ptr` is null and `len` is not 0 ([`Error::NullPointer`]),
    /// or if `ptr` is not aligned for `T` ([`Error::Misaligned`]).
    ///
    /// # Safety
    /// `ptr` must point to `len` elements of memory NCCL can access from the GPU (device
    /// memory, or memory registered for it), and the memory must stay allocated for `'a`
    /// and until every operation enqueued with this view has completed on its stream.
    pub unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Result<Self> {
        check_byte_size::<T>(len)?;
        check_pointer::<T>(ptr as usize, len)?;
        Ok(DeviceSlice {
            ptr,
            len,
            _memory: PhantomData,
        })
    }

    /// The number of elements (values of `T`) in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Elements `start..start + len` of this view (the variable-count collectives' blocks).
    /// Panics outside the view: callers check their blocks first and report them as errors.
    pub(crate) fn block(&self, start: usize, len: usize) -> DeviceSlice<'_, T> {
        assert!(inside(start, len, self.len), "block outside the view");
        DeviceSlice {
            ptr: self.ptr.wrapping_add(start),
            len,
            _memory: PhantomData,
        }
    }
}

impl<'a, T: DataType> DeviceSliceMut<'a, T> {
    /// A writable view of `len` elements at `ptr`. Fails as [`DeviceSlice::from_raw_parts`] does.
    ///
    /// # Safety
    /// As for [`DeviceSlice::from_raw_parts`]; besides, nothing else may write the memory
    /// while operations enqueued with this view run.
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Result<Self> {
        check_byte_size::<T>(len)?;
        check_pointer::<T>(ptr as usize, len)?;
        Ok(DeviceSliceMut {
            ptr,
            len,
            _memory: PhantomData,
        })
    }

    /// The number of elements (values of `T`) in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// Elements `start..start + len`, writable, as for [`DeviceSlice::block`].
    pub(crate) fn block_mut(&mut self, start: usize, len: usize) -> DeviceSliceMut<'_, T> {
        assert!(inside(start, len, self.len), "block outside the view");
        DeviceSliceMut {
            ptr: self.ptr.wrapping_add(start),
            len,
            _memory: PhantomData,
        }
    }

    /// The same memory, read-only, for as long as this view is borrowed.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len,
            _memory: PhantomData,
        }
    }
}
