//! The generated enums against the IR (bindings/ir/api/nccl.json, every header set merged):
//! each value the IR names prints by that name or by an alias of the same value, and
//! RedOp's built-in operators are exactly the IR's non-sentinel ncclRedOp_t values.
//! Enums are newtypes: values NCCL creates at run time (PreMulSum ops are ncclNumOps and up)
//! or that a newer library returns stay representable, print as numbers, and pass through.

use ncclbind::sys::nccl::{ncclDataType_t, ncclRedOp_t, ncclResult_t};
use ncclbind::{DataType, RedOp, BF16, F16};

mod ir;

use ir::{Json, API_IR};

/// (name, value, sentinel) of each value of the IR's enum `name`.
fn ir_enum(name: &str) -> Vec<(String, i64, bool)> {
    let api = Json::parse(API_IR);
    let Some(Json::Array(enums)) = api.get("enums") else {
        panic!("the IR has no enums")
    };
    let found = enums
        .iter()
        .find(|e| matches!(e.get("name"), Some(Json::String(n)) if n == name))
        .unwrap_or_else(|| panic!("the IR has no enum {name}"));
    let Some(Json::Array(values)) = found.get("values") else {
        panic!("{name} has no values")
    };
    values
        .iter()
        .map(
            |v| match (v.get("name"), v.get("value"), v.get("sentinel")) {
                (Some(Json::String(n)), Some(Json::Number(x)), sentinel) => (
                    n.clone(),
                    *x as i64,
                    matches!(sentinel, Some(Json::Bool(true))),
                ),
                other => panic!("{name}: a value without a name and a number: {other:?}"),
            },
        )
        .collect()
}

/// Every non-sentinel value of the IR's enum prints by its name or an alias's (same value).
fn assert_prints_ir_names(enum_name: &str, debug_of: impl Fn(i64) -> String) {
    let values = ir_enum(enum_name);
    assert!(!values.is_empty(), "{enum_name}: no values in the IR");
    for (name, value, sentinel) in &values {
        if *sentinel {
            continue;
        }
        let printed = debug_of(*value);
        let aliases: Vec<&str> = values
            .iter()
            .filter(|v| v.1 == *value)
            .map(|v| v.0.as_str())
            .collect();
        assert!(
            aliases.contains(&printed.as_str()),
            "{enum_name}::{name} = {value} prints as {printed}"
        );
    }
}

#[test]
fn every_ir_value_prints_by_its_ir_name() {
    assert_prints_ir_names("ncclRedOp_t", |v| format!("{:?}", ncclRedOp_t(v as u32)));
    assert_prints_ir_names("ncclDataType_t", |v| {
        format!("{:?}", ncclDataType_t(v as u32))
    });
    assert_prints_ir_names("ncclResult_t", |v| format!("{:?}", ncclResult_t(v as u32)));
}

#[test]
fn redop_has_every_builtin_operator_of_the_ir() {
    let mut builtin: Vec<u32> = ir_enum("ncclRedOp_t")
        .iter()
        .filter(|v| !v.2)
        .map(|v| v.1 as u32)
        .collect();
    builtin.sort();
    let mut ours: Vec<u32> = [RedOp::SUM, RedOp::PROD, RedOp::MAX, RedOp::MIN, RedOp::AVG]
        .iter()
        .map(|op| op.as_raw().0)
        .collect();
    ours.sort();
    assert_eq!(ours, builtin);
}

#[test]
fn unknown_values_are_representable_and_print_as_numbers() {
    let created_at_run_time = ncclRedOp_t(ncclRedOp_t::ncclNumOps.0 + 3);
    assert_eq!(
        format!("{created_at_run_time:?}"),
        format!("ncclRedOp_t({})", created_at_run_time.0)
    );
    assert_eq!(
        RedOp::from_raw(created_at_run_time).as_raw(),
        created_at_run_time
    );

    let from_a_newer_library = ncclResult_t(42);
    assert_eq!(format!("{from_a_newer_library:?}"), "ncclResult_t(42)");
}

fn data_type_of<T: DataType>() -> (String, usize) {
    (format!("{:?}", T::DATA_TYPE), size_of::<T>())
}

#[test]
fn rust_element_types_map_to_nccl_data_types_of_their_size() {
    // The size each NCCL data type's name says (Int8, Float16, ...).
    let bits = |name: &str| -> usize {
        name.trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap()
    };
    for (name, size) in [
        data_type_of::<i8>(),
        data_type_of::<u8>(),
        data_type_of::<i32>(),
        data_type_of::<u32>(),
        data_type_of::<i64>(),
        data_type_of::<u64>(),
        data_type_of::<F16>(),
        data_type_of::<BF16>(),
        data_type_of::<f32>(),
        data_type_of::<f64>(),
    ] {
        assert_eq!(bits(&name) / 8, size, "{name}");
    }
}
