//! One rank's GPU: the CUDA runtime that tests/rust/cuda_runtime.rs loads, two calls it does
//! not load (found in the same library, which it loads RTLD_GLOBAL), and device buffers
//! freed on drop.

use std::ffi::{c_char, c_int, c_void, CString};

use ncclbind::{DeviceSlice, DeviceSliceMut, Stream};

use crate::cuda_runtime::{CudaRuntime, RawStream};
use crate::element::Element;

pub type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

unsafe extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// glibc's RTLD_DEFAULT: every library loaded with RTLD_GLOBAL.
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();
const CUDA_ERROR_NOT_READY: c_int = 600;

type Memset = unsafe extern "C" fn(*mut c_void, c_int, usize) -> c_int;
type StreamQuery = unsafe extern "C" fn(RawStream) -> c_int;

pub struct Gpu {
    pub cuda: CudaRuntime,
    memset: Memset,
    stream_query: StreamQuery,
}

/// Whether the work enqueued on a stream has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamState {
    Idle,
    Busy,
}

impl Gpu {
    /// The CUDA runtime with `device` current.
    pub fn open(device: i32) -> Fallible<Gpu> {
        let cuda = CudaRuntime::load()?;
        cuda.set_device(device)?;
        // SAFETY: CudaRuntime::load put libcudart in the global scope; the types are the
        // signatures of cudaMemset and cudaStreamQuery.
        let (memset, stream_query) = unsafe {
            (
                std::mem::transmute::<*mut c_void, Memset>(cuda_symbol("cudaMemset")?),
                std::mem::transmute::<*mut c_void, StreamQuery>(cuda_symbol("cudaStreamQuery")?),
            )
        };
        Ok(Gpu {
            cuda,
            memset,
            stream_query,
        })
    }

    pub fn stream_state(&self, stream: RawStream) -> Fallible<StreamState> {
        // SAFETY: `stream` is a live stream of this process.
        match unsafe { (self.stream_query)(stream) } {
            0 => Ok(StreamState::Idle),
            CUDA_ERROR_NOT_READY => Ok(StreamState::Busy),
            code => Err(format!("cudaStreamQuery: CUDA error {code}").into()),
        }
    }

    /// `len` elements, every byte 0xff: NaN for floats, -1 or the maximum for integers,
    /// never a value the checks expect, so every element a collective skips shows.
    pub fn poisoned<T: Element>(&self, len: usize) -> Fallible<DeviceBuffer<'_, T>> {
        let buffer = DeviceBuffer {
            gpu: self,
            ptr: self.cuda.alloc::<T>(len.max(1))?,
            len,
        };
        // SAFETY: the allocation holds len.max(1) elements.
        let code = unsafe { (self.memset)(buffer.ptr.cast(), 0xff, len.max(1) * size_of::<T>()) };
        if code != 0 {
            return Err(format!("cudaMemset: CUDA error {code}").into());
        }
        Ok(buffer)
    }

    /// A device copy of `host`.
    pub fn upload<T: Element>(&self, host: &[T]) -> Fallible<DeviceBuffer<'_, T>> {
        let buffer = self.poisoned::<T>(host.len())?;
        self.cuda.copy_to_device(buffer.ptr, host)?;
        Ok(buffer)
    }

    /// A device copy of `f(0..len)`.
    pub fn upload_with<T: Element>(
        &self,
        len: usize,
        f: impl Fn(usize) -> T,
    ) -> Fallible<DeviceBuffer<'_, T>> {
        self.upload(&(0..len).map(f).collect::<Vec<T>>())
    }
}

fn cuda_symbol(name: &str) -> Fallible<*mut c_void> {
    let c_name = CString::new(name)?;
    // SAFETY: `c_name` is NUL-terminated.
    let address = unsafe { dlsym(RTLD_DEFAULT, c_name.as_ptr()) };
    if address.is_null() {
        Err(format!("{name} is not in the loaded CUDA runtime").into())
    } else {
        Ok(address)
    }
}

/// `len` elements of device memory (cudaMalloc), freed on drop. Every caller synchronizes
/// its stream before a buffer goes, and cudaFree waits for the device besides.
pub struct DeviceBuffer<'g, T> {
    gpu: &'g Gpu,
    ptr: *mut T,
    len: usize,
}

impl<T: Element> DeviceBuffer<'_, T> {
    pub fn ptr(&self) -> *mut T {
        self.ptr
    }

    pub fn slice(&self) -> DeviceSlice<'_, T> {
        // SAFETY: the allocation holds `len` elements and lives as long as the borrow.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }.expect("a cudaMalloc'd size")
    }

    pub fn slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        // SAFETY: as above, and the borrow is exclusive.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, self.len) }.expect("a cudaMalloc'd size")
    }

    /// The contents, once `stream` has finished.
    pub fn download(&self, stream: Stream) -> Fallible<Vec<T>> {
        self.gpu.cuda.synchronize(stream.as_raw().cast())?;
        let mut host = vec![T::from_small(0); self.len];
        self.gpu.cuda.copy_to_host(&mut host, self.ptr)?;
        Ok(host)
    }
}

impl<T> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        let _ = self.gpu.cuda.free(self.ptr);
    }
}
