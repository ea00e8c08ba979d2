//! Unique ids: created by NCCL (no GPU needed), sent to the other ranks as 128 bytes.

use ncclbind::{Error, UniqueId, UNIQUE_ID_BYTES};

#[test]
fn an_id_round_trips_through_its_bytes() {
    let id = UniqueId::new().expect("ncclGetUniqueId");
    let bytes = *id.as_bytes();
    assert!(
        bytes.iter().any(|&b| b != 0),
        "NCCL returned an all-zero id"
    );
    assert_eq!(UniqueId::from_bytes(bytes), id);
    assert_eq!(UniqueId::try_from(&bytes[..]).unwrap(), id);
    assert_eq!(id.as_raw().internal.len(), UNIQUE_ID_BYTES);
}

#[test]
fn each_new_id_is_different() {
    assert_ne!(UniqueId::new().unwrap(), UniqueId::new().unwrap());
}

#[test]
fn bytes_of_the_wrong_length_are_an_error() {
    assert_eq!(
        UniqueId::try_from(&[0u8; 127][..]),
        Err(Error::UniqueIdLength { len: 127 })
    );
    assert_eq!(
        UniqueId::try_from(&[0u8; 129][..]),
        Err(Error::UniqueIdLength { len: 129 })
    );
}
