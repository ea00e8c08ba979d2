//! Per-call options of the collectives: the `ncclCollConfig_t` that a `<collective>_config`
//! method (for example [`Communicator::all_reduce_config`](crate::Communicator::all_reduce_config))
//! passes, written into the layout (size and version stamp) of the libnccl that is loaded.

use std::ffi::CString;
use std::marker::PhantomData;

use crate::config::{check_documented, fill_layout, Documented, OptionValue};
use crate::error::Result;
use crate::library::{library_info, Library, Version};
use crate::sys::coll_config_layouts::{CollConfigLayout, RawCollConfigLayout};
use crate::sys::nccl::{cudaEvent_t, ncclCollConfig_t};

include!("generated/coll_config.rs");

/// A CUDA event handle, compared and printed by address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Event(cudaEvent_t);

// SAFETY: a CUDA event handle may be used from any thread; CollConfig only passes it to NCCL.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only reads the handle.
unsafe impl Sync for Event {}

impl CollConfig {
    /// The C config for the loaded libnccl (loading it if needed).
    pub(crate) fn to_raw(&self) -> Result<RawCollConfig<'_>> {
        check_documented("ncclCollConfig_t", Self::DOCUMENTED, &self.set_options())?;
        self.to_raw_for(library_info(Library::Nccl)?.version)
    }

    /// The C config in the layout a libnccl of version `loaded` accepts (the oldest layout
    /// for a library older than every layout: the call then reports the missing function),
    /// or the first set option that layout lacks as `Error::ConfigFieldUnsupported`.
    pub(crate) fn to_raw_for(&self, loaded: Version) -> Result<RawCollConfig<'_>> {
        Ok(RawCollConfig {
            layout: fill_layout(&self.set_options(), loaded)?,
            strings: PhantomData,
        })
    }
}

impl crate::config::RawLayout for RawCollConfigLayout {
    type Layout = CollConfigLayout;
    fn new(layout: CollConfigLayout) -> Self {
        RawCollConfigLayout::new(layout)
    }
    fn version_mut(&mut self) -> &mut core::ffi::c_uint {
        RawCollConfigLayout::version_mut(self)
    }
    fn first_with(field: &str) -> Option<CollConfigLayout> {
        CollConfigLayout::first_with(field)
    }
    fn set(&mut self, field: &str, value: &OptionValue<'_>) -> Option<()> {
        match *value {
            OptionValue::Int(v) => self.int_field(field).map(|slot| *slot = v),
            OptionValue::String(s) => self.string_field(field).map(|slot| *slot = s.as_ptr()),
            OptionValue::U64(v) => self.u64_field(field).map(|slot| *slot = v),
            OptionValue::Event(e) => self.event_field(field).map(|slot| *slot = e),
        }
    }
}

/// A C per-call config filled from a [`CollConfig`], borrowing it for the string it points to.
pub(crate) struct RawCollConfig<'a> {
    layout: RawCollConfigLayout,
    strings: PhantomData<&'a CollConfig>,
}

impl RawCollConfig<'_> {
    /// For the `const ncclCollConfig_t *` of the `*Config` collectives: NCCL reads the size
    /// and version stamp first, so an older layout is passed through the same pointer type.
    pub(crate) fn as_ptr(&mut self) -> *const ncclCollConfig_t {
        self.layout.as_mut_ptr().cast_const()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::first_version;
    use crate::error::Error;
    use crate::sys::nccl::NCCL_CONFIG_UNDEF_INT;

    fn every_option() -> CollConfig {
        let mut config = CollConfig {
            min_ctas: Some(1),
            max_ctas: Some(2),
            nvls_ctas: Some(3),
            cga_cluster_size: Some(4),
            alg_selection: Some(c"ring".into()),
            force_alg_selection: Some(false),
            cta_policy: Some(0),
            user_profiler_tag: Some(7),
            launch_completion_event: None,
        };
        // SAFETY: never passed to NCCL or CUDA.
        unsafe { config.set_launch_completion_event(8 as cudaEvent_t) };
        config
    }

    #[test]
    fn every_option_names_a_field_of_some_layout() {
        let config = every_option();
        let options = config.set_options();
        for (field, _) in &options {
            assert!(CollConfigLayout::first_with(field).is_some(), "{field}");
        }
        assert_eq!(options.len(), 9);
    }

    #[test]
    fn each_layout_carries_its_options_stamped_with_its_own_version() {
        let config = CollConfig {
            max_ctas: Some(2),
            alg_selection: Some(c"ring".into()),
            force_alg_selection: Some(false),
            user_profiler_tag: Some(7),
            ..CollConfig::default()
        };
        for layout in CollConfigLayout::ALL {
            for &code in layout.version_codes() {
                let mut raw = config.to_raw_for(Version::from_nccl_code(code)).unwrap();
                let fields = &mut raw.layout;
                assert_eq!(fields.layout(), layout);
                assert_eq!(*fields.version_mut() as i32, code);
                assert_eq!(*fields.int_field("maxCTAs").unwrap(), 2);
                assert_eq!(*fields.int_field("forceAlgSelection").unwrap(), 0);
                assert_eq!(*fields.int_field("minCTAs").unwrap(), NCCL_CONFIG_UNDEF_INT);
                assert_eq!(*fields.u64_field("userProfilerTag").unwrap(), 7);
                assert_eq!(
                    *fields.string_field("algSelection").unwrap(),
                    config.alg_selection.as_ref().unwrap().as_ptr()
                );
            }
        }
    }

    #[test]
    fn an_option_newer_than_the_loaded_layout_is_an_error_naming_both_versions() {
        let newest = CollConfigLayout::ALL[CollConfigLayout::ALL.len() - 1];
        let config = every_option();
        assert!(config.to_raw_for(first_version(newest)).is_ok());
        for layout in CollConfigLayout::ALL {
            let loaded = first_version(layout);
            let result = config.to_raw_for(loaded);
            // The first option (in set_options' order) that this layout lacks.
            let missing = config
                .set_options()
                .into_iter()
                .map(|(field, _)| field)
                .find(|field| CollConfigLayout::first_with(field).unwrap() > layout);
            match missing {
                None => assert!(result.is_ok(), "{layout:?}"),
                Some(field) => assert_eq!(
                    result.err().unwrap(),
                    Error::ConfigFieldUnsupported {
                        field,
                        since: first_version(CollConfigLayout::first_with(field).unwrap()),
                        loaded,
                    }
                ),
            }
        }
    }

    #[test]
    fn an_empty_config_is_the_initializer() {
        let newest = CollConfigLayout::ALL[CollConfigLayout::ALL.len() - 1];
        let config = CollConfig::default();
        // the newest release of the newest layout: the one whose initializer `new` gives
        let codes = newest.version_codes();
        let raw = config
            .to_raw_for(Version::from_nccl_code(codes[codes.len() - 1]))
            .unwrap();
        let init = RawCollConfigLayout::new(newest);
        assert_eq!(format!("{:?}", raw.layout), format!("{init:?}"));
    }
}
