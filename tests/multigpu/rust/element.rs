//! The element types the checks move: every type the safe crate maps (`ncclbind::DataType`;
//! NCCL's fp8 types have no Rust type there; complex numbers are pairs of f32 or f64), and
//! the small integers they hold, which every one of them represents exactly, sums over the
//! ranks included.

use std::fmt::Debug;

use ncclbind::{Complex32, Complex64, DataType, BF16, F16};

pub trait Element: DataType + PartialEq + Debug {
    const NAME: &'static str;

    /// `v` as this type, exactly (v is at most 127, the largest an i8 holds).
    fn from_small(v: u32) -> Self;
}

macro_rules! primitive_elements {
    ($($rust:ty),* $(,)?) => {
        $(impl Element for $rust {
            const NAME: &'static str = stringify!($rust);

            fn from_small(v: u32) -> Self {
                v as $rust
            }
        })*
    };
}

primitive_elements!(i8, u8, i32, u32, i64, u64, f32, f64);

impl Element for F16 {
    const NAME: &'static str = "f16";

    fn from_small(v: u32) -> Self {
        F16(f16_bits(v))
    }
}

impl Element for BF16 {
    const NAME: &'static str = "bf16";

    fn from_small(v: u32) -> Self {
        // bfloat16 is the top half of a float; exact for integers up to 256.
        BF16(((v as f32).to_bits() >> 16) as u16)
    }
}

// Complex numbers hold (v, -2v): linear in v, so a sum of them is from_small of the sum, and
// a real and an imaginary part swapped or dropped shows.
impl Element for Complex32 {
    const NAME: &'static str = "complex32";

    fn from_small(v: u32) -> Self {
        Complex32::new(v as f32, -2.0 * v as f32)
    }
}

impl Element for Complex64 {
    const NAME: &'static str = "complex64";

    fn from_small(v: u32) -> Self {
        Complex64::new(f64::from(v), -2.0 * f64::from(v))
    }
}

/// IEEE half-precision bits of the integer `v`, below 2048 (where all are exact).
fn f16_bits(v: u32) -> u16 {
    if v == 0 {
        return 0;
    }
    let exponent = 31 - v.leading_zeros(); // floor(log2 v)
    let mantissa = (v << (10 - exponent)) & 0x3ff;
    (((exponent + 15) << 10) | mantissa) as u16
}

/// What rank `rank` puts at index `i`: 1 to 5, so that sums over up to 25 ranks fit an i8.
pub fn value(rank: usize, i: usize) -> u32 {
    ((rank + i) % 5 + 1) as u32
}

/// The sum over `ranks` of what each puts at index `i`.
pub fn sum_of(ranks: impl IntoIterator<Item = usize>, i: usize) -> u32 {
    ranks.into_iter().map(|rank| value(rank, i)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_of_small_integers() {
        assert_eq!(f16_bits(1), 0x3c00);
        assert_eq!(f16_bits(2), 0x4000);
        assert_eq!(f16_bits(3), 0x4200);
        assert_eq!(f16_bits(40), 0x5100);
        assert_eq!(f16_bits(2047), 0x67ff);
        assert_eq!(BF16::from_small(3), BF16(0x4040));
    }
}
