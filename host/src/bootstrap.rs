//! The bootstrap blob and the host-level datagrams (spec/host.md).
//!
//! A [`Blob`] is what one side hands the other out of band (an NCCL handle, a verbs GID/QPN exchange, a file):
//! at most [`Blob::MAX_LEN`] bytes, versioned, naming plane 0's address and port and either a listener or one
//! QP. Everything else a connection needs travels in band, as host-level datagrams ([`Msg`]) on the same UDP
//! sockets as MRC: a RESOLVE asks a node for its plane addresses, a CONNECT asks a listener for a link.
//!
//! A host datagram starts with the magic `MRCH`; its first byte (0x4D) is no MRC opcode (they are all ≥ 0xC0,
//! spec §3), so the datapath tells the two apart by one byte and the engine never sees bootstrap traffic.
//! Decoding never panics: bad input is an error naming the field.

use std::net::{Ipv6Addr, SocketAddrV6};

use mrc::Caps;
use mrc::wire::{AUTH_LEN, AuthKey};

use crate::config::{MAX_PLANES, PeerPlane};

/// First bytes of a blob.
const BLOB_MAGIC: [u8; 4] = *b"MRCb";
/// First bytes of a host-level datagram.
const MSG_MAGIC: [u8; 4] = *b"MRCH";
/// The version of host datagrams this code writes and reads.
pub const VERSION: u8 = 1;
/// The version of blobs this code writes and reads (2: with a key).
pub const BLOB_VERSION: u8 = 2;
/// Bytes of a secret key (a listener's, a QP's).
pub const KEY_LEN: usize = 16;

/// 128 random bits from the OS: a listener's or a QP's key (spec SEC-AUTH-1, HOST-AUTH-1). Should the OS have
/// none to give, the clock and the process id mixed: distinct across runs, though guessable then.
pub fn random_key() -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    if getrandom::fill(&mut k).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        k = (t ^ u128::from(std::process::id()) << 96).to_le_bytes();
    }
    k
}

/// Whether `datagram` is host-level (bootstrap) rather than MRC.
pub fn is_host_datagram(datagram: &[u8]) -> bool {
    // spec: HOST-DGRAM-1
    datagram.starts_with(&MSG_MAGIC)
}

/// Why bytes did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad bootstrap data: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// What a blob names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobKind {
    /// A listener ([`crate::Host::listen`]): connect to it with [`crate::Host::connect`].
    Listener {
        /// The listener's identifier at its host.
        id: u64,
    },
    /// One QP ([`crate::Qp::blob`]): connect a local QP to it with [`crate::Qp::connect`].
    Qp {
        /// Its number.
        qpn: u32,
        /// The first PSN it sends.
        psn: u32,
        /// Extensions it accepts.
        caps: Caps,
        /// Payload bytes per packet it sends.
        mtu: u32,
    },
}

/// What a peer needs to reach a listener or a QP: ≤ 128 bytes, versioned (spec/host.md, "Blob").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blob {
    /// Planes of the node.
    pub planes: u8,
    /// The node runs SRv6 uSID addressing (its plane addresses are `block:host-uSID::`).
    pub usid: bool,
    /// Plane 0's socket address (the verbs GID 0 and, as LID, the port).
    pub plane0: SocketAddrV6,
    /// uSID mode: the node's T0 in plane 0 (0 otherwise).
    pub t0: u16,
    /// Listener or QP.
    pub kind: BlobKind,
    /// A registered region the peer may use (`rkey`, address), or 0: a hint for front ends that have
    /// nowhere else to put it.
    pub rkey_hint: u32,
    /// The address that goes with `rkey_hint`.
    pub addr_hint: u64,
    /// The secret that proves a peer was handed this blob: a listener's key (it tags CONNECTs) or a QP's
    /// receive key (it tags what the peer's QP sends to it). Keep the blob as secret as a password.
    pub key: [u8; KEY_LEN],
}

impl Blob {
    /// Encoded size (every kind encodes to the same size).
    pub const LEN: usize = 80;
    /// The most any version will ever need: what an NCCL handle or a verbs exchange must have room for.
    pub const MAX_LEN: usize = 128;

    /// The bytes (spec/host.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::LEN);
        b.extend_from_slice(&BLOB_MAGIC);
        b.push(BLOB_VERSION);
        let (kind, id, qpn, psn, caps, mtu) = match self.kind {
            BlobKind::Listener { id } => (1u8, id, 0, 0, Caps::default(), 0),
            BlobKind::Qp {
                qpn,
                psn,
                caps,
                mtu,
            } => (2u8, 0, qpn, psn, caps, mtu),
        };
        b.push(kind);
        b.push(self.planes);
        b.push(u8::from(self.usid));
        b.extend_from_slice(&self.plane0.port().to_be_bytes());
        b.extend_from_slice(&self.t0.to_be_bytes());
        b.extend_from_slice(&self.plane0.ip().octets());
        b.extend_from_slice(&id.to_be_bytes());
        b.extend_from_slice(&qpn.to_be_bytes());
        b.extend_from_slice(&psn.to_be_bytes());
        b.push(caps_bits(caps));
        b.push(0);
        b.extend_from_slice(&mtu.to_be_bytes());
        b.extend_from_slice(&self.rkey_hint.to_be_bytes());
        b.extend_from_slice(&self.addr_hint.to_be_bytes());
        b.resize(64, 0);
        b.extend_from_slice(&self.key);
        b
    }

    /// Reads a blob; longer input is accepted (a later version may append fields), shorter is not.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        // spec: HOST-BLOB-1
        let mut r = Reader::new(bytes);
        if r.take(4)? != BLOB_MAGIC {
            return Err(DecodeError("blob magic (not an MRC bootstrap blob)"));
        }
        if r.u8()? != BLOB_VERSION {
            return Err(DecodeError(
                "blob version (this host reads version 2, which carries a key)",
            ));
        }
        let kind = r.u8()?;
        let planes = r.u8()?;
        if planes == 0 || usize::from(planes) > MAX_PLANES {
            return Err(DecodeError("blob planes (1..=16)"));
        }
        let flags = r.u8()?;
        let port = r.u16()?;
        let t0 = r.u16()?;
        let ip = r.ipv6()?;
        let id = r.u64()?;
        let qpn = r.u32()?;
        let psn = r.u32()?;
        let caps = caps_from(r.u8()?);
        r.u8()?;
        let mtu = r.u32()?;
        let rkey_hint = r.u32()?;
        let addr_hint = r.u64()?;
        r.u16()?;
        let key = r.key()?;
        let kind = match kind {
            1 => BlobKind::Listener { id },
            2 => BlobKind::Qp {
                qpn,
                psn: psn & mrc::wire::PSN_MASK,
                caps,
                mtu,
            },
            _ => return Err(DecodeError("blob kind (1 listener, 2 QP)")),
        };
        Ok(Self {
            planes,
            usid: flags & 1 != 0,
            plane0: SocketAddrV6::new(ip, port, 0, 0),
            t0,
            kind,
            rkey_hint,
            addr_hint,
            key,
        })
    }
}

fn caps_bits(c: Caps) -> u8 {
    u8::from(c.send) | u8::from(c.read) << 1
}

fn caps_from(b: u8) -> Caps {
    Caps {
        send: b & 1 != 0,
        read: b & 2 != 0,
    }
}

/// One QP's half of a connection, in a CONNECT or ACCEPT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpHalf {
    /// Its number.
    pub qpn: u32,
    /// The first PSN it sends.
    pub psn: u32,
    /// Extensions it accepts.
    pub caps: Caps,
    /// Its receive key: the other side's QP tags what it sends with it.
    pub key: [u8; KEY_LEN],
}

/// Most QPs one link may have.
pub const MAX_LINK_QPS: usize = 64;
/// Most application bytes a CONNECT or ACCEPT carries.
pub const MAX_APP: usize = 1024;
/// Size of a RESOLVE request: as long as the longest reply, so a forged source gains no amplification.
pub const RESOLVE_LEN: usize = 16 + 2 + MAX_PLANES * 20;

/// A host-level datagram (spec/host.md, "Bootstrap datagrams").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// "Which are your planes?", sent to plane 0 of a node.
    ResolveRequest {
        /// Echoed in the reply.
        token: u64,
    },
    /// The node's planes, one entry per plane.
    ResolveReply {
        /// The request's token.
        token: u64,
        /// Plane addresses and T0s.
        planes: Vec<PeerPlane>,
    },
    /// "Give me a link": sent to a listener's plane 0 and repeated until answered.
    Connect {
        /// Chosen by the connector; the listener answers a repeated CONNECT with the same ACCEPT.
        token: u64,
        /// The listener asked.
        listener: u64,
        /// The connector's planes.
        planes: Vec<PeerPlane>,
        /// The connector's QPs (in INIT), in link order.
        qps: Vec<QpHalf>,
        /// Application data (e.g. NCCL's connection info).
        app: Vec<u8>,
        /// Tag of everything before it with the listener's key (spec HOST-AUTH-1).
        mac: [u8; AUTH_LEN],
    },
    /// The listener's side: its QPs are in RTS.
    Accept {
        /// The CONNECT's token.
        token: u64,
        /// The listener's planes.
        planes: Vec<PeerPlane>,
        /// The listener's QPs, paired in order with the connector's.
        qps: Vec<QpHalf>,
        /// The listener's reply.
        app: Vec<u8>,
    },
    /// No such listener (or it cannot take the request).
    Refuse {
        /// The CONNECT's token.
        token: u64,
        /// Why: 1 no such listener, 2 malformed or too large.
        reason: u8,
    },
    /// "I am closing this link": sent by a side whose QPs are drained, to the peer's plane 0, repeated until
    /// answered.
    Close {
        /// Chosen by the closer; echoed by CLOSED.
        token: u64,
        /// (the closer's QPN, the receiver's QPN) per QP of the link.
        pairs: Vec<(u32, u32)>,
        /// Tag of everything before it with the receive key of the receiver's first QP (spec HOST-AUTH-2).
        mac: [u8; AUTH_LEN],
    },
    /// The receiver drained and destroyed its QPs of the link (or had none left).
    Closed {
        /// The CLOSE's token.
        token: u64,
    },
}

impl Msg {
    /// The bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&MSG_MAGIC);
        b.push(VERSION);
        let (ty, token) = match self {
            Msg::ResolveRequest { token } => (1u8, *token),
            Msg::ResolveReply { token, .. } => (2, *token),
            Msg::Connect { token, .. } => (3, *token),
            Msg::Accept { token, .. } => (4, *token),
            Msg::Refuse { token, .. } => (5, *token),
            Msg::Close { token, .. } => (6, *token),
            Msg::Closed { token } => (7, *token),
        };
        b.push(ty);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&token.to_be_bytes());
        match self {
            Msg::ResolveRequest { .. } => b.resize(RESOLVE_LEN, 0),
            Msg::ResolveReply { planes, .. } => put_planes(&mut b, planes),
            Msg::Connect {
                listener,
                planes,
                qps,
                app,
                mac,
                ..
            } => {
                b.extend_from_slice(&listener.to_be_bytes());
                put_link(&mut b, planes, qps, app);
                b.extend_from_slice(mac);
            }
            Msg::Accept {
                planes, qps, app, ..
            } => put_link(&mut b, planes, qps, app),
            Msg::Refuse { reason, .. } => b.push(*reason),
            Msg::Close { pairs, mac, .. } => {
                b.push(pairs.len().min(MAX_LINK_QPS) as u8);
                for (mine, yours) in pairs.iter().take(MAX_LINK_QPS) {
                    b.extend_from_slice(&mine.to_be_bytes());
                    b.extend_from_slice(&yours.to_be_bytes());
                }
                b.extend_from_slice(mac);
            }
            Msg::Closed { .. } => {}
        }
        b
    }

    /// Reads a host datagram.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        if r.take(4)? != MSG_MAGIC {
            return Err(DecodeError("datagram magic"));
        }
        if r.u8()? != VERSION {
            return Err(DecodeError("datagram version"));
        }
        let ty = r.u8()?;
        r.u16()?;
        let token = r.u64()?;
        Ok(match ty {
            1 => {
                // spec: HOST-DGRAM-2
                if bytes.len() < RESOLVE_LEN {
                    return Err(DecodeError("RESOLVE shorter than its reply could be"));
                }
                Msg::ResolveRequest { token }
            }
            2 => Msg::ResolveReply {
                token,
                planes: get_planes(&mut r)?,
            },
            3 => {
                let listener = r.u64()?;
                let (planes, qps, app) = get_link(&mut r)?;
                Msg::Connect {
                    token,
                    listener,
                    planes,
                    qps,
                    app,
                    mac: r.mac()?,
                }
            }
            4 => {
                let (planes, qps, app) = get_link(&mut r)?;
                Msg::Accept {
                    token,
                    planes,
                    qps,
                    app,
                }
            }
            5 => Msg::Refuse {
                token,
                reason: r.u8()?,
            },
            6 => {
                let n = usize::from(r.u8()?);
                if n == 0 || n > MAX_LINK_QPS {
                    return Err(DecodeError("QP count (1..=64)"));
                }
                let pairs = (0..n)
                    .map(|_| Ok((r.u32()?, r.u32()?)))
                    .collect::<Result<Vec<_>, DecodeError>>()?;
                Msg::Close {
                    token,
                    pairs,
                    mac: r.mac()?,
                }
            }
            7 => Msg::Closed { token },
            _ => return Err(DecodeError("datagram type (1..=7)")),
        })
    }
}

/// Encodes a CONNECT or CLOSE with its tag made with `key` (its `mac` field is ignored): the tag covers every
/// byte before it (spec HOST-AUTH-1, HOST-AUTH-2).
pub fn seal(msg: &Msg, key: &AuthKey) -> Vec<u8> {
    let mut b = msg.encode();
    if let Some(n) = b.len().checked_sub(AUTH_LEN) {
        let tag = key.tag(&b[..n]);
        b[n..].copy_from_slice(&tag);
    }
    b
}

/// Whether the datagram `bytes` (a CONNECT or CLOSE, as received) ends with the tag `key` makes of the rest.
pub fn proves(bytes: &[u8], key: &AuthKey) -> bool {
    match bytes.split_last_chunk::<AUTH_LEN>() {
        Some((covered, tag)) if covered.len() >= 16 => key.verify(covered, tag),
        _ => false,
    }
}

fn put_planes(b: &mut Vec<u8>, planes: &[PeerPlane]) {
    b.push(planes.len().min(MAX_PLANES) as u8);
    b.push(0);
    for p in planes.iter().take(MAX_PLANES) {
        b.extend_from_slice(&p.addr.ip().octets());
        b.extend_from_slice(&p.addr.port().to_be_bytes());
        b.extend_from_slice(&p.t0.to_be_bytes());
    }
}

fn get_planes(r: &mut Reader<'_>) -> Result<Vec<PeerPlane>, DecodeError> {
    let n = usize::from(r.u8()?);
    r.u8()?;
    if n == 0 || n > MAX_PLANES {
        return Err(DecodeError("plane count (1..=16)"));
    }
    (0..n)
        .map(|_| {
            let ip = r.ipv6()?;
            let port = r.u16()?;
            let t0 = r.u16()?;
            Ok(PeerPlane {
                addr: SocketAddrV6::new(ip, port, 0, 0),
                t0,
            })
        })
        .collect()
}

fn put_link(b: &mut Vec<u8>, planes: &[PeerPlane], qps: &[QpHalf], app: &[u8]) {
    put_planes(b, planes);
    b.push(qps.len().min(MAX_LINK_QPS) as u8);
    for q in qps.iter().take(MAX_LINK_QPS) {
        b.extend_from_slice(&q.qpn.to_be_bytes());
        b.extend_from_slice(&q.psn.to_be_bytes());
        b.push(caps_bits(q.caps));
        b.extend_from_slice(&q.key);
    }
    let app = &app[..app.len().min(MAX_APP)];
    b.extend_from_slice(&(app.len() as u16).to_be_bytes());
    b.extend_from_slice(app);
}

type Link = (Vec<PeerPlane>, Vec<QpHalf>, Vec<u8>);

fn get_link(r: &mut Reader<'_>) -> Result<Link, DecodeError> {
    let planes = get_planes(r)?;
    let n = usize::from(r.u8()?);
    if n == 0 || n > MAX_LINK_QPS {
        return Err(DecodeError("QP count (1..=64)"));
    }
    let qps = (0..n)
        .map(|_| {
            Ok(QpHalf {
                qpn: r.u32()?,
                psn: r.u32()? & mrc::wire::PSN_MASK,
                caps: caps_from(r.u8()?),
                key: r.key()?,
            })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    let len = usize::from(r.u16()?);
    if len > MAX_APP {
        return Err(DecodeError("application data (at most 1024 bytes)"));
    }
    let app = r.take(len)?.to_vec();
    Ok((planes, qps, app))
}

/// Bounds-checked big-endian reads.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self { b }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.b.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let t = self.take(2)?;
        Ok(u16::from_be_bytes([t[0], t[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }

    fn key(&mut self) -> Result<[u8; KEY_LEN], DecodeError> {
        let mut a = [0u8; KEY_LEN];
        a.copy_from_slice(self.take(KEY_LEN)?);
        Ok(a)
    }

    fn mac(&mut self) -> Result<[u8; AUTH_LEN], DecodeError> {
        let mut a = [0u8; AUTH_LEN];
        a.copy_from_slice(self.take(AUTH_LEN)?);
        Ok(a)
    }

    fn ipv6(&mut self) -> Result<Ipv6Addr, DecodeError> {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.take(16)?);
        Ok(Ipv6Addr::from(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qp_blob() -> Blob {
        Blob {
            planes: 4,
            usid: false,
            plane0: SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0x1234, 0, 0),
            t0: 0,
            kind: BlobKind::Qp {
                qpn: 0x0001_0203,
                psn: 0x00AB_CDEF,
                caps: Caps {
                    send: true,
                    read: false,
                },
                mtu: 4096,
            },
            rkey_hint: 0xDEAD_BEEF,
            addr_hint: 0x1122_3344_5566_7788,
            key: *b"0123456789abcdef",
        }
    }

    /// The test vector of spec/host.md.
    #[test]
    fn blob_vector() {
        let b = qp_blob().encode();
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let want = concat!(
            "4d524362",                         // magic "MRCb"
            "02",                               // version
            "02",                               // kind: QP
            "04",                               // planes
            "00",                               // flags: plain addressing
            "1234",                             // plane 0's UDP port
            "0000",                             // T0
            "00000000000000000000000000000001", // plane 0's address (::1)
            "0000000000000000",                 // listener id (none)
            "00010203",                         // QPN
            "00abcdef",                         // PSN
            "01",                               // caps: SEND
            "00",                               // reserved
            "00001000",                         // MTU 4096
            "deadbeef",                         // rkey hint
            "1122334455667788",                 // address hint
            "0000",                             // padding to 64 bytes
            "30313233343536373839616263646566", // key "0123456789abcdef"
        );
        assert_eq!(hex, want);
        assert_eq!(b.len(), Blob::LEN);
        assert!(b.len() <= Blob::MAX_LEN);
        assert_eq!(Blob::decode(&b), Ok(qp_blob()));
    }

    #[test]
    fn blob_rejects_garbage_without_panicking() {
        let good = qp_blob().encode();
        for n in 0..good.len() {
            if n < Blob::LEN {
                assert!(Blob::decode(&good[..n]).is_err(), "prefix {n}");
            }
        }
        let mut bad = good.clone();
        bad[4] = 1;
        assert_eq!(
            Blob::decode(&bad).unwrap_err().0,
            "blob version (this host reads version 2, which carries a key)"
        );
        let mut bad = good.clone();
        bad[6] = 17;
        assert!(Blob::decode(&bad).is_err());
        let mut bad = good;
        bad[5] = 9;
        assert!(Blob::decode(&bad).is_err());
        // Every byte pattern of a short input, and noise: errors, never a panic.
        let mut x = 0x9E37_79B9u32;
        for len in 0..200 {
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = Blob::decode(&v);
            let _ = Msg::decode(&v);
        }
    }

    #[test]
    fn messages_round_trip_and_are_not_mrc() {
        let planes: Vec<PeerPlane> = (0..3)
            .map(|i| PeerPlane {
                addr: SocketAddrV6::new(Ipv6Addr::LOCALHOST, 4000 + i, 0, 0),
                t0: i,
            })
            .collect();
        let qps = vec![
            QpHalf {
                qpn: 0x10,
                psn: 5,
                caps: Caps::default(),
                key: [7; KEY_LEN],
            };
            2
        ];
        let msgs = [
            Msg::ResolveRequest { token: 7 },
            Msg::ResolveReply {
                token: 7,
                planes: planes.clone(),
            },
            Msg::Connect {
                token: 9,
                listener: 3,
                planes: planes.clone(),
                qps: qps.clone(),
                app: b"hello".to_vec(),
                mac: [1; AUTH_LEN],
            },
            Msg::Accept {
                token: 9,
                planes,
                qps,
                app: vec![],
            },
            Msg::Refuse {
                token: 9,
                reason: 1,
            },
            Msg::Close {
                token: 11,
                pairs: vec![(0x10, 0x20), (0x11, 0x21)],
                mac: [2; AUTH_LEN],
            },
            Msg::Closed { token: 11 },
        ];
        for m in msgs {
            let b = m.encode();
            assert!(is_host_datagram(&b));
            assert!(
                mrc::wire::Packet::parse(&b, mrc::wire::ParseOptions::default()).is_err(),
                "{m:?} parses as MRC"
            );
            assert_eq!(Msg::decode(&b), Ok(m.clone()));
            for n in 0..b.len() {
                let _ = Msg::decode(&b[..n]);
            }
        }
        // A RESOLVE request is at least as long as any reply: no amplification toward a forged source.
        let full = Msg::ResolveReply {
            token: 0,
            planes: vec![
                PeerPlane {
                    addr: SocketAddrV6::new(Ipv6Addr::LOCALHOST, 1, 0, 0),
                    t0: 0
                };
                MAX_PLANES
            ],
        };
        assert!(Msg::ResolveRequest { token: 0 }.encode().len() >= full.encode().len());
    }
}
