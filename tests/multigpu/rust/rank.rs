//! One rank: its GPU, the unique id through the file, the world communicator, then every
//! check in the order of tests/multigpu/c/ranks.cc (or the benchmark).

use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use ncclbind::{
    library_info, Communicator, Complex32, Complex64, Library, Stream, UniqueId, BF16, F16,
    UNIQUE_ID_BYTES,
};

use crate::bench;
use crate::checks::Checks;
use crate::coll_config::check_coll_config;
use crate::collectives::{check_collectives, check_group_mix};
use crate::communicators::{check_abort, check_abort_handle, check_shrink, check_split};
use crate::device_communicator::check_device_communicator;
use crate::gpu::{Fallible, Gpu};
use crate::registration::check_registration;
use crate::variable_count::{check_complex, check_variable_count};
use crate::Options;

/// How long ranks other than 0 wait for the unique id file.
const ID_WAIT: Duration = Duration::from_secs(60);

pub fn run(rank: usize, nranks: usize, id_file: &Path, options: &Options) -> ExitCode {
    let mut checks = Checks::new(rank);
    match run_checks(rank, nranks, id_file, options, &mut checks) {
        Ok(()) => {
            println!(
                "rank {rank}/{nranks}: {} checks, {} failed, {} not in this release",
                checks.passed + checks.failed,
                checks.failed,
                checks.absent.len()
            );
            if checks.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(why) => {
            eprintln!(
                "rank {rank}: FATAL after {} checks ({} failed): {why}",
                checks.passed + checks.failed,
                checks.failed
            );
            ExitCode::from(2)
        }
    }
}

fn run_checks(
    rank: usize,
    nranks: usize,
    id_file: &Path,
    options: &Options,
    checks: &mut Checks,
) -> Fallible<()> {
    let gpu = Gpu::open(rank as i32)?;
    let id = exchange_id(rank, id_file)?;
    let comm = Communicator::init_rank(nranks as i32, &id, rank as i32)?;
    let info = library_info(Library::Nccl)?;
    let lead = rank == 0;
    if lead {
        println!(
            "{nranks} ranks; libnccl {} from {}; CUDA runtime {}",
            info.version,
            info.path.display(),
            gpu.cuda.path
        );
    }
    let raw_stream = gpu.cuda.create_stream()?;
    // SAFETY: a stream of this rank's device, destroyed after the communicator.
    let stream = unsafe { Stream::from_raw(raw_stream.cast()) }?;

    if options.bench {
        bench::run(&gpu, stream, &comm)?;
    } else {
        let start = Instant::now();
        let phase = |what: &str| {
            if lead {
                println!("[{:7.1} s] {what}", start.elapsed().as_secs_f64());
            }
        };
        for count in [1, 4099, 1 << 18] {
            every_element_type(&gpu, stream, &comm, checks, count)?;
            phase(&format!("every collective, every type, {count} elements"));
        }
        let mut bytes = 1 << 20;
        while bytes <= options.max_bytes {
            check_collectives::<f32>(&gpu, stream, &comm, checks, bytes / 4)?;
            check_collectives::<i8>(&gpu, stream, &comm, checks, bytes)?;
            phase(&format!(
                "every collective, f32 and i8, {} MiB",
                bytes >> 20
            ));
            bytes <<= 4;
        }
        check_group_mix(&gpu, stream, &comm, checks)?;
        phase("group of all_reduce and send/recv");
        check_coll_config(&gpu, stream, &comm, checks, 4099)?;
        phase("per-call config collectives");
        for scale in [1, 4099] {
            check_variable_count::<f32>(&gpu, stream, &comm, checks, scale)?;
            check_variable_count::<i32>(&gpu, stream, &comm, checks, scale)?;
            check_variable_count::<Complex32>(&gpu, stream, &comm, checks, scale)?;
            check_variable_count::<Complex64>(&gpu, stream, &comm, checks, scale)?;
        }
        check_complex(&gpu, stream, &comm, checks, 4099)?;
        phase("variable-count collectives; complex avg and refused ops");
        check_registration(&gpu, stream, &comm, checks)?;
        phase("registered buffers and symmetric windows");
        check_device_communicator(&comm, info.version_code, checks)?;
        phase("device communicator");
        check_split(&gpu, stream, &comm, checks)?;
        phase("split");
        check_shrink(&gpu, stream, &comm, checks)?;
        phase("shrink");
        check_abort(&gpu, &comm, checks)?;
        phase("abort");
        check_abort_handle(&gpu, &comm, checks)?;
        phase("abort handle");
    }
    comm.finalize()?;
    gpu.cuda.destroy_stream(raw_stream)?;
    Ok(())
}

fn every_element_type(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
    count: usize,
) -> Fallible<()> {
    check_collectives::<i8>(gpu, stream, comm, checks, count)?;
    check_collectives::<u8>(gpu, stream, comm, checks, count)?;
    check_collectives::<i32>(gpu, stream, comm, checks, count)?;
    check_collectives::<u32>(gpu, stream, comm, checks, count)?;
    check_collectives::<i64>(gpu, stream, comm, checks, count)?;
    check_collectives::<u64>(gpu, stream, comm, checks, count)?;
    check_collectives::<F16>(gpu, stream, comm, checks, count)?;
    check_collectives::<f32>(gpu, stream, comm, checks, count)?;
    check_collectives::<f64>(gpu, stream, comm, checks, count)?;
    check_collectives::<BF16>(gpu, stream, comm, checks, count)?;
    check_collectives::<Complex32>(gpu, stream, comm, checks, count)?;
    check_collectives::<Complex64>(gpu, stream, comm, checks, count)
}

/// Rank 0 creates the id and writes it (to a temporary name, then renamed, so a reader sees
/// all of it or nothing); the others wait for the file.
fn exchange_id(rank: usize, path: &Path) -> Fallible<UniqueId> {
    if rank == 0 {
        let id = UniqueId::new()?;
        let partial = path.with_extension("partial");
        fs::write(&partial, id.as_bytes())?;
        fs::rename(&partial, path)?;
        return Ok(id);
    }
    let start = Instant::now();
    loop {
        if let Ok(bytes) = fs::read(path) {
            if bytes.len() == UNIQUE_ID_BYTES {
                return Ok(UniqueId::try_from(&bytes[..])?);
            }
        }
        if start.elapsed() > ID_WAIT {
            return Err(format!("no unique id in {} after {ID_WAIT:?}", path.display()).into());
        }
        thread::sleep(Duration::from_millis(10));
    }
}
