//! Reduction operators: NCCL's built-in ones, and PreMulSum ops a communicator creates at
//! run time (a sum that first multiplies each input by a scalar).

use core::ffi::c_void;
use std::marker::PhantomData;

use crate::communicator::Communicator;
use crate::data_type::DataType;
use crate::device_slice::DeviceSlice;
use crate::error::{check, Error, Result};
use crate::sys::nccl::{
    ncclDataType_t, ncclRedOpCreatePreMulSum, ncclRedOpDestroy, ncclRedOp_t, ncclScalarResidence_t,
};

/// A reduction operator. A created op borrows the [`PreMulSum`] that owns it, so it cannot
/// outlive it, and remembers its communicator and data type, which the collectives check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedOp<'op> {
    raw: ncclRedOp_t,
    /// The creating communicator's address and the op's data type, for a created op.
    created_by: Option<(usize, ncclDataType_t)>,
    _owner: PhantomData<&'op ()>,
}

impl RedOp<'static> {
    /// `ncclSum`.
    pub const SUM: RedOp<'static> = RedOp::builtin(ncclRedOp_t::ncclSum);
    /// `ncclProd`.
    pub const PROD: RedOp<'static> = RedOp::builtin(ncclRedOp_t::ncclProd);
    /// `ncclMax`.
    pub const MAX: RedOp<'static> = RedOp::builtin(ncclRedOp_t::ncclMax);
    /// `ncclMin`.
    pub const MIN: RedOp<'static> = RedOp::builtin(ncclRedOp_t::ncclMin);
    /// `ncclAvg`: the sum divided by the number of ranks.
    pub const AVG: RedOp<'static> = RedOp::builtin(ncclRedOp_t::ncclAvg);

    const fn builtin(raw: ncclRedOp_t) -> RedOp<'static> {
        RedOp {
            raw,
            created_by: None,
            _owner: PhantomData,
        }
    }

    /// Any `ncclRedOp_t`, unchecked: NCCL rejects values it does not know.
    pub const fn from_raw(raw: ncclRedOp_t) -> RedOp<'static> {
        RedOp::builtin(raw)
    }
}

impl RedOp<'_> {
    /// The `ncclRedOp_t` NCCL is passed.
    pub fn as_raw(self) -> ncclRedOp_t {
        self.raw
    }

    /// Err unless this op may be used on `comm` with values of type T: a created op on its
    /// communicator and type only, and on complex numbers sum and avg only.
    pub(crate) fn check_usable<T: DataType>(self, comm: &Communicator) -> Result<()> {
        let data = T::DATA_TYPE;
        match self.created_by {
            Some((owner, _)) if owner != comm.address() => Err(Error::RedOpFromOtherCommunicator),
            Some((_, op)) if op != data => Err(Error::RedOpTypeMismatch { op, data }),
            _ if T::COMPLEX && !matches!(self.raw, ncclRedOp_t::ncclSum | ncclRedOp_t::ncclAvg) => {
                Err(Error::UnsupportedComplexOp {
                    argument: "op",
                    op: self.name(),
                    data: short_type_name::<T>(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The op as the errors name it: "sum", "max", ..., "premulsum" for a created op.
    fn name(self) -> String {
        let name = match self.raw {
            _ if self.created_by.is_some() => "premulsum",
            ncclRedOp_t::ncclSum => "sum",
            ncclRedOp_t::ncclProd => "prod",
            ncclRedOp_t::ncclMax => "max",
            ncclRedOp_t::ncclMin => "min",
            ncclRedOp_t::ncclAvg => "avg",
            raw => return format!("{raw:?}"),
        };
        name.to_owned()
    }
}

/// `Complex32` for `ncclbind::data_type::Complex32`: the name a user wrote.
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// A PreMulSum op, destroyed (`ncclRedOpDestroy`) on drop; it borrows its communicator.
pub struct PreMulSum<'comm> {
    op: RedOp<'comm>,
    comm: &'comm Communicator,
}

impl<'comm> PreMulSum<'comm> {
    /// The op, for collectives on the creating communicator with elements of type T.
    pub fn op(&self) -> RedOp<'_> {
        self.op
    }

    fn create<T: DataType>(
        comm: &'comm Communicator,
        scalar: *mut c_void,
        residence: ncclScalarResidence_t,
    ) -> Result<PreMulSum<'comm>> {
        if T::COMPLEX {
            // NCCL would read the scalar as its real part alone.
            return Err(Error::UnsupportedComplexOp {
                argument: "scalar",
                op: "premulsum".to_owned(),
                data: short_type_name::<T>(),
            });
        }
        let mut raw = ncclRedOp_t(0);
        // SAFETY: `raw` is a valid out-pointer; the caller vouches for `scalar`.
        check("ncclRedOpCreatePreMulSum", unsafe {
            ncclRedOpCreatePreMulSum(
                &mut raw,
                scalar,
                T::DATA_TYPE,
                residence,
                comm.enter()?.raw(),
            )
        })?;
        let op = RedOp {
            raw,
            created_by: Some((comm.address(), T::DATA_TYPE)),
            _owner: PhantomData,
        };
        Ok(PreMulSum { op, comm })
    }
}

impl Drop for PreMulSum<'_> {
    fn drop(&mut self) {
        // An abort handle's ncclCommAbort freed the op with the communicator.
        if let Ok(comm) = self.comm.enter() {
            // SAFETY: the op was created on this communicator, which is still live.
            unsafe { ncclRedOpDestroy(self.op.raw, comm.raw()) };
        }
    }
}

impl Communicator {
    /// A sum that multiplies every input by `scalar` first; NCCL copies the scalar now.
    pub fn pre_mul_sum<T: DataType>(&self, scalar: T) -> Result<PreMulSum<'_>> {
        let mut scalar = scalar;
        PreMulSum::create::<T>(
            self,
            (&mut scalar as *mut T).cast(),
            ncclScalarResidence_t::ncclScalarHostImmediate,
        )
    }

    /// A sum that multiplies every input by the device scalar `scalar[0]`, read when each
    /// collective runs.
    pub fn pre_mul_sum_device<'a, T: DataType>(
        &'a self,
        scalar: DeviceSlice<'a, T>,
    ) -> Result<PreMulSum<'a>> {
        if scalar.is_empty() {
            return Err(Error::BufferTooSmall {
                argument: "scalar",
                len: 0,
                needed: 1,
            });
        }
        PreMulSum::create::<T>(
            self,
            scalar.as_ptr() as *mut c_void,
            ncclScalarResidence_t::ncclScalarDevice,
        )
    }
}
