//! Declarations of the ncclbind C runtime (runtime/include/ncclbind/runtime.h), by hand:
//! the runtime is hand-written C, and only the calls the safe crate makes are here.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int};

/// `ncclbind_lib`: which library a call is about.
pub type ncclbind_lib = c_int;
pub const NCCLBIND_LIB_NCCL: ncclbind_lib = 0;
pub const NCCLBIND_LIB_NCCL_EP: ncclbind_lib = 1;

pub const NCCLBIND_OK: c_int = 0;
pub const NCCLBIND_ERROR_LIBRARY_NOT_FOUND: c_int = 0x4E42_0001;
pub const NCCLBIND_ERROR_SYMBOL_NOT_FOUND: c_int = 0x4E42_0002;
pub const NCCLBIND_ERROR_INVALID_ARGUMENT: c_int = 0x4E42_0003;
pub const NCCLBIND_ERROR_STATE: c_int = 0x4E42_0004;
/// NCCL EP (C++) threw an exception out of a function; caught by the C wrapper, the runtime's
/// message names the function, the exception's type and its text (`Error::Runtime`).
pub const NCCLBIND_ERROR_FOREIGN_EXCEPTION: c_int = 0x4E42_0005;

#[repr(C)]
pub struct ncclbind_library_info {
    pub loaded: c_int,
    pub version_code: c_int,
    pub major: c_int,
    pub minor: c_int,
    pub patch: c_int,
    pub cuda_major: c_int,
    pub cuda_minor: c_int,
    pub cuda_variant: [c_char; 16],
    pub path: [c_char; 4096],
}

const _: () = assert!(core::mem::size_of::<ncclbind_library_info>() == 7 * 4 + 16 + 4096);

/// `ncclbind_kernel_headers_status`: whether NCCL_HOME holds the NCCL headers a library's
/// run-time kernel compiles need (0, NCCLBIND_KERNEL_HEADERS_UNKNOWN, when nothing is known).
pub const NCCLBIND_KERNEL_HEADERS_MATCH: c_int = 1;
pub const NCCLBIND_KERNEL_HEADERS_MISMATCH: c_int = 2;
pub const NCCLBIND_KERNEL_HEADERS_UNSET: c_int = 3;

unsafe extern "C" {
    pub fn ncclbind_set_library_path(lib: ncclbind_lib, path: *const c_char) -> c_int;
    pub fn ncclbind_add_search_dir(lib: ncclbind_lib, dir: *const c_char) -> c_int;
    pub fn ncclbind_last_error() -> *const c_char;
    pub fn ncclbind_last_error_code() -> c_int;
    pub fn ncclbind_clear_error();
    pub fn ncclbind_result_name(code: c_int) -> *const c_char;
    pub fn ncclbind_result_description(code: c_int) -> *const c_char;
    pub fn ncclbind_nccl_last_error() -> *const c_char;
    pub fn ncclbind_get_library_info(lib: ncclbind_lib, out: *mut ncclbind_library_info) -> c_int;
    pub fn ncclbind_kernel_headers(lib: ncclbind_lib, message: *mut *const c_char) -> c_int;
    pub fn ncclbind_decode_version(
        code: c_int,
        major: *mut c_int,
        minor: *mut c_int,
        patch: *mut c_int,
    );
}
