//! Buffers registered with the communicator and symmetric windows, on memory from
//! ncclMemAlloc (which windows need; the safe crate has no allocator, so it comes from sys).

use std::ffi::c_void;

use ncclbind::sys::nccl::{ncclMemAlloc, ncclMemFree};
use ncclbind::{check, Communicator, DeviceSlice, DeviceSliceMut, RedOp, Stream, WindowFlags};

use crate::checks::Checks;
use crate::element::{sum_of, value};
use crate::gpu::{Fallible, Gpu};

/// `len` f32 of ncclMemAlloc memory, freed (ncclMemFree) on drop.
struct NcclMemory {
    ptr: *mut f32,
    len: usize,
}

impl NcclMemory {
    fn alloc(len: usize) -> Fallible<NcclMemory> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer.
        check("ncclMemAlloc", unsafe {
            ncclMemAlloc(&mut ptr, len * size_of::<f32>())
        })?;
        Ok(NcclMemory {
            ptr: ptr.cast(),
            len,
        })
    }

    /// A view for NCCL to read. Windows keep the crate's only writable view, so the
    /// collectives on windowed memory use views made here.
    fn slice(&self) -> DeviceSlice<'_, f32> {
        // SAFETY: the allocation holds `len` f32 and lives as long as the borrow.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }.expect("an allocated size")
    }

    fn slice_mut(&self) -> DeviceSliceMut<'_, f32> {
        // SAFETY: as above; each check enqueues one writer at a time and waits for it.
        unsafe { DeviceSliceMut::from_raw_parts(self.ptr, self.len) }.expect("an allocated size")
    }
}

impl Drop for NcclMemory {
    fn drop(&mut self) {
        // SAFETY: the memory came from ncclMemAlloc and nothing uses it after this.
        unsafe { ncclMemFree(self.ptr.cast()) };
    }
}

/// An all_reduce on registered buffers, then on symmetric windows (COLL_SYMMETRIC).
pub fn check_registration(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let count = 1 << 20;
    let input = NcclMemory::alloc(count)?;
    let output = NcclMemory::alloc(count)?;
    let host: Vec<f32> = (0..count).map(|i| value(me, i) as f32).collect();
    gpu.cuda.copy_to_device(input.ptr, &host)?;
    let reduce_and_check = |checks: &mut Checks, what: &str| -> Fallible<()> {
        gpu.cuda
            .copy_to_device(output.ptr, &vec![f32::NAN; count])?;
        comm.all_reduce(&input.slice(), &mut output.slice_mut(), RedOp::SUM, stream)?;
        gpu.cuda.synchronize(stream.as_raw().cast())?;
        let mut got = vec![0.0f32; count];
        gpu.cuda.copy_to_host(&mut got, output.ptr)?;
        checks.elements(what, &got, |i| sum_of(0..n, i) as f32);
        Ok(())
    };

    {
        let _input = comm.register(input.slice())?;
        let _output = comm.register(output.slice())?;
        reduce_and_check(checks, "all_reduce on registered buffers")?;
    } // deregistered here
    {
        // Windows are newer than some releases: skipped there. A window deregisters on drop,
        // so only one that was registered is undone.
        let what = "ncclCommWindowRegister";
        let flags = WindowFlags::COLL_SYMMETRIC;
        let Some(_input) = checks.present(what, comm.register_window(input.slice_mut(), flags))?
        else {
            return Ok(());
        };
        let Some(_output) =
            checks.present(what, comm.register_window(output.slice_mut(), flags))?
        else {
            return Ok(());
        };
        reduce_and_check(checks, "all_reduce on symmetric windows")?;
    }
    Ok(())
}
