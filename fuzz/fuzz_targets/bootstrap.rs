//! The host's bootstrap formats (spec/host.md): the blob and every host datagram, on arbitrary bytes. Decoding
//! never panics; whatever decodes encodes to bytes that decode to the same thing; a tag made with a key proves
//! that key and no other, and changing any covered byte breaks it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc::wire::AuthKey;
use mrc_host::Blob;
use mrc_host::bootstrap::{Msg, proves, seal};

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = Blob::decode(data) {
        let again = b.encode();
        assert!(again.len() <= Blob::MAX_LEN);
        assert_eq!(Blob::decode(&again), Ok(b));
    }
    let Ok(m) = Msg::decode(data) else {
        let _ = proves(data, &AuthKey::new([7; 16]));
        return;
    };
    let again = m.encode();
    assert_eq!(Msg::decode(&again).as_ref(), Ok(&m));
    if matches!(m, Msg::Connect { .. } | Msg::Close { .. }) {
        let k = data.len() as u8;
        let key = AuthKey::new([k; 16]);
        let sealed = seal(&m, &key);
        assert!(proves(&sealed, &key));
        assert!(!proves(&sealed, &AuthKey::new([!k; 16])));
        let mut flipped = sealed.clone();
        flipped[data.len() % (sealed.len() - 8)] ^= 1;
        assert!(!proves(&flipped, &key));
    }
});
