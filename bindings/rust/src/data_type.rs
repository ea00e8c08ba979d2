//! Rust element types and the ncclDataType_t each one is: the crate's one such mapping.

use crate::sys::nccl::ncclDataType_t;

/// An element type NCCL can reduce and move.
///
/// # Safety
/// `Self` must be exactly `ELEMENTS_PER_VALUE` elements of `DATA_TYPE` (size and
/// representation): NCCL reads and writes `count * ELEMENTS_PER_VALUE` elements on the
/// strength of it.
pub unsafe trait DataType: Copy + Send + Sync + 'static {
    /// The NCCL element type of one element (of a complex number: of its real part).
    const DATA_TYPE: ncclDataType_t;
    /// The `DATA_TYPE` elements in one value: 1, or 2 for a complex number (real, imaginary).
    /// The collectives pass NCCL `len * ELEMENTS_PER_VALUE`, which cannot overflow: a view
    /// holds at most `isize::MAX` bytes, and an element is at least one.
    const ELEMENTS_PER_VALUE: usize = 1;
    /// A complex number, which NCCL reduces as a pair of reals: exact for sum and avg only,
    /// so [`RedOp`](crate::RedOp) refuses the other ops on it.
    const COMPLEX: bool = false;
}

/// IEEE 754 half precision, as its raw bits (`ncclFloat16`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct F16(pub u16);

/// bfloat16, as its raw bits (`ncclBfloat16`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BF16(pub u16);

/// A complex number of two `f32` (C's `float _Complex`, CUDA's `cuFloatComplex`, NumPy's
/// `complex64`); NCCL carries it as two `ncclFloat32` and can sum or average it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex32 {
    /// The real part.
    pub re: f32,
    /// The imaginary part.
    pub im: f32,
}

/// A complex number of two `f64` (C's `double _Complex`, `cuDoubleComplex`, NumPy's
/// `complex128`); NCCL carries it as two `ncclFloat64` and can sum or average it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex64 {
    /// The real part.
    pub re: f64,
    /// The imaginary part.
    pub im: f64,
}

impl Complex32 {
    /// `re + im·i`.
    pub const fn new(re: f32, im: f32) -> Complex32 {
        Complex32 { re, im }
    }
}

impl Complex64 {
    /// `re + im·i`.
    pub const fn new(re: f64, im: f64) -> Complex64 {
        Complex64 { re, im }
    }
}

// SAFETY: repr(C) with two fields of one type: two adjacent ncclFloat32, real part first.
unsafe impl DataType for Complex32 {
    const DATA_TYPE: ncclDataType_t = ncclDataType_t::ncclFloat32;
    const ELEMENTS_PER_VALUE: usize = 2;
    const COMPLEX: bool = true;
}

// SAFETY: repr(C) with two fields of one type: two adjacent ncclFloat64, real part first.
unsafe impl DataType for Complex64 {
    const DATA_TYPE: ncclDataType_t = ncclDataType_t::ncclFloat64;
    const ELEMENTS_PER_VALUE: usize = 2;
    const COMPLEX: bool = true;
}

include!("generated/data_types.rs");

impl DataTypeInfo {
    /// The type of a `ncclDataType_t` value (None for one this crate's headers do not have).
    pub fn of(data_type: ncclDataType_t) -> Option<&'static DataTypeInfo> {
        DATA_TYPES.get(data_type.0 as usize)
    }

    /// The type nccl-tests names `name` (`-d float`, ...).
    pub fn by_nccl_tests_name(name: &str) -> Option<&'static DataTypeInfo> {
        DATA_TYPES.iter().find(|t| t.nccl_tests == Some(name))
    }
}

macro_rules! data_types {
    ($($rust:ty => $nccl:ident),* $(,)?) => {
        $(
            // SAFETY: the NCCL type has exactly this Rust type's size (checked against
            // vocabulary.toml's bytes below, at compile time) and representation.
            unsafe impl DataType for $rust {
                const DATA_TYPE: ncclDataType_t = ncclDataType_t::$nccl;
            }
            const _: () = assert!(
                core::mem::size_of::<$rust>() == DATA_TYPES[ncclDataType_t::$nccl.0 as usize].bytes,
                concat!(stringify!($rust), " is not ", stringify!($nccl), "'s size")
            );
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
