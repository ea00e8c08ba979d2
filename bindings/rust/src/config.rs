//! Communicator configuration: the `ncclConfig_t` options a user sets, written into the
//! layout (size and version stamp) of the libnccl that is loaded, not the newest one known.

use core::ffi::c_uint;
use std::ffi::CString;
use std::marker::PhantomData;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::library::{library_info, Library, Version};
use crate::sys::coll_config_layouts::CollConfigLayout;
use crate::sys::comm_properties_layouts::{CommPropertiesLayout, RawCommPropertiesLayout};
use crate::sys::config_layouts::{ConfigLayout, RawConfigLayout};
use crate::sys::nccl::{cudaEvent_t, ncclConfig_t};

include!("generated/comm_config.rs");

/// The layouts of a record NCCL reads by its size and version stamp (`sys::*_layouts`,
/// generated from the IR), oldest first.
pub(crate) trait VersionedLayout: Copy + Eq + 'static {
    fn all() -> &'static [Self];
    fn version_codes(self) -> &'static [i32];
}

macro_rules! versioned_layout {
    ($($layout:ty),*) => {$(
        impl VersionedLayout for $layout {
            fn all() -> &'static [Self] {
                &<$layout>::ALL
            }
            fn version_codes(self) -> &'static [i32] {
                <$layout>::version_codes(self)
            }
        }
    )*};
}
versioned_layout!(ConfigLayout, CollConfigLayout, CommPropertiesLayout);

/// The newest layout whose first version is at most `loaded`; the oldest layout for a
/// library older than every mirrored header (NCCL reads a config by its size and stamp).
pub(crate) fn layout_for<L: VersionedLayout>(loaded: Version) -> L {
    L::all()
        .iter()
        .rev()
        .copied()
        .find(|&layout| first_version(layout) <= loaded)
        .unwrap_or(L::all()[0])
}

/// The first NCCL header set with `layout`.
pub(crate) fn first_version<L: VersionedLayout>(layout: L) -> Version {
    Version::from_nccl_code(layout.version_codes()[0])
}

/// The version stamp for `layout` on a library of version `loaded`: the loaded version itself
/// when it is one of the header sets with this layout, else the newest of them not newer than
/// it (a stamp newer than the layout would make NCCL read fields past its end).
pub(crate) fn stamp_for<L: VersionedLayout>(layout: L, loaded: Version) -> i32 {
    let codes = layout.version_codes();
    codes
        .iter()
        .rev()
        .copied()
        .find(|&code| Version::from_nccl_code(code) <= loaded)
        .unwrap_or(codes[0])
}

/// A record in one of its layouts (`sys::*_layouts`' `Raw*Layout`), filled field by field.
pub(crate) trait RawLayout: Sized {
    type Layout: VersionedLayout;
    fn new(layout: Self::Layout) -> Self;
    fn version_mut(&mut self) -> &mut c_uint;
    fn first_with(field: &str) -> Option<Self::Layout>;
    /// Writes `value` into the field `field` (its C name); None where this layout lacks it.
    fn set(&mut self, field: &str, value: &OptionValue<'_>) -> Option<()>;
}

impl RawLayout for RawConfigLayout {
    type Layout = ConfigLayout;
    fn new(layout: ConfigLayout) -> Self {
        RawConfigLayout::new(layout)
    }
    fn version_mut(&mut self) -> &mut c_uint {
        RawConfigLayout::version_mut(self)
    }
    fn first_with(field: &str) -> Option<ConfigLayout> {
        ConfigLayout::first_with(field)
    }
    fn set(&mut self, field: &str, value: &OptionValue<'_>) -> Option<()> {
        match *value {
            OptionValue::Int(v) => self.int_field(field).map(|slot| *slot = v),
            OptionValue::String(s) => self.string_field(field).map(|slot| *slot = s.as_ptr()),
            OptionValue::U64(_) | OptionValue::Event(_) => None,
        }
    }
}

/// The value of one set option, for the field of its C name.
pub(crate) enum OptionValue<'a> {
    Int(i32),
    String(&'a CString),
    U64(u64),
    Event(cudaEvent_t),
}

/// `R` in the layout a libnccl of version `loaded` accepts, stamped for it, with `options`
/// written in; the first option that layout lacks is [`Error::ConfigFieldUnsupported`].
pub(crate) fn fill_layout<R: RawLayout>(
    options: &[(&'static str, OptionValue<'_>)],
    loaded: Version,
) -> Result<R> {
    let layout = layout_for::<R::Layout>(loaded);
    let mut raw = R::new(layout);
    *raw.version_mut() = stamp_for(layout, loaded) as _;
    for (field, value) in options {
        if raw.set(field, value).is_none() {
            let all = R::Layout::all();
            let since = R::first_with(field).unwrap_or(all[all.len() - 1]);
            return Err(Error::ConfigFieldUnsupported {
                field,
                since: first_version(since),
                loaded,
            });
        }
    }
    Ok(raw)
}

/// `R` in the layout the loaded libnccl accepts, as its initializer fills it and stamped for
/// that library (loading it if needed): for a record NCCL fills, like `ncclCommProperties_t`.
pub(crate) fn loaded_layout<R: RawLayout>() -> Result<R> {
    fill_layout(&[], library_info(Library::Nccl)?.version)
}

impl RawLayout for RawCommPropertiesLayout {
    type Layout = CommPropertiesLayout;
    fn new(layout: CommPropertiesLayout) -> Self {
        RawCommPropertiesLayout::new(layout)
    }
    fn version_mut(&mut self) -> &mut c_uint {
        RawCommPropertiesLayout::version_mut(self)
    }
    fn first_with(field: &str) -> Option<CommPropertiesLayout> {
        CommPropertiesLayout::first_with(field)
    }
    /// NCCL writes the properties; the crate sets none.
    fn set(&mut self, _field: &str, _value: &OptionValue<'_>) -> Option<()> {
        None
    }
}

/// A C config filled from a [`CommConfig`], borrowing it for the strings it points to.
pub(crate) struct RawConfig<'a> {
    layout: RawConfigLayout,
    strings: PhantomData<&'a CommConfig>,
}

impl RawConfig<'_> {
    /// For NCCL's `ncclConfig_t *` parameters: NCCL reads the struct's size and version
    /// stamp first, so an older layout is passed through the same pointer type.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut ncclConfig_t {
        self.layout.as_mut_ptr()
    }
}

/// What NCCL documents for an int option of `ncclConfig_t` or `ncclCollConfig_t`: a range
/// (`cgaClusterSize` 0 to 8, NCCL's user guide) or a flag group's flags or-ed (`CTAPolicy`, the
/// header's `NCCL_CTA_POLICY_*`). Each config's `DOCUMENTED` table is generated from
/// policy/python_api.toml's `ranges` and flag groups, the ones Python checks; the other
/// options state no range in the header or the guide, so NCCL alone judges them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Documented {
    /// The lowest and the highest value.
    Range(i32, i32),
    /// Every flag or-ed.
    Flags(i32),
}

impl Documented {
    /// Whether NCCL documents `value`.
    pub fn allows(self, value: i32) -> bool {
        match self {
            Documented::Range(lowest, highest) => (lowest..=highest).contains(&value),
            Documented::Flags(mask) => value >= 0 && value & !mask == 0,
        }
    }
}

/// The first set option of `record` (`options`: its set_options) whose value NCCL does not
/// document, as [`Error::ConfigValueOutOfRange`], before NCCL is called.
pub(crate) fn check_documented(
    record: &'static str,
    documented: &[(&'static str, Documented, &'static str)],
    options: &[(&'static str, OptionValue<'_>)],
) -> Result<()> {
    for (field, value) in options {
        let OptionValue::Int(value) = value else {
            continue;
        };
        if let Some((_, rule, allowed)) = documented.iter().find(|(f, ..)| f == field) {
            if !rule.allows(*value) {
                return Err(Error::ConfigValueOutOfRange {
                    record,
                    field,
                    value: (*value).into(),
                    allowed,
                });
            }
        }
    }
    Ok(())
}

impl CommConfig {
    /// The C config for the loaded libnccl (loading it if needed).
    pub(crate) fn to_raw(&self) -> Result<RawConfig<'_>> {
        check_documented("ncclConfig_t", Self::DOCUMENTED, &self.set_options())?;
        self.to_raw_for(library_info(Library::Nccl)?.version)
    }

    /// The C config in the layout a libnccl of version `loaded` accepts, or the first set
    /// option that layout lacks as [`Error::ConfigFieldUnsupported`].
    pub(crate) fn to_raw_for(&self, loaded: Version) -> Result<RawConfig<'_>> {
        Ok(RawConfig {
            layout: fill_layout(&self.set_options(), loaded)?,
            strings: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::nccl::NCCL_CONFIG_UNDEF_INT;

    fn version(major: u32, minor: u32, patch: u32) -> Version {
        Version {
            major,
            minor,
            patch,
        }
    }

    fn newest() -> ConfigLayout {
        ConfigLayout::ALL[ConfigLayout::ALL.len() - 1]
    }

    /// Every option set, so that each one's field is looked up.
    fn every_option() -> CommConfig {
        CommConfig {
            blocking: Some(false),
            cga_cluster_size: Some(1),
            min_ctas: Some(1),
            max_ctas: Some(8),
            net_name: Some(c"Socket".into()),
            split_share: Some(true),
            traffic_class: Some(1),
            comm_name: Some(c"unit".into()),
            collnet_enable: Some(false),
            cta_policy: Some(0),
            shrink_share: Some(false),
            nvls_ctas: Some(1),
            n_channels_per_net_peer: Some(1),
            nvlink_centric_sched: Some(0),
            graph_usage_mode: Some(0),
            num_rma_ctx: Some(1),
            max_p2p_peers: Some(4),
            graph_stream_ordering: Some(0),
            launch_order_implicit: Some(0),
            num_rma_sig: Some(1),
            rma_eager_init: Some(0),
            host_cft_mode: Some(0),
            nvls_host_mode: Some(1),
            init_timeout: Some(Duration::from_secs(1)),
        }
    }

    /// (init_timeout is the crate's, not a field.)
    #[test]
    fn every_option_names_a_field_of_some_layout() {
        for (field, _) in every_option().set_options() {
            assert!(ConfigLayout::first_with(field).is_some(), "{field}");
        }
        assert_eq!(every_option().set_options().len(), 23);
    }

    #[test]
    fn each_header_set_takes_its_own_layout_stamped_with_its_own_version() {
        for layout in ConfigLayout::ALL {
            for &code in layout.version_codes() {
                let loaded = Version::from_nccl_code(code);
                assert_eq!(layout_for::<ConfigLayout>(loaded), layout, "{loaded}");
                assert_eq!(stamp_for(layout, loaded), code, "{loaded}");
            }
        }
    }

    #[test]
    fn a_library_between_or_beyond_the_header_sets_takes_the_layout_before_it() {
        let first = first_version(ConfigLayout::ALL[0]);
        assert_eq!(
            layout_for::<ConfigLayout>(version(first.major, 0, 0)),
            ConfigLayout::ALL[0]
        );
        let newest_code = *newest().version_codes().last().unwrap();
        let beyond = version(first.major + 1, 0, 0);
        assert_eq!(layout_for::<ConfigLayout>(beyond), newest());
        assert_eq!(stamp_for(newest(), beyond), newest_code);
        for pair in ConfigLayout::ALL.windows(2) {
            let next = first_version(pair[1]);
            let just_before = version(next.major, next.minor, 0);
            if just_before < next && just_before >= first_version(pair[0]) {
                assert_eq!(
                    layout_for::<ConfigLayout>(just_before),
                    pair[0],
                    "{just_before}"
                );
            }
        }
    }

    #[test]
    fn the_chosen_layout_carries_the_set_options_and_leaves_the_rest_undefined() {
        let config = CommConfig {
            blocking: Some(false),
            max_ctas: Some(8),
            comm_name: Some(c"unit".into()),
            ..CommConfig::default()
        };
        // the layouts with every set option (an older one refuses commName: the next test)
        let since = ConfigLayout::first_with("commName").expect("commName is in the IR");
        for layout in ConfigLayout::ALL.into_iter().filter(|&l| l >= since) {
            let mut raw = config.to_raw_for(first_version(layout)).unwrap();
            assert_eq!(raw.layout.layout(), layout);
            let fields = &mut raw.layout;
            assert_eq!(*fields.int_field("blocking").unwrap(), 0);
            assert_eq!(*fields.int_field("maxCTAs").unwrap(), 8);
            assert_eq!(*fields.int_field("minCTAs").unwrap(), NCCL_CONFIG_UNDEF_INT);
            assert_eq!(
                *fields.string_field("commName").unwrap(),
                config.comm_name.as_ref().unwrap().as_ptr()
            );
            assert!(fields.string_field("netName").unwrap().is_null());
        }
    }

    #[test]
    fn an_option_newer_than_the_loaded_layout_is_an_error_naming_both_versions() {
        let since = ConfigLayout::first_with("maxP2pPeers").expect("maxP2pPeers is in the IR");
        let config = CommConfig {
            blocking: Some(true),
            max_p2p_peers: Some(4),
            ..CommConfig::default()
        };
        assert!(config.to_raw_for(first_version(since)).is_ok());
        let Some(older) = ConfigLayout::ALL.into_iter().rev().find(|&l| l < since) else {
            return; // every mirrored layout has it
        };
        let loaded = first_version(older);
        let err = config.to_raw_for(loaded).err().unwrap();
        assert_eq!(
            err,
            Error::ConfigFieldUnsupported {
                field: "maxP2pPeers",
                since: first_version(since),
                loaded,
            }
        );
        assert!(err.is_argument_error());
        let text = err.to_string();
        for expected in [
            "maxP2pPeers".to_string(),
            first_version(since).to_string(),
            loaded.to_string(),
        ] {
            assert!(
                text.contains(&expected),
                "{expected:?} missing from: {text}"
            );
        }
    }

    #[test]
    fn an_empty_config_is_the_initializer() {
        let config = CommConfig::default();
        // the newest release of the newest layout: the one whose initializer `new` gives
        let codes = newest().version_codes();
        let loaded = Version::from_nccl_code(codes[codes.len() - 1]);
        let raw = config.to_raw_for(loaded).unwrap();
        let init = RawConfigLayout::new(newest());
        assert_eq!(format!("{:?}", raw.layout), format!("{init:?}"));
    }
}
