//! What the generated host calls (templates/rust/calls.rs.j2) make of results that are not an
//! `ncclResult_t`: the runtime's error around a function that returns a value instead (a
//! missing library or function is reported only there), and copies of the C strings NCCL
//! returns (which it owns and may overwrite on the next call).

use core::ffi::{c_char, CStr};

use crate::error::{check_runtime, Result};
use crate::runtime;

/// Clears this thread's runtime error before a call that returns no `ncclResult_t`.
pub(crate) fn clear_runtime_error() {
    // SAFETY: touches only this thread's error state in the runtime.
    unsafe { runtime::ncclbind_clear_error() }
}

/// After such a call: `Error::LibraryNotFound` / `Error::SymbolNotFound` when the runtime could
/// not reach `function` (its C wrapper then returned a zeroed value), else `Ok`.
pub(crate) fn check_runtime_error(function: &'static str) -> Result<()> {
    // SAFETY: reads only this thread's error state in the runtime.
    check_runtime(function, unsafe { runtime::ncclbind_last_error_code() })
}

/// A copy of the C string at `text` ("" for null), invalid UTF-8 replaced.
///
/// # Safety
/// `text` is null or points at a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn owned_string(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated (the caller's promise).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// Copies of the `len` C strings of `table` (none for a null table or a length below 1).
///
/// # Safety
/// `table` is null or points at `len` pointers, each as [`owned_string`] needs.
pub(crate) unsafe fn owned_strings(table: *const *const c_char, len: i32) -> Vec<String> {
    let Ok(len) = usize::try_from(len) else {
        return Vec::new();
    };
    if table.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: `table` holds `len` pointers (the caller's promise).
    let pointers = unsafe { core::slice::from_raw_parts(table, len) };
    // SAFETY: each pointer is null or a valid C string (the caller's promise).
    pointers
        .iter()
        .map(|&text| unsafe { owned_string(text) })
        .collect()
}
