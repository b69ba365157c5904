//! The AUTH tag (spec WIRE-AUTH-1): 8 bytes right after the opcode's headers, flagged by BTH bit AT, that prove
//! the sender holds the connection's key. A request (WRITE, SEND, READ request) carries the direction's request
//! token, SipHash-1-3 of the empty message under the key; every other packet SipHash-1-3 over every header byte
//! before the tag. Against an attacker who sees no packet both are 64 secret bits; the token costs a compare
//! where the MAC costs ten SipHash rounds, on the packets that are most of the traffic.

use super::{BTH_LEN, Error, OpKind, Opcode, Result};

/// BTH byte 1, bit 4: an AUTH tag follows the opcode's headers.
pub(crate) const AT: u8 = 0x10;
/// Bytes of the AUTH tag.
pub const AUTH_LEN: usize = 8;

/// A 128-bit key for AUTH tags (one per direction of a connection).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AuthKey {
    /// SipHash's state after the key is loaded (a function of the key alone, so it is set once).
    init: [u64; 4],
    /// The tag of every request packet: SipHash-1-3 of the empty message, which no header can be.
    token: u64,
}

impl core::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print a secret.
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// The key of 16 secret bytes, read as SipHash's reference code reads its key (two little-endian words).
    pub fn new(key: [u8; 16]) -> Self {
        let (a, b) = key.split_at(8);
        Self::from_words(
            u64::from_le_bytes(a.try_into().unwrap_or_default()),
            u64::from_le_bytes(b.try_into().unwrap_or_default()),
        )
    }

    fn from_words(k0: u64, k1: u64) -> Self {
        let init = [
            k0 ^ 0x736f_6d65_7073_6575,
            k1 ^ 0x646f_7261_6e64_6f6d,
            k0 ^ 0x6c79_6765_6e65_7261,
            k1 ^ 0x7465_6462_7974_6573,
        ];
        Self {
            init,
            token: sip13(&init, &[]),
        }
    }

    /// SipHash-1-3 of `covered` under this key: the MAC of a control packet's headers (and of the host's
    /// bootstrap datagrams, `spec/host.md`).
    #[inline]
    pub fn tag(&self, covered: &[u8]) -> [u8; AUTH_LEN] {
        sip13(&self.init, covered).to_le_bytes()
    }

    /// Whether `tag` is the SipHash-1-3 of `covered` (one 64-bit compare: no early exit).
    #[inline]
    pub fn verify(&self, covered: &[u8], tag: &[u8; AUTH_LEN]) -> bool {
        sip13(&self.init, covered) == u64::from_le_bytes(*tag)
    }

    /// The AUTH tag of a packet whose headers are `covered` (the bytes from the BTH, AT set, to the end of its
    /// headers): the request token for a request, the MAC of the headers for anything else.
    // spec: WIRE-AUTH-1
    #[inline(always)]
    fn packet_tag(&self, covered: &[u8]) -> u64 {
        match covered.first() {
            Some(&op) if is_request(op) => self.token,
            _ => self.mac(covered),
        }
    }

    /// Out of line, so that a request's compare stays small where it is inlined.
    #[inline(never)]
    fn mac(&self, covered: &[u8]) -> u64 {
        sip13(&self.init, covered)
    }

    /// Turns headers written at `buf[..hlen]` into authenticated ones: sets BTH.AT, writes the tag at
    /// `buf[hlen..hlen + 8]` and returns `hlen + 8` (where the payload, if any, goes). `Truncated` when the
    /// buffer is too short or holds no BTH.
    #[inline]
    pub fn seal_headers(&self, buf: &mut [u8], hlen: usize) -> Result<usize> {
        let end = hlen.checked_add(AUTH_LEN).ok_or(Error::Truncated)?;
        if hlen < BTH_LEN || buf.len() < end {
            return Err(Error::Truncated);
        }
        buf[1] |= AT;
        let (covered, rest) = buf.split_at_mut(hlen);
        rest[..AUTH_LEN].copy_from_slice(&self.packet_tag(covered).to_le_bytes());
        Ok(end)
    }
}

/// Whether opcode byte `op` is a request's (WRITE, SEND, READ request): the packets that carry the token. One
/// table lookup, as it runs for every packet.
#[inline]
fn is_request(op: u8) -> bool {
    REQUESTS[usize::from(op >> 6)] >> (op & 63) & 1 != 0
}

/// Bit `op` set for every request opcode.
const REQUESTS: [u64; 4] = {
    let mut bits = [0u64; 4];
    let mut i = 0;
    while i < Opcode::ALL.len() {
        let op = Opcode::ALL[i];
        if matches!(
            op.kind(),
            OpKind::Write | OpKind::Send | OpKind::ReadRequest
        ) {
            let v = op.to_u8();
            bits[(v >> 6) as usize] |= 1 << (v & 63);
        }
        i += 1;
    }
    bits
};

/// SipHash-1-3 of `m` from the keyed state `v`, for whole messages of a few words: they are read eight bytes at a
/// time straight from the slice, with no streaming buffer (a general `Hasher` spends a fifth of a 40-byte tag
/// on one). The `siphasher` crate is the reference it is tested against.
#[inline]
fn sip13(init: &[u64; 4], m: &[u8]) -> u64 {
    let mut v = *init;
    let (words, tail) = m.as_chunks::<8>();
    for w in words {
        compress(&mut v, u64::from_le_bytes(*w));
    }
    // The last word: the tail's bytes, little-endian, and the length's low byte on top. From a message of a
    // word or more, the tail is the top of its last eight bytes, one load (a SACK's 44 bytes end in 4: the byte
    // loop was a sixth of its MAC); a shorter message is all tail.
    let tail_word = match (tail.len(), m.last_chunk::<8>()) {
        (0, _) => 0,
        (n, Some(last)) => u64::from_le_bytes(*last) >> (64 - 8 * n),
        (_, None) => tail
            .iter()
            .enumerate()
            .fold(0, |b, (i, &byte)| b | u64::from(byte) << (8 * i)),
    };
    compress(&mut v, tail_word | (m.len() as u64) << 56);
    v[2] ^= 0xff;
    sip_round(&mut v);
    sip_round(&mut v);
    sip_round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// One message word, one compression round (the "1" of SipHash-1-3).
#[inline(always)]
fn compress(v: &mut [u64; 4], mi: u64) {
    v[3] ^= mi;
    sip_round(v);
    v[0] ^= mi;
}

#[inline(always)]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// Where a parsed packet's AUTH tag was: the headers it covers are `buf[..covered]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthTag {
    /// Bytes of headers the tag covers (BTH to the end of the opcode's headers).
    pub covered: usize,
    /// The tag.
    pub tag: [u8; AUTH_LEN],
    /// Whether the packet is a request, whose tag is the token: the parser knows from the opcode it matched.
    pub(crate) request: bool,
}

impl AuthTag {
    /// Whether this tag, found in the packet `buf` it was parsed from, proves `key` (one 64-bit compare: no
    /// early exit). A request's token is compared without looking at `buf` again: this runs for every data
    /// packet.
    #[inline(always)]
    pub fn proves(&self, key: &AuthKey, buf: &[u8]) -> bool {
        let tag = u64::from_le_bytes(self.tag);
        if self.request {
            return tag == key.token;
        }
        buf.get(..self.covered).is_some_and(|c| key.mac(c) == tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify_and_any_change_fails() {
        let key = AuthKey::new(*b"0123456789abcdef");
        let mut buf = [0u8; 32];
        buf[0] = 0xDC;
        buf[1] = 0x01;
        let n = key.seal_headers(&mut buf, 20).unwrap();
        assert_eq!(n, 28);
        assert_eq!(buf[1] & AT, AT);
        let tag: [u8; 8] = buf[20..28].try_into().unwrap();
        assert!(key.verify(&buf[..20], &tag));
        let t = AuthTag {
            covered: 20,
            tag,
            request: is_request(buf[0]),
        };
        assert!(t.proves(&key, &buf));
        assert!(!t.proves(&AuthKey::new([1; 16]), &buf));
        for i in 0..20 {
            let mut b = buf;
            b[i] ^= 0x40;
            assert!(!t.proves(&key, &b), "byte {i} is covered");
        }
        assert_eq!(key.seal_headers(&mut buf, 25), Err(Error::Truncated));
        assert_eq!(key.seal_headers(&mut buf, 4), Err(Error::Truncated));
    }

    #[test]
    fn a_request_carries_the_token_and_a_control_packet_the_mac() {
        let key = AuthKey::new(*b"0123456789abcdef");
        let other = AuthKey::new(*b"0123456789abcdeF");
        let token = key.tag(&[]);
        assert_ne!(token, other.tag(&[]));
        for op in Opcode::ALL {
            let mut buf = [0u8; 48];
            buf[0] = op.to_u8();
            buf[4..12].copy_from_slice(b"headers!");
            key.seal_headers(&mut buf, 40).unwrap();
            let tag: [u8; 8] = buf[40..48].try_into().unwrap();
            let t = AuthTag {
                covered: 40,
                tag,
                request: is_request(buf[0]),
            };
            assert!(t.proves(&key, &buf), "{op:?}");
            assert!(!t.proves(&other, &buf), "{op:?}: another key");
            let request = matches!(
                op.kind(),
                OpKind::Write | OpKind::Send | OpKind::ReadRequest
            );
            if request {
                assert_eq!(tag, token, "{op:?} carries the token");
            } else {
                assert_eq!(
                    tag,
                    key.tag(&buf[..40]),
                    "{op:?} carries the MAC of its headers"
                );
                assert_ne!(tag, token, "{op:?}");
            }
            // A request's token names no headers; a control packet's MAC names them all.
            let mut b = buf;
            b[5] ^= 1;
            assert_eq!(t.proves(&key, &b), request, "{op:?} with a header changed");
        }
    }

    /// SipHash-1-3, key 00 01 .. 0f, message 00 01 .. 0e (spec/vectors/auth.txt).
    const REFERENCE: [u8; 8] = [0x56, 0x99, 0x51, 0x2a, 0x6d, 0xd8, 0x20, 0xd3];

    #[test]
    fn reference_value() {
        // Computed by an independent SipHash implementation (checked against SipHash-2-4's published vectors).
        let key = AuthKey::new(core::array::from_fn(|i| i as u8));
        let msg: [u8; 15] = core::array::from_fn(|i| i as u8);
        assert_eq!(key.tag(&msg), REFERENCE);
        // The request token of the same key (spec WIRE-AUTH-1), from the same implementation.
        assert_eq!(
            key.token.to_le_bytes(),
            [0xdc, 0xc4, 0x0f, 0x05, 0x58, 0x01, 0xac, 0xab]
        );
    }

    /// The general-purpose `siphasher` crate's SipHash-1-3 (a streaming `Hasher`).
    fn reference(k0: u64, k1: u64, m: &[u8]) -> u64 {
        use core::hash::Hasher;
        let mut h = siphasher::sip::SipHasher13::new_with_keys(k0, k1);
        h.write(m);
        h.finish()
    }

    #[test]
    fn every_length_to_128_matches_the_reference() {
        let m: [u8; 128] = core::array::from_fn(|i| (i as u8).wrapping_mul(151).wrapping_add(7));
        for len in 0..=m.len() {
            let (k0, k1) = (0x0706_0504_0302_0100 ^ len as u64, 0x0f0e_0d0c_0b0a_0908);
            assert_eq!(
                AuthKey::from_words(k0, k1).tag(&m[..len]),
                reference(k0, k1, &m[..len]).to_le_bytes(),
                "length {len}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn matches_the_reference(k0: u64, k1: u64, m in proptest::collection::vec(proptest::num::u8::ANY, 0..128)) {
            let key = AuthKey::from_words(k0, k1);
            let tag = reference(k0, k1, &m).to_le_bytes();
            proptest::prop_assert_eq!(key.tag(&m), tag);
            proptest::prop_assert!(key.verify(&m, &tag));
            let mut wrong = tag;
            wrong[usize::from(m.first().copied().unwrap_or(0)) % AUTH_LEN] ^= 1;
            proptest::prop_assert!(!key.verify(&m, &wrong));
        }
    }
}
