//! The host side of device communicators: the device API's process-wide host functions
//! (generated from policy/nccl.toml, owner `dev_comm`).

use crate::error::Result;
use crate::sys::nccl::*;

include!("generated/dev_comm_calls.rs");
