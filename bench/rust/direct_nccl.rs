//! NCCL's own entry points, found with dlsym in the libnccl the runtime loaded (it loads
//! with RTLD_GLOBAL): calling these is what a C program linked against libnccl does.

use std::ffi::{c_char, c_void, CString};

unsafe extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// glibc's RTLD_DEFAULT: search every library in the process.
const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();

/// The address of `name` in the loaded libraries (load libnccl first, e.g. with nccl_version()).
pub fn nccl_entry_point(name: &str) -> *mut c_void {
    let c_name = CString::new(name).unwrap();
    let address = unsafe { dlsym(RTLD_DEFAULT, c_name.as_ptr()) };
    assert!(
        !address.is_null(),
        "{name} is not in the process; is libnccl loaded?"
    );
    address
}

/// Median of per-call times, in nanoseconds.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
