//! Enums are newtypes: values NCCL creates at run time (PreMulSum ops are ncclNumOps and up)
//! or that a newer library returns stay representable, print as numbers, and pass through.

use ncclbind::sys::nccl::{ncclDataType_t, ncclRedOp_t, ncclResult_t};
use ncclbind::{DataType, RedOp, BF16, F16};

#[test]
fn unknown_values_are_representable_and_print_as_numbers() {
    let created_at_run_time = ncclRedOp_t(ncclRedOp_t::ncclNumOps.0 + 3);
    assert_eq!(format!("{created_at_run_time:?}"), "ncclRedOp_t(8)");
    assert_eq!(
        RedOp::from_raw(created_at_run_time).as_raw(),
        created_at_run_time
    );

    let from_a_newer_library = ncclResult_t(42);
    assert_eq!(format!("{from_a_newer_library:?}"), "ncclResult_t(42)");
}

#[test]
fn known_values_print_by_name_and_aliases_are_the_same_value() {
    assert_eq!(format!("{:?}", ncclRedOp_t::ncclAvg), "ncclAvg");
    assert_eq!(
        format!("{:?}", ncclResult_t::ncclInvalidUsage),
        "ncclInvalidUsage"
    );
    assert_eq!(ncclDataType_t::ncclChar, ncclDataType_t::ncclInt8);
    assert_eq!(ncclDataType_t::ncclFloat, ncclDataType_t::ncclFloat32);
    assert_eq!(format!("{:?}", ncclDataType_t::ncclHalf), "ncclFloat16");
}

#[test]
fn builtin_reduction_ops_are_nccls() {
    assert_eq!(RedOp::SUM.as_raw(), ncclRedOp_t::ncclSum);
    assert_eq!(RedOp::PROD.as_raw(), ncclRedOp_t::ncclProd);
    assert_eq!(RedOp::MAX.as_raw(), ncclRedOp_t::ncclMax);
    assert_eq!(RedOp::MIN.as_raw(), ncclRedOp_t::ncclMin);
    assert_eq!(RedOp::AVG.as_raw(), ncclRedOp_t::ncclAvg);
}

fn data_type_of<T: DataType>() -> (ncclDataType_t, usize) {
    (T::DATA_TYPE, size_of::<T>())
}

#[test]
fn rust_element_types_map_to_nccl_data_types_of_their_size() {
    use ncclDataType_t as D;
    assert_eq!(data_type_of::<i8>(), (D::ncclInt8, 1));
    assert_eq!(data_type_of::<u8>(), (D::ncclUint8, 1));
    assert_eq!(data_type_of::<i32>(), (D::ncclInt32, 4));
    assert_eq!(data_type_of::<u32>(), (D::ncclUint32, 4));
    assert_eq!(data_type_of::<i64>(), (D::ncclInt64, 8));
    assert_eq!(data_type_of::<u64>(), (D::ncclUint64, 8));
    assert_eq!(data_type_of::<F16>(), (D::ncclFloat16, 2));
    assert_eq!(data_type_of::<BF16>(), (D::ncclBfloat16, 2));
    assert_eq!(data_type_of::<f32>(), (D::ncclFloat32, 4));
    assert_eq!(data_type_of::<f64>(), (D::ncclFloat64, 8));
}
