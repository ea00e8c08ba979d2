//! The few CUDA runtime calls the GPU test and the benchmark make, loaded with dlopen: the
//! binaries then build anywhere and, without CUDA or a GPU, can say so and skip.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

unsafe extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

const RTLD_NOW: c_int = 2;
const RTLD_GLOBAL: c_int = 0x100;
const CUDA_MEMCPY_HOST_TO_DEVICE: c_int = 1;
const CUDA_MEMCPY_DEVICE_TO_HOST: c_int = 2;

pub type RawStream = *mut c_void;

pub struct CudaRuntime {
    pub path: String,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    free: unsafe extern "C" fn(*mut c_void) -> c_int,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    stream_create: unsafe extern "C" fn(*mut RawStream) -> c_int,
    stream_synchronize: unsafe extern "C" fn(RawStream) -> c_int,
    stream_destroy: unsafe extern "C" fn(RawStream) -> c_int,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
}

/// Where libcudart may be: NCCLBIND_CUDART_PATH, the loader's search, then $CUDA_HOME.
fn candidates() -> Vec<String> {
    let mut out: Vec<String> = std::env::var("NCCLBIND_CUDART_PATH").into_iter().collect();
    out.extend(["libcudart.so.13", "libcudart.so.12", "libcudart.so"].map(String::from));
    let cuda_home = std::env::var("CUDA_HOME").unwrap_or_else(|_| "/usr/local/cuda".into());
    out.extend(["lib64", "lib"].map(|dir| format!("{cuda_home}/{dir}/libcudart.so")));
    out
}

impl CudaRuntime {
    pub fn load() -> Result<CudaRuntime, String> {
        let mut tried = Vec::new();
        for candidate in candidates() {
            let name = CString::new(candidate.clone()).unwrap();
            let handle = unsafe { dlopen(name.as_ptr(), RTLD_NOW | RTLD_GLOBAL) };
            if handle.is_null() {
                tried.push(format!(
                    "{candidate}: {}",
                    unsafe { CStr::from_ptr(dlerror()) }.to_string_lossy()
                ));
                continue;
            }
            // SAFETY (for the callers): F is the function-pointer type of the symbol.
            unsafe fn function<F: Copy>(address: *mut c_void) -> F {
                assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
                std::mem::transmute_copy(&address)
            }
            let symbol = |name: &str| -> Result<*mut c_void, String> {
                let c_name = CString::new(name).unwrap();
                let ptr = unsafe { dlsym(handle, c_name.as_ptr()) };
                if ptr.is_null() {
                    Err(format!("{candidate} lacks {name}"))
                } else {
                    Ok(ptr)
                }
            };
            // SAFETY: each symbol is the CUDA runtime function of that name and signature.
            unsafe {
                return Ok(CudaRuntime {
                    path: candidate.clone(),
                    get_device_count: function(symbol("cudaGetDeviceCount")?),
                    set_device: function(symbol("cudaSetDevice")?),
                    malloc: function(symbol("cudaMalloc")?),
                    free: function(symbol("cudaFree")?),
                    memcpy: function(symbol("cudaMemcpy")?),
                    stream_create: function(symbol("cudaStreamCreate")?),
                    stream_synchronize: function(symbol("cudaStreamSynchronize")?),
                    stream_destroy: function(symbol("cudaStreamDestroy")?),
                    get_error_string: function(symbol("cudaGetErrorString")?),
                });
            }
        }
        Err(format!("no CUDA runtime: {}", tried.join("; ")))
    }

    fn check(&self, call: &str, code: c_int) -> Result<(), String> {
        if code == 0 {
            Ok(())
        } else {
            let text = unsafe { CStr::from_ptr((self.get_error_string)(code)) };
            Err(format!(
                "{call}: CUDA error {code}: {}",
                text.to_string_lossy()
            ))
        }
    }

    pub fn device_count(&self) -> Result<i32, String> {
        let mut count = 0;
        self.check("cudaGetDeviceCount", unsafe {
            (self.get_device_count)(&mut count)
        })?;
        Ok(count)
    }

    pub fn set_device(&self, device: i32) -> Result<(), String> {
        self.check("cudaSetDevice", unsafe { (self.set_device)(device) })
    }

    pub fn alloc<T>(&self, len: usize) -> Result<*mut T, String> {
        let mut ptr = std::ptr::null_mut();
        self.check("cudaMalloc", unsafe {
            (self.malloc)(&mut ptr, len * size_of::<T>())
        })?;
        Ok(ptr.cast())
    }

    pub fn free<T>(&self, ptr: *mut T) -> Result<(), String> {
        self.check("cudaFree", unsafe { (self.free)(ptr.cast()) })
    }

    pub fn copy_to_device<T: Copy>(&self, device: *mut T, host: &[T]) -> Result<(), String> {
        let bytes = std::mem::size_of_val(host);
        self.check("cudaMemcpy", unsafe {
            (self.memcpy)(
                device.cast(),
                host.as_ptr().cast(),
                bytes,
                CUDA_MEMCPY_HOST_TO_DEVICE,
            )
        })
    }

    pub fn copy_to_host<T: Copy>(&self, host: &mut [T], device: *const T) -> Result<(), String> {
        let bytes = std::mem::size_of_val(host);
        self.check("cudaMemcpy", unsafe {
            (self.memcpy)(
                host.as_mut_ptr().cast(),
                device.cast(),
                bytes,
                CUDA_MEMCPY_DEVICE_TO_HOST,
            )
        })
    }

    pub fn create_stream(&self) -> Result<RawStream, String> {
        let mut stream = std::ptr::null_mut();
        self.check("cudaStreamCreate", unsafe {
            (self.stream_create)(&mut stream)
        })?;
        Ok(stream)
    }

    pub fn synchronize(&self, stream: RawStream) -> Result<(), String> {
        self.check("cudaStreamSynchronize", unsafe {
            (self.stream_synchronize)(stream)
        })
    }

    pub fn destroy_stream(&self, stream: RawStream) -> Result<(), String> {
        self.check("cudaStreamDestroy", unsafe {
            (self.stream_destroy)(stream)
        })
    }
}

/// Why this machine cannot run GPU work, or None when it can (device 0 is then current).
pub fn gpu_unavailable(cuda: &Result<CudaRuntime, String>) -> Option<String> {
    let cuda = match cuda {
        Ok(cuda) => cuda,
        Err(why) => return Some(why.clone()),
    };
    match cuda.device_count() {
        Ok(0) => Some("cudaGetDeviceCount found no device".into()),
        Ok(_) => cuda.set_device(0).err(),
        Err(why) => Some(why),
    }
}
