//! Which NCCL libraries are loaded, from where, and which version: libnccl and libnccl_ep,
//! loaded by the ncclbind runtime on first use (see runtime.h for the search order).

use core::ffi::c_int;
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{check, check_runtime, text, Error, Result};
use crate::runtime;
use crate::sys::nccl::ncclGetVersion;

/// One of the libraries the runtime loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Library {
    /// libnccl.so.2. Explicit path: `NCCLBIND_NCCL_PATH` or [`set_library_path`].
    Nccl,
    /// libnccl_ep.so (it needs libnccl and libcuda.so.1). Explicit path: `NCCLBIND_NCCL_EP_PATH`.
    NcclEp,
}

impl Library {
    fn raw(self) -> runtime::ncclbind_lib {
        match self {
            Library::Nccl => runtime::NCCLBIND_LIB_NCCL,
            Library::NcclEp => runtime::NCCLBIND_LIB_NCCL_EP,
        }
    }
}

/// A library's release, ordered (2.28.9 < 2.32.3); displayed as `2.28.9`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// 2 in NCCL 2.28.9.
    pub major: u32,
    /// 28 in NCCL 2.28.9.
    pub minor: u32,
    /// 9 in NCCL 2.28.9.
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// A libnccl version code (22809), in either of NCCL's encodings.
    pub fn from_nccl_code(code: i32) -> Version {
        let (mut major, mut minor, mut patch) = (0, 0, 0);
        // SAFETY: plain arithmetic on the code; the outputs are valid ints.
        unsafe { runtime::ncclbind_decode_version(code, &mut major, &mut minor, &mut patch) };
        Version {
            major: major as u32,
            minor: minor as u32,
            patch: patch as u32,
        }
    }
}

/// The CUDA version a library was built for, from its "+cudaX.Y" version banner.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaBuild {
    /// 13 in "+cuda13.0".
    pub major: u32,
    /// 0 in "+cuda13.0".
    pub minor: u32,
    /// "cu12", "cu13", ...
    pub variant: String,
}

/// A loaded library: which, its version, its CUDA build and its path ([`library_info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryInfo {
    /// Which library this is.
    pub library: Library,
    /// Its version, decoded from `version_code`.
    pub version: Version,
    /// As the library reports it: 22809 for NCCL 2.28.9, 200 for NCCL EP 0.2.0.
    pub version_code: i32,
    /// None when the library carries no CUDA build banner.
    pub cuda: Option<CudaBuild>,
    /// The file that was loaded.
    pub path: PathBuf,
}

/// Loads `library` if needed and describes it. A library that cannot be loaded is
/// [`Error::LibraryNotFound`], whose message lists every path tried.
pub fn library_info(library: Library) -> Result<LibraryInfo> {
    // SAFETY: all-zero is a valid ncclbind_library_info; the runtime fills it.
    let mut info: runtime::ncclbind_library_info = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable ncclbind_library_info.
    check_runtime("ncclbind_get_library_info", unsafe {
        runtime::ncclbind_get_library_info(library.raw(), &mut info)
    })?;
    // SAFETY: the runtime NUL-terminates both arrays.
    let (variant, path) = unsafe { (text(info.cuda_variant.as_ptr()), text(info.path.as_ptr())) };
    let cuda = (info.cuda_major > 0).then_some(CudaBuild {
        major: info.cuda_major as u32,
        minor: info.cuda_minor as u32,
        variant,
    });
    Ok(LibraryInfo {
        library,
        version: Version {
            major: info.major as u32,
            minor: info.minor as u32,
            patch: info.patch as u32,
        },
        version_code: info.version_code,
        cuda,
        path: PathBuf::from(path),
    })
}

/// The loaded libnccl's version, from `ncclGetVersion` (loads libnccl if needed).
pub fn nccl_version() -> Result<Version> {
    let mut code: c_int = 0;
    // SAFETY: `code` is a valid out-pointer.
    check("ncclGetVersion", unsafe { ncclGetVersion(&mut code) })?;
    Ok(Version::from_nccl_code(code))
}

/// Loads `library` from exactly this file (instead of the environment's path or the search).
/// Fails with `Error::Runtime` once the library is loaded.
pub fn set_library_path(library: Library, path: &Path) -> Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is NUL-terminated and outlives the call.
    check_runtime("ncclbind_set_library_path", unsafe {
        runtime::ncclbind_set_library_path(library.raw(), path.as_ptr())
    })
}

/// Adds a directory to search for `library` (after an explicit path, before $CUDA_HOME).
pub fn add_search_dir(library: Library, dir: &Path) -> Result<()> {
    let dir = c_path(dir)?;
    // SAFETY: `dir` is NUL-terminated and outlives the call.
    check_runtime("ncclbind_add_search_dir", unsafe {
        runtime::ncclbind_add_search_dir(library.raw(), dir.as_ptr())
    })
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::InvalidPath {
        path: path.display().to_string(),
    })
}
