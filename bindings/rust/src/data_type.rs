//! Rust element types and the ncclDataType_t each one is: the crate's one such mapping.

use crate::sys::nccl::ncclDataType_t;

/// An element type NCCL can reduce and move.
///
/// # Safety
/// `DATA_TYPE` must describe `Self` exactly (size and representation): NCCL reads and
/// writes `count * size` bytes on the strength of it.
pub unsafe trait DataType: Copy + Send + Sync + 'static {
    const DATA_TYPE: ncclDataType_t;
}

/// IEEE 754 half precision, as its raw bits (`ncclFloat16`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

/// bfloat16, as its raw bits (`ncclBfloat16`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BF16(pub u16);

macro_rules! data_types {
    ($($rust:ty => $nccl:ident),* $(,)?) => {
        $(
            // SAFETY: the NCCL type has exactly this Rust type's size and representation.
            unsafe impl DataType for $rust {
                const DATA_TYPE: ncclDataType_t = ncclDataType_t::$nccl;
            }
        )*
    };
}

data_types!(
    i8 => ncclInt8,
    u8 => ncclUint8,
    i32 => ncclInt32,
    u32 => ncclUint32,
    i64 => ncclInt64,
    u64 => ncclUint64,
    F16 => ncclFloat16,
    f32 => ncclFloat32,
    f64 => ncclFloat64,
    BF16 => ncclBfloat16,
);
