//! A device communicator with one LSA barrier (sys: the safe crate has no DevComm), in the
//! layout the loaded library takes: NCCL 2.28 has no size/magic/version header in the
//! requirements, 2.32 does. The mirror's fields are read back to check it against the
//! library. No multimem (lsaMultimem stays false). A release without ncclDevCommCreate (older
//! than 2.28.9) skips it, as "not in this release".

use ncclbind::sys::nccl::{
    ncclDevCommCreate, ncclDevCommDestroy, ncclDevCommRequirements_t,
    ncclDevCommRequirements_t__v22809, ncclDevComm_t, ncclDevComm_t__v22809,
    NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER,
};
use ncclbind::{check, Communicator, Error};

use crate::checks::Checks;
use crate::gpu::Fallible;

/// The first version whose requirements carry size, magic and version.
const VERSIONED_REQUIREMENTS: i32 = 23203;

/// What the created device communicator says about itself.
struct DevCommFacts {
    rank: i32,
    nranks: i32,
    lsa_rank: i32,
    lsa_size: i32,
    lsa_barriers: i32,
}

pub fn check_device_communicator(
    comm: &Communicator,
    version_code: i32,
    checks: &mut Checks,
) -> Fallible<()> {
    // A release without ncclDevCommCreate (or ncclTeamLsa) skips what needs it.
    let facts = checks.present("ncclDevCommCreate", create_and_destroy(comm, version_code))?;
    let lsa = checks.present("ncclTeamLsa", comm.team_lsa())?;
    let (rank, nranks) = (comm.rank(), comm.size());
    if let Some(facts) = &facts {
        checks.expect(facts.rank == rank && facts.nranks == nranks, || {
            format!(
                "DevComm says rank {} of {}, the communicator {rank} of {nranks}",
                facts.rank, facts.nranks
            )
        });
        checks.expect(facts.lsa_barriers >= 1, || {
            format!(
                "DevComm holds {} LSA barriers, asked for 1",
                facts.lsa_barriers
            )
        });
    }
    let Some(lsa) = lsa else {
        return Ok(());
    };
    // One host, NVLink between every pair: the LSA team is the whole communicator.
    checks.expect(lsa.nRanks == nranks && lsa.rank == rank, || {
        format!(
            "LSA team: rank {} of {}, expected {rank} of {nranks} (one NVLink node)",
            lsa.rank, lsa.nRanks
        )
    });
    let Some(facts) = facts else {
        return Ok(());
    };
    checks.expect(
        facts.lsa_size == lsa.nRanks && facts.lsa_rank == lsa.rank,
        || {
            format!(
                "DevComm LSA rank {} of {}, ncclTeamLsa {} of {}",
                facts.lsa_rank, facts.lsa_size, lsa.rank, lsa.nRanks
            )
        },
    );
    if rank == 0 {
        println!(
            "DevComm: LSA team of {} ranks, {} LSA barrier(s)",
            lsa.nRanks, facts.lsa_barriers
        );
    }
    Ok(())
}

/// Creates a device communicator in the loaded library's layout, reads it, destroys it.
/// `Error::SymbolNotFound` from ncclDevCommCreate means nothing was created.
fn create_and_destroy(comm: &Communicator, version_code: i32) -> Result<DevCommFacts, Error> {
    let raw = comm.as_raw();
    let facts = if version_code < VERSIONED_REQUIREMENTS {
        let requirements = ncclDevCommRequirements_t__v22809 {
            lsaBarrierCount: 1,
            ..Default::default()
        };
        let mut dev = ncclDevComm_t__v22809::default();
        // SAFETY: the loaded library reads and writes these 2.28 layouts; the pointer casts
        // only satisfy the prototype, which names the newest layout.
        check("ncclDevCommCreate", unsafe {
            ncclDevCommCreate(
                raw,
                (&requirements as *const ncclDevCommRequirements_t__v22809).cast(),
                (&mut dev as *mut ncclDevComm_t__v22809).cast(),
            )
        })?;
        let facts = DevCommFacts {
            rank: dev.rank,
            nranks: dev.nRanks,
            lsa_rank: dev.lsaRank,
            lsa_size: dev.lsaSize,
            lsa_barriers: dev.lsaBarrier.nBarriers,
        };
        // SAFETY: `dev` came from ncclDevCommCreate on this communicator.
        check("ncclDevCommDestroy", unsafe {
            ncclDevCommDestroy(raw, (&dev as *const ncclDevComm_t__v22809).cast())
        })?;
        facts
    } else {
        let mut requirements: ncclDevCommRequirements_t = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER();
        requirements.lsaBarrierCount = 1;
        let mut dev = ncclDevComm_t::default();
        // SAFETY: both records are in the layout the prototype names.
        check("ncclDevCommCreate", unsafe {
            ncclDevCommCreate(raw, &requirements, &mut dev)
        })?;
        let facts = DevCommFacts {
            rank: dev.rank,
            nranks: dev.nRanks,
            lsa_rank: dev.lsaRank,
            lsa_size: dev.lsaSize,
            lsa_barriers: dev.lsaBarrier.nBarriers,
        };
        // SAFETY: `dev` came from ncclDevCommCreate on this communicator.
        check("ncclDevCommDestroy", unsafe {
            ncclDevCommDestroy(raw, &dev)
        })?;
        facts
    };
    Ok(facts)
}
