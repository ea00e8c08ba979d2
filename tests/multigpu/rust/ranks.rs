//! Multi-GPU run of the ncclbind Rust crate, the counterpart of tests/multigpu/c/ranks.cc:
//! one process per GPU (this program starts them: itself again, with its rank in the
//! environment), the unique id shared through a file. Every collective and a send/recv ring
//! for every element type the safe crate maps (complex numbers too), at 1, 4099 and 2^18
//! elements, and for f32 and i8 at 1, 16 and 256 MiB, checked element by element; a group
//! mixing all_reduce with send/recv; the variable-count collectives (uneven, empty and
//! displaced blocks) for f32, i32 and complex numbers; complex avg; registered buffers and
//! symmetric windows; a device communicator; split; shrink; abort while a peer's receive
//! waits (with a watchdog). With --bench: bus bandwidth by size, and the latency of a
//! 2-float all_reduce through the safe crate, the sys layer and raw ncclAllReduce in the same
//! run.
//!
//!   multigpu_ranks [NRANKS] [--bench]      NRANKS: default every GPU (1 works too)
//!
//! Environment: NCCLBIND_NCCL_PATH (libnccl), NCCLBIND_CUDART_PATH (libcudart),
//! NCCLBIND_TEST_MAX_BYTES (largest f32/i8 check, default 256 MiB), NCCLBIND_TEST_TIMEOUT
//! (seconds for the whole run, default 600). Without a GPU it prints "SKIPPED: ..." and
//! exits 0. Build here with build.sh, run on the GPU machine with run.sh.

#[allow(dead_code)] // the module serves several programs; this one uses most of it
#[path = "../../rust/cuda_runtime.rs"]
mod cuda_runtime;
#[allow(dead_code)]
#[path = "../../../bench/rust/direct_nccl.rs"]
mod direct_nccl;

mod bench;
mod checks;
mod coll_config;
mod collectives;
mod communicators;
mod device_communicator;
mod element;
mod gpu;
mod launcher;
mod rank;
mod registration;
mod variable_count;

use std::env;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: multigpu_ranks [NRANKS] [--bench]";

/// What the launcher passes each rank, besides the command line.
const RANK_VAR: &str = "NCCLBIND_MULTIGPU_RANK";
const NRANKS_VAR: &str = "NCCLBIND_MULTIGPU_NRANKS";
const ID_FILE_VAR: &str = "NCCLBIND_MULTIGPU_ID_FILE";

pub struct Options {
    /// None: one rank per GPU.
    pub nranks: Option<usize>,
    pub bench: bool,
    pub max_bytes: usize,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            nranks: None,
            bench: false,
            max_bytes: 256 << 20,
        };
        for arg in args {
            match arg.as_str() {
                "--bench" => options.bench = true,
                number => match number.parse::<usize>() {
                    Ok(0) => {}
                    Ok(n) => options.nranks = Some(n),
                    Err(_) => return Err(format!("unknown argument {arg:?}")),
                },
            }
        }
        if let Ok(bytes) = env::var("NCCLBIND_TEST_MAX_BYTES") {
            options.max_bytes = bytes
                .parse()
                .map_err(|_| format!("NCCLBIND_TEST_MAX_BYTES={bytes:?} is not a number"))?;
        }
        Ok(options)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let options = match Options::parse(&args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("{why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match rank_from_environment() {
        Ok(Some((rank, nranks, id_file))) => rank::run(rank, nranks, &id_file, &options),
        Ok(None) => launcher::run(&options, &args),
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(2)
        }
    }
}

/// The rank, size and id file the launcher set, or None in the launcher itself.
fn rank_from_environment() -> Result<Option<(usize, usize, PathBuf)>, String> {
    let Ok(rank) = env::var(RANK_VAR) else {
        return Ok(None);
    };
    let number = |name: &str, value: String| {
        value
            .parse::<usize>()
            .map_err(|_| format!("{name}={value:?} is not a number"))
    };
    let rank = number(RANK_VAR, rank)?;
    let nranks = number(NRANKS_VAR, env::var(NRANKS_VAR).unwrap_or_default())?;
    let id_file = env::var_os(ID_FILE_VAR).ok_or(format!("{ID_FILE_VAR} is not set"))?;
    if rank >= nranks {
        return Err(format!("rank {rank} of {nranks}"));
    }
    Ok(Some((rank, nranks, PathBuf::from(id_file))))
}
