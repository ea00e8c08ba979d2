//! The launcher: counts the GPUs (or says SKIPPED), starts one rank per GPU as a new
//! process of this program (exec, not fork: CUDA does not survive a fork once initialised),
//! and waits for them. A rank that fails leaves its peers waiting in a collective, so after
//! a failure the others get GRACE to finish, and the whole run gets NCCLBIND_TEST_TIMEOUT;
//! then the launcher kills the ranks still running.

use std::env;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cuda_runtime::CudaRuntime;
use crate::{Options, ID_FILE_VAR, NRANKS_VAR, RANK_VAR};

const GRACE: Duration = Duration::from_secs(30);
const DEFAULT_TIMEOUT_S: u64 = 600;
/// No multicast objects on the GPU machine: NVLS off, for NCCL and for what it may load.
const NO_MULTICAST: [(&str, &str); 3] = [
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
];

pub fn run(options: &Options, args: &[String]) -> ExitCode {
    let devices = match count_gpus() {
        Ok(devices) => devices,
        Err(why) => {
            println!("SKIPPED: no GPU ({why})");
            return ExitCode::SUCCESS;
        }
    };
    let nranks = options.nranks.unwrap_or(devices);
    if nranks > devices {
        println!("SKIPPED: {nranks} ranks asked, {devices} GPUs present");
        return ExitCode::SUCCESS;
    }
    let timeout = match env::var("NCCLBIND_TEST_TIMEOUT").map(|s| s.parse::<u64>()) {
        Err(_) => Duration::from_secs(DEFAULT_TIMEOUT_S),
        Ok(Ok(seconds)) => Duration::from_secs(seconds),
        Ok(Err(_)) => {
            eprintln!("NCCLBIND_TEST_TIMEOUT is not a number of seconds");
            return ExitCode::from(2);
        }
    };
    match launch(nranks, args, timeout) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(why) => {
            eprintln!("launcher: {why}");
            ExitCode::from(2)
        }
    }
}

fn count_gpus() -> Result<usize, String> {
    let cuda = CudaRuntime::load()?;
    match cuda.device_count()? {
        0 => Err("cudaGetDeviceCount found no device".into()),
        n => Ok(n as usize),
    }
}

/// Runs `nranks` ranks; the number that failed.
fn launch(nranks: usize, args: &[String], timeout: Duration) -> Result<usize, String> {
    let exe = env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id_file = env::temp_dir().join(format!(
        "ncclbind-multigpu-{}-{stamp}.id",
        std::process::id()
    ));
    let mut children: Vec<Child> = Vec::new();
    for rank in 0..nranks {
        let mut command = Command::new(&exe);
        command
            .args(args)
            .env(RANK_VAR, rank.to_string())
            .env(NRANKS_VAR, nranks.to_string())
            .env(ID_FILE_VAR, &id_file);
        for (name, value) in NO_MULTICAST {
            if env::var_os(name).is_none() {
                command.env(name, value);
            }
        }
        match command.spawn() {
            Ok(child) => children.push(child),
            Err(e) => {
                kill_all(&mut children, "the launcher could not start every rank");
                return Err(format!("cannot start rank {rank}: {e}"));
            }
        }
    }
    let statuses = wait_all(&mut children, timeout);
    let _ = fs::remove_file(&id_file);

    let mut failed = 0;
    for (rank, status) in statuses.iter().enumerate() {
        if !status.success() {
            failed += 1;
            println!("rank {rank}: {}", describe(status));
        }
    }
    println!(
        "{nranks} ranks: {} passed, {failed} failed",
        nranks - failed
    );
    Ok(failed)
}

/// Every child's exit status; children still running at the deadline, or GRACE after the
/// first failure, are killed.
fn wait_all(children: &mut [Child], timeout: Duration) -> Vec<ExitStatus> {
    let start = Instant::now();
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut first_failure: Option<Instant> = None;
    loop {
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                if let Ok(Some(exit)) = child.try_wait() {
                    *status = Some(exit);
                    if !exit.success() && first_failure.is_none() {
                        first_failure = Some(Instant::now());
                    }
                }
            }
        }
        if statuses.iter().all(Option::is_some) {
            break;
        }
        let reason = if start.elapsed() > timeout {
            Some(format!("the run took longer than {timeout:?}"))
        } else if first_failure.is_some_and(|t| t.elapsed() > GRACE) {
            Some(format!("still running {GRACE:?} after another rank failed"))
        } else {
            None
        };
        if let Some(reason) = reason {
            for (rank, (child, status)) in children.iter_mut().zip(statuses.iter_mut()).enumerate()
            {
                if status.is_none() {
                    eprintln!("rank {rank}: killed: {reason}");
                    let _ = child.kill();
                    *status = child.wait().ok();
                }
            }
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    statuses
        .into_iter()
        // A killed child whose status could not be read counts as exit status 127.
        .map(|status| status.unwrap_or_else(|| ExitStatus::from_raw(127 << 8)))
        .collect()
}

fn kill_all(children: &mut [Child], reason: &str) {
    for child in children {
        eprintln!("killing pid {}: {reason}", child.id());
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn describe(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("ended by signal {signal}"),
        _ => format!("ended: {status:?}"),
    }
}
