//! A CUDA stream handle, as NCCL takes it. The crate does not create or own streams.

use crate::error::{Error, Result};
use crate::sys::nccl::cudaStream_t;

/// A CUDA stream NCCL enqueues work on: a non-null `cudaStream_t` or one of the default streams.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stream(cudaStream_t);

// SAFETY: a CUDA stream handle may be used from any thread.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// `cudaStreamLegacy`: the legacy default stream, which waits for every blocking stream.
    pub const LEGACY_DEFAULT: Stream = Stream(core::ptr::without_provenance_mut(0x1));
    /// `cudaStreamPerThread`: the calling thread's default stream.
    pub const PER_THREAD_DEFAULT: Stream = Stream(core::ptr::without_provenance_mut(0x2));

    /// Wraps a `cudaStream_t`. A null handle is [`Error::NullStream`]: CUDA reads it as the
    /// legacy or the per-thread default stream depending on how the caller was compiled
    /// (`nvcc --default-stream`), so say which with the constants above.
    ///
    /// # Safety
    /// `raw` must be a stream of the device the communicators that use it belong to, and must
    /// stay alive until the work enqueued on it has completed.
    pub unsafe fn from_raw(raw: cudaStream_t) -> Result<Stream> {
        if raw.is_null() {
            Err(Error::NullStream)
        } else {
            Ok(Stream(raw))
        }
    }

    /// The `cudaStream_t` NCCL is passed.
    pub fn as_raw(self) -> cudaStream_t {
        self.0
    }
}
