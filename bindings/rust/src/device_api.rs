//! The device API's process-wide host functions (generated from generator/spec/nccl.toml,
//! owner `device_api`).

use crate::error::Result;
use crate::sys::nccl::*;

include!("generated/device_api_calls.rs");
