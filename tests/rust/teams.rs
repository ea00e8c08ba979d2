//! The team methods of `Communicator` (generated from policy with returns = "value":
//! NCCL returns an `ncclTeam_t` or an int, no `ncclResult_t`) over the stand-in libnccl
//! (tests/python/fake_nccl.c, 2.28.9), which has none of them: each call is
//! `Error::SymbolNotFound` naming the function and its first release (read from the IR), never
//! a zeroed team; a rank outside the team is rejected before NCCL is reached.

mod ir;
#[allow(dead_code)] // the call log is for the tests of grouped calls
mod stand_in;

use ncclbind::sys::nccl::ncclCftTeamMode_t;
use ncclbind::{library_info, Communicator, Error, Library, Result, Team, UniqueId, Version};

fn since(name: &str) -> Version {
    let api = ir::api();
    let since = ir::str_at(ir::named(&api, "functions", name), "since");
    Version::from_nccl_code(ir::version_code(&api, since))
}

fn team(n_ranks: i32) -> Team {
    Team {
        nRanks: n_ranks,
        rank: 0,
        stride: 1,
    }
}

#[test]
fn every_team_call_the_stand_in_lacks_names_its_first_release() {
    let (_stand_in, _serial) = stand_in::stand_in();
    let loaded = library_info(Library::Nccl).unwrap().version;
    let comm = Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap();
    let calls: [(&str, &dyn Fn() -> Result<()>); 7] = [
        ("ncclTeamWorld", &|| comm.team_world().map(drop)),
        ("ncclTeamLsa", &|| comm.team_lsa().map(drop)),
        ("ncclTeamRail", &|| comm.team_rail().map(drop)),
        ("ncclTeamCft", &|| {
            comm.team_cft(ncclCftTeamMode_t::NCCL_CFT_TEAM_FLAT)
                .map(drop)
        }),
        ("ncclTeamCftMultimem", &|| {
            comm.team_cft_multimem().map(drop)
        }),
        ("ncclTeamRankToWorld", &|| {
            comm.team_rank_to_world(team(1), 0).map(drop)
        }),
        ("ncclTeamRankToLsa", &|| {
            comm.team_rank_to_lsa(team(1), 0).map(drop)
        }),
    ];
    for (name, call) in calls {
        let err = call().unwrap_err();
        let Error::SymbolNotFound { function, message } = &err else {
            panic!("{name}: {err:?}")
        };
        assert_eq!(*function, name);
        assert!(message.contains(&since(name).to_string()), "{message}");
        assert!(message.contains(&loaded.to_string()), "{message}");
    }
    comm.destroy().unwrap();
}

#[test]
fn a_rank_outside_the_team_is_rejected_before_nccl() {
    let (_stand_in, _serial) = stand_in::stand_in();
    let comm = Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap();
    for rank in [-1, 2, i32::MAX] {
        for err in [
            comm.team_rank_to_world(team(2), rank).unwrap_err(),
            comm.team_rank_to_lsa(team(2), rank).unwrap_err(),
        ] {
            assert!(
                matches!(err, Error::TeamRankOutOfRange { argument: "team_rank", rank: r, nranks: 2 } if r == rank),
                "{err:?}"
            );
            assert!(err.is_argument_error());
            assert!(err.to_string().contains("team"), "{err}");
        }
    }
    let err = comm.team_cft(ncclCftTeamMode_t(99)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownEnumValue {
                argument: "mode",
                ..
            }
        ),
        "{err:?}"
    );
    comm.destroy().unwrap();
}
