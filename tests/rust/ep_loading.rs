//! The real libnccl_ep over the oldest header set's real libnccl (older than the set libnccl_ep
//! depends on): `library_info(Library::NcclEp)` is `Error::LibraryNotFound` whose message starts
//! by naming libnccl_ep's version and file, the libnccl in use and the NCCL version needed. The
//! versions come from the IR (bindings/ir/api/*.json). The CUDA driver stub (SONAME
//! libcuda.so.1) is loaded first. Paths: NCCLBIND_NCCL_PATH (the old libnccl),
//! NCCLBIND_NCCL_EP_PATH, NCCLBIND_CUDA_STUB, from BUILD.

mod ir;

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use ir::{str_at, Json};
use ncclbind::{library_info, Error, Library};

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;
const RTLD_GLOBAL: c_int = 0x100;

const EP_IR: &str = include_str!("../../bindings/ir/api/nccl_ep.json");

fn strings(json: &Json, key: &str) -> Vec<String> {
    let Some(Json::Array(items)) = json.get(key) else {
        panic!("the IR has no {key}")
    };
    items
        .iter()
        .map(|item| match item {
            Json::String(s) => s.clone(),
            other => panic!("{key}: {other:?}"),
        })
        .collect()
}

fn open(path: &PathBuf, flags: c_int) -> *mut c_void {
    let c_path = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    unsafe { dlopen(c_path.as_ptr(), flags) }
}

fn env_path(name: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var_os(name).unwrap_or_else(|| panic!("{name} is not set")));
    path.canonicalize()
        .unwrap_or_else(|e| panic!("{name}={}: {e}", path.display()))
}

#[test]
fn libnccl_ep_on_an_older_libnccl_names_the_three_versions() {
    let nccl = ir::api();
    let ep = Json::parse(EP_IR);
    let ep_version = strings(&ep, "versions").pop().unwrap();
    let needed_set = str_at(&ep, "depends_on");
    let set_index = strings(&nccl, "header_sets")
        .iter()
        .position(|s| s == needed_set)
        .expect("depends_on names a libnccl header set");
    let needed = ir::versions(&nccl)[set_index].clone();

    let stub = env_path("NCCLBIND_CUDA_STUB");
    assert!(
        !open(&stub, RTLD_NOW | RTLD_GLOBAL).is_null(),
        "the CUDA stub does not load"
    );
    let old_nccl = library_info(Library::Nccl).expect("the old libnccl loads");
    assert!(
        old_nccl.version_code < ir::version_code(&nccl, &needed),
        "NCCLBIND_NCCL_PATH must be older than {needed}: {old_nccl:?}"
    );
    let ep_path = env_path("NCCLBIND_NCCL_EP_PATH");

    // An EP call, as a program that uses EP makes one (it also links the generated nccl_ep.c,
    // whose constructor registers the dependency): the runtime's code, not NCCL's.
    let mut version: c_int = 0;
    // SAFETY: a valid out-pointer; the wrapper returns the load failure's code.
    let code = unsafe { ncclbind::sys::nccl_ep::ncclEpGetVersion(&mut version) };
    assert_eq!(
        code.0 as i32,
        Error::LibraryNotFound {
            message: String::new()
        }
        .code()
    );

    let err = library_info(Library::NcclEp).unwrap_err();
    let Error::LibraryNotFound { message } = &err else {
        panic!("{err:?}")
    };
    let headline = format!(
        "libnccl_ep {ep_version} at {} needs NCCL {needed} or newer, but the libnccl in use is NCCL {} ({})",
        ep_path.display(),
        old_nccl.version,
        old_nccl.path.display()
    );
    assert!(
        message.starts_with(&headline),
        "{message}\n  should start with\n{headline}"
    );
    assert!(
        message.contains(&format!(
            "Load a libnccl.so.2 of NCCL {needed} or newer first"
        )),
        "{message}"
    );
    assert!(
        message.contains("\nlibnccl_ep could not be loaded; tried, in order:\n"),
        "{message}"
    );

    // The function it names is one the old libnccl really lacks.
    let lacks = message
        .split(", which lacks ")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .unwrap_or_else(|| panic!("no missing function named: {message}"));
    let handle = open(&old_nccl.path, RTLD_NOW);
    assert!(!handle.is_null());
    let symbol = CString::new(lacks).unwrap();
    // SAFETY: an open handle and a NUL-terminated name.
    assert!(
        unsafe { dlsym(handle, symbol.as_ptr()) }.is_null(),
        "{lacks} is in the old libnccl"
    );
    // The error is the same through the crate's one Error, each time it is asked.
    assert_eq!(
        err.to_string(),
        library_info(Library::NcclEp).unwrap_err().to_string()
    );
}
