//! Communicator configuration: the `ncclConfig_t` options a user sets, written into the
//! layout (size and version stamp) of the libnccl that is loaded, not the newest one known.

use std::ffi::CString;
use std::marker::PhantomData;

use crate::error::{Error, Result};
use crate::library::{library_info, Library, Version};
use crate::sys::nccl::{
    ncclConfig_t, ncclConfig_t__v22809, NCCL_CONFIG_INITIALIZER__v22809, NCCL_CONFIG_INITIALIZER,
};

/// Options for [`Communicator::init_rank_config`](crate::Communicator::init_rank_config)
/// and [`Communicator::split_config`](crate::Communicator::split_config). Every option is
/// None (NCCL's default) until set; each maps to the `ncclConfig_t` field named in its doc.
///
/// ```
/// let mut config = ncclbind::CommConfig::default();
/// config.comm_name = Some(c"trainer".into());
/// config.max_ctas = Some(16);
/// ```
///
/// Options newer than the loaded libnccl are an [`Error::ConfigFieldUnsupported`], returned
/// before NCCL is called.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommConfig {
    /// `blocking`: false makes NCCL calls on the communicator return `ncclInProgress`
    /// instead of waiting (the constructors still wait until it is ready).
    pub blocking: Option<bool>,
    /// `cgaClusterSize`.
    pub cga_cluster_size: Option<i32>,
    /// `minCTAs`.
    pub min_ctas: Option<i32>,
    /// `maxCTAs`.
    pub max_ctas: Option<i32>,
    /// `netName`: the network module to use ("IB", "Socket", ...).
    pub net_name: Option<CString>,
    /// `splitShare`: a split child shares its parent's resources.
    pub split_share: Option<bool>,
    /// `trafficClass`.
    pub traffic_class: Option<i32>,
    /// `commName`: shown in NCCL's logs.
    pub comm_name: Option<CString>,
    /// `collnetEnable`.
    pub collnet_enable: Option<bool>,
    /// `CTAPolicy`: `NCCL_CTA_POLICY_*` flags.
    pub cta_policy: Option<i32>,
    /// `shrinkShare`: a shrunk child shares its parent's resources.
    pub shrink_share: Option<bool>,
    /// `nvlsCTAs`.
    pub nvls_ctas: Option<i32>,
    /// `nChannelsPerNetPeer`.
    pub n_channels_per_net_peer: Option<i32>,
    /// `nvlinkCentricSched`.
    pub nvlink_centric_sched: Option<i32>,
    /// `graphUsageMode` (NCCL 2.32.3).
    pub graph_usage_mode: Option<i32>,
    /// `numRmaCtx` (NCCL 2.32.3).
    pub num_rma_ctx: Option<i32>,
    /// `maxP2pPeers` (NCCL 2.32.3).
    pub max_p2p_peers: Option<i32>,
    /// `graphStreamOrdering` (NCCL 2.32.3).
    pub graph_stream_ordering: Option<i32>,
    /// `launchOrderImplicit` (NCCL 2.32.3).
    pub launch_order_implicit: Option<i32>,
    /// `numRmaSig` (NCCL 2.32.3).
    pub num_rma_sig: Option<i32>,
    /// `rmaEagerInit` (NCCL 2.32.3).
    pub rma_eager_init: Option<i32>,
    /// `hostCftMode`: an `ncclHostCftMode_t` value (NCCL 2.32.3).
    pub host_cft_mode: Option<i32>,
    /// `nvlsHostMode`: `ncclNvlsHostMode_t` flags (NCCL 2.32.3).
    pub nvls_host_mode: Option<i32>,
}

/// The `ncclConfig_t` layouts the sys layer mirrors, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ConfigLayout {
    /// `ncclConfig_t__v22809`: 80 bytes, stamped 22809.
    V22809,
    /// `ncclConfig_t`: 120 bytes, stamped 23203.
    V23203,
}

impl ConfigLayout {
    const ALL: [ConfigLayout; 2] = [ConfigLayout::V22809, ConfigLayout::V23203];

    /// The first NCCL known to have this layout: the version its initializer stamps.
    pub(crate) fn first_version(self) -> Version {
        let code = match self {
            ConfigLayout::V22809 => NCCL_CONFIG_INITIALIZER__v22809().version,
            ConfigLayout::V23203 => NCCL_CONFIG_INITIALIZER().version,
        };
        Version::from_nccl_code(code as i32)
    }

    /// The newest layout whose first version is at most `loaded`; the oldest layout for a
    /// library older than every mirrored header (NCCL reads a config by its size and stamp).
    pub(crate) fn for_version(loaded: Version) -> ConfigLayout {
        ConfigLayout::ALL
            .into_iter()
            .rev()
            .find(|layout| layout.first_version() <= loaded)
            .unwrap_or(ConfigLayout::ALL[0])
    }
}

/// A C config filled from a [`CommConfig`], borrowing it for the strings it points to.
pub(crate) struct RawConfig<'a> {
    layout: RawLayout,
    strings: PhantomData<&'a CommConfig>,
}

enum RawLayout {
    V22809(ncclConfig_t__v22809),
    V23203(ncclConfig_t),
}

impl RawConfig<'_> {
    /// For NCCL's `ncclConfig_t *` parameters: NCCL reads the struct's size and version
    /// stamp first, so an older layout is passed through the same pointer type.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut ncclConfig_t {
        match &mut self.layout {
            RawLayout::V22809(config) => (config as *mut ncclConfig_t__v22809).cast(),
            RawLayout::V23203(config) => config,
        }
    }
}

/// Writes the options every layout has into `$raw` (a mirror fresh from its initializer).
macro_rules! set_common_fields {
    ($raw:ident, $config:expr) => {{
        let c = $config;
        set(&mut $raw.blocking, c.blocking.map(i32::from));
        set(&mut $raw.cgaClusterSize, c.cga_cluster_size);
        set(&mut $raw.minCTAs, c.min_ctas);
        set(&mut $raw.maxCTAs, c.max_ctas);
        set_string(&mut $raw.netName, &c.net_name);
        set(&mut $raw.splitShare, c.split_share.map(i32::from));
        set(&mut $raw.trafficClass, c.traffic_class);
        set_string(&mut $raw.commName, &c.comm_name);
        set(&mut $raw.collnetEnable, c.collnet_enable.map(i32::from));
        set(&mut $raw.CTAPolicy, c.cta_policy);
        set(&mut $raw.shrinkShare, c.shrink_share.map(i32::from));
        set(&mut $raw.nvlsCTAs, c.nvls_ctas);
        set(&mut $raw.nChannelsPerNetPeer, c.n_channels_per_net_peer);
        set(&mut $raw.nvlinkCentricSched, c.nvlink_centric_sched);
    }};
}

impl CommConfig {
    /// The C config for the loaded libnccl (loading it if needed).
    pub(crate) fn to_raw(&self) -> Result<RawConfig<'_>> {
        self.to_raw_for(library_info(Library::Nccl)?.version)
    }

    /// The C config in the layout a libnccl of version `loaded` accepts, or the first set
    /// option that layout lacks as [`Error::ConfigFieldUnsupported`].
    pub(crate) fn to_raw_for(&self, loaded: Version) -> Result<RawConfig<'_>> {
        let layout = ConfigLayout::for_version(loaded);
        if let Some((field, since)) = self
            .set_fields()
            .into_iter()
            .find(|&(_, since)| since > layout)
        {
            return Err(Error::ConfigFieldUnsupported {
                field,
                since: since.first_version(),
                loaded,
            });
        }
        let layout = match layout {
            ConfigLayout::V22809 => {
                let mut raw = NCCL_CONFIG_INITIALIZER__v22809();
                set_common_fields!(raw, self);
                RawLayout::V22809(raw)
            }
            ConfigLayout::V23203 => {
                let mut raw = NCCL_CONFIG_INITIALIZER();
                set_common_fields!(raw, self);
                set(&mut raw.graphUsageMode, self.graph_usage_mode);
                set(&mut raw.numRmaCtx, self.num_rma_ctx);
                set(&mut raw.maxP2pPeers, self.max_p2p_peers);
                set(&mut raw.graphStreamOrdering, self.graph_stream_ordering);
                set(&mut raw.launchOrderImplicit, self.launch_order_implicit);
                set(&mut raw.numRmaSig, self.num_rma_sig);
                set(&mut raw.rmaEagerInit, self.rma_eager_init);
                set(&mut raw.hostCftMode, self.host_cft_mode);
                set(&mut raw.nvlsHostMode, self.nvls_host_mode);
                RawLayout::V23203(raw)
            }
        };
        Ok(RawConfig {
            layout,
            strings: PhantomData,
        })
    }

    /// The C names of the options that are set, with the first layout that has each.
    fn set_fields(&self) -> Vec<(&'static str, ConfigLayout)> {
        use ConfigLayout::{V22809, V23203};
        let scalars = [
            ("blocking", V22809, self.blocking.is_some()),
            ("cgaClusterSize", V22809, self.cga_cluster_size.is_some()),
            ("minCTAs", V22809, self.min_ctas.is_some()),
            ("maxCTAs", V22809, self.max_ctas.is_some()),
            ("netName", V22809, self.net_name.is_some()),
            ("splitShare", V22809, self.split_share.is_some()),
            ("trafficClass", V22809, self.traffic_class.is_some()),
            ("commName", V22809, self.comm_name.is_some()),
            ("collnetEnable", V22809, self.collnet_enable.is_some()),
            ("CTAPolicy", V22809, self.cta_policy.is_some()),
            ("shrinkShare", V22809, self.shrink_share.is_some()),
            ("nvlsCTAs", V22809, self.nvls_ctas.is_some()),
            (
                "nChannelsPerNetPeer",
                V22809,
                self.n_channels_per_net_peer.is_some(),
            ),
            (
                "nvlinkCentricSched",
                V22809,
                self.nvlink_centric_sched.is_some(),
            ),
            ("graphUsageMode", V23203, self.graph_usage_mode.is_some()),
            ("numRmaCtx", V23203, self.num_rma_ctx.is_some()),
            ("maxP2pPeers", V23203, self.max_p2p_peers.is_some()),
            (
                "graphStreamOrdering",
                V23203,
                self.graph_stream_ordering.is_some(),
            ),
            (
                "launchOrderImplicit",
                V23203,
                self.launch_order_implicit.is_some(),
            ),
            ("numRmaSig", V23203, self.num_rma_sig.is_some()),
            ("rmaEagerInit", V23203, self.rma_eager_init.is_some()),
            ("hostCftMode", V23203, self.host_cft_mode.is_some()),
            ("nvlsHostMode", V23203, self.nvls_host_mode.is_some()),
        ];
        scalars
            .into_iter()
            .filter(|&(_, _, is_set)| is_set)
            .map(|(field, since, _)| (field, since))
            .collect()
    }
}

/// Leaves the initializer's "undefined" value in place for an unset option.
fn set(field: &mut i32, value: Option<i32>) {
    if let Some(value) = value {
        *field = value;
    }
}

fn set_string(field: &mut *const core::ffi::c_char, value: &Option<CString>) {
    if let Some(value) = value {
        *field = value.as_ptr();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::nccl::NCCL_CONFIG_UNDEF_INT;

    const V2_28_9: Version = Version {
        major: 2,
        minor: 28,
        patch: 9,
    };
    const V2_32_3: Version = Version {
        major: 2,
        minor: 32,
        patch: 3,
    };

    fn version(major: u32, minor: u32, patch: u32) -> Version {
        Version {
            major,
            minor,
            patch,
        }
    }

    #[test]
    fn each_layout_starts_at_the_version_its_initializer_stamps() {
        assert_eq!(ConfigLayout::V22809.first_version(), V2_28_9);
        assert_eq!(ConfigLayout::V23203.first_version(), V2_32_3);
    }

    #[test]
    fn the_newest_layout_not_newer_than_the_loaded_library_is_chosen() {
        for (loaded, expected) in [
            (version(2, 27, 0), ConfigLayout::V22809),
            (V2_28_9, ConfigLayout::V22809),
            (version(2, 29, 1), ConfigLayout::V22809),
            (version(2, 32, 2), ConfigLayout::V22809),
            (V2_32_3, ConfigLayout::V23203),
            (version(2, 33, 0), ConfigLayout::V23203),
            (version(3, 0, 0), ConfigLayout::V23203),
        ] {
            assert_eq!(ConfigLayout::for_version(loaded), expected, "{loaded}");
        }
    }

    #[test]
    fn the_chosen_layout_carries_its_size_stamp_and_the_set_options() {
        let mut config = CommConfig {
            blocking: Some(false),
            max_ctas: Some(8),
            comm_name: Some(c"unit".into()),
            ..CommConfig::default()
        };

        let mut raw = config.to_raw_for(V2_28_9).unwrap();
        let RawLayout::V22809(old) = raw.layout else {
            panic!("2.28.9 takes the 2.28.9 layout")
        };
        assert_eq!((old.size, old.version), (80, 22809));
        assert_eq!((old.blocking, old.maxCTAs), (0, 8));
        assert_eq!(old.minCTAs, NCCL_CONFIG_UNDEF_INT);
        assert_eq!(old.commName, config.comm_name.as_ref().unwrap().as_ptr());
        assert!(old.netName.is_null());
        assert_eq!(raw.as_mut_ptr().cast::<usize>(), {
            let RawLayout::V22809(old) = &mut raw.layout else {
                unreachable!()
            };
            (old as *mut ncclConfig_t__v22809).cast::<usize>()
        });

        config.nvls_host_mode = Some(1);
        let raw = config.to_raw_for(version(2, 33, 0)).unwrap();
        let RawLayout::V23203(new) = raw.layout else {
            panic!("2.33.0 takes the 2.32.3 layout")
        };
        assert_eq!((new.size, new.version), (120, 23203));
        assert_eq!((new.blocking, new.maxCTAs, new.nvlsHostMode), (0, 8, 1));
        assert_eq!(new.graphUsageMode, NCCL_CONFIG_UNDEF_INT);
    }

    #[test]
    fn an_option_newer_than_the_loaded_layout_is_an_error_naming_both_versions() {
        let config = CommConfig {
            blocking: Some(true),
            max_p2p_peers: Some(4),
            ..CommConfig::default()
        };
        let err = config.to_raw_for(version(2, 30, 0)).err().unwrap();
        assert_eq!(
            err,
            Error::ConfigFieldUnsupported {
                field: "maxP2pPeers",
                since: V2_32_3,
                loaded: version(2, 30, 0),
            }
        );
        assert!(err.is_argument_error());
        let text = err.to_string();
        for expected in ["maxP2pPeers", "2.32.3", "2.30.0"] {
            assert!(text.contains(expected), "{expected:?} missing from: {text}");
        }
    }

    #[test]
    fn an_empty_config_is_the_initializer() {
        let config = CommConfig::default();
        let raw = config.to_raw_for(V2_32_3).unwrap();
        let RawLayout::V23203(new) = raw.layout else {
            panic!()
        };
        let init = NCCL_CONFIG_INITIALIZER();
        assert_eq!(format!("{new:?}"), format!("{init:?}"));
    }
}
