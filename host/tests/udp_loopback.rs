//! The UDP datapath over loopback sockets: real sockets, real registered memory, zero configuration. (The
//! progress thread and the host API on top are tested in `host_api.rs`.)
use std::time::{Duration, Instant as WallClock};

use mrc::*;
use mrc_host::{DatapathConfig, NodeConfig, UdpEndpoint, software_cc};

/// A sealed packet of `body` to `dest_qp` at `psn`, as an attacker (or a test) forges it.
fn forge(opcode: wire::Opcode, dest_qp: u32, psn: u32, body: wire::Body<'_>) -> Vec<u8> {
    let p = wire::Packet {
        bth: wire::Bth {
            opcode,
            se: false,
            rtx: false,
            pkey: wire::DEFAULT_PKEY,
            dest_qp,
            ack_req: false,
            psn: psn & wire::PSN_MASK,
        },
        body,
    };
    let mut buf = vec![0u8; p.buffer_len()];
    let n = p.emit(&mut buf).expect("a buffer of buffer_len bytes");
    buf.truncate(n);
    buf
}

const PLANES: usize = 4;
const MTU: u32 = 8192;

fn endpoint() -> UdpEndpoint {
    UdpEndpoint::new(
        NodeConfig::loopback(PLANES),
        EndpointConfig::default(),
        DatapathConfig {
            max_datagram: MTU as usize + 128,
            ..DatapathConfig::default()
        },
    )
    .expect("loopback sockets")
}

struct Side {
    ep: UdpEndpoint,
    qpn: u32,
    cq: CqId,
    addr: u64,
    keys: MrKeys,
    /// The first PSN this side's QP sends.
    psn: u32,
}

/// Two endpoints with one connected QP each and a `len`-byte region on each side.
fn pair(len: usize) -> (Side, Side) {
    let mut eps = [endpoint(), endpoint()];
    let planes = [eps[0].local_planes(), eps[1].local_planes()];
    let mut made = Vec::new();
    for ep in eps.iter_mut() {
        let pd = ep.endpoint().alloc_pd();
        let cq = ep.endpoint().create_cq(4096);
        let mut init = QpInit::new(pd, cq);
        // The timing a software host needs (RTTs of tens of µs to ms, not a NIC's 10 µs).
        init.config = ep.software_qp_config(MTU, 4, software_cc(MTU, 64, None));
        init.max_send_wr = 1024;
        init.max_recv_wr = 1024;
        let (qpn, info) = ep
            .create_qp(init, Access::REMOTE_WRITE | Access::REMOTE_READ)
            .unwrap();
        let (addr, keys) = ep
            .alloc_mr(
                pd,
                len,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            )
            .unwrap();
        made.push((qpn, info, cq, addr, keys));
    }
    for k in 0..2 {
        let peer = eps[k].add_peer(planes[1 - k].clone()).unwrap();
        let (local, remote) = (made[k].1, made[1 - k].1);
        eps[k].connect_qp(&local, peer, &remote).unwrap();
    }
    let [a, b] = eps;
    let side = |ep, m: &(u32, ConnInfo, CqId, u64, MrKeys)| Side {
        ep,
        qpn: m.0,
        cq: m.2,
        addr: m.3,
        keys: m.4,
        psn: m.1.psn,
    };
    (side(a, &made[0]), side(b, &made[1]))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 13) as u8)
        .collect()
}

/// A local buffer: QP, region address, lkey.
type Local = (u32, u64, u32);

fn post_write(
    ep: &mut UdpEndpoint,
    local: Local,
    remote: (u64, u32),
    off: u64,
    len: u32,
    wr_id: u64,
    imm: Option<u32>,
) {
    let sge = [Sge {
        addr: local.1 + off,
        len,
        lkey: local.2,
    }];
    let op = match imm {
        None => SendOp::Write {
            remote_addr: remote.0 + off,
            rkey: remote.1,
        },
        Some(imm) => SendOp::WriteImm {
            remote_addr: remote.0 + off,
            rkey: remote.1,
            imm,
        },
    };
    let wr = SendWr {
        wr_id,
        op,
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    let now = ep.now();
    ep.endpoint().post_send(local.0, &wr, now).expect("post");
}

#[test]
fn poll_mode_moves_32_mib_byte_exact() {
    const LEN: usize = 32 << 20;
    const CHUNK: u32 = 1 << 20;
    let (mut a, mut b) = pair(LEN);
    let data = pattern(LEN, 7);
    a.ep.buffer(a.addr).unwrap().copy_from_slice(&data);
    let remote = (b.addr, b.keys.rkey);
    let local = (a.qpn, a.addr, a.keys.lkey);
    for i in 0..(LEN as u64 / u64::from(CHUNK)) {
        post_write(
            &mut a.ep,
            local,
            remote,
            i * u64::from(CHUNK),
            CHUNK,
            i,
            None,
        );
    }
    // The last one carries an immediate: its receive completion says all data is placed.
    let mut done = Vec::new();
    let mut imm_seen = false;
    let rwr = RecvWr {
        wr_id: 99,
        sges: &[],
    };
    b.ep.endpoint().post_recv(b.qpn, &rwr).unwrap();
    post_write(&mut a.ep, local, remote, 0, 0, 1000, Some(0xfeed));
    let start = WallClock::now();
    let mut wc = [Completion::default(); 64];
    while (done.len() < 33 || !imm_seen) && start.elapsed() < Duration::from_secs(20) {
        a.ep.poll(Duration::ZERO).unwrap();
        b.ep.poll(Duration::ZERO).unwrap();
        let n = a.ep.endpoint().poll_cq(a.cq, &mut wc);
        for c in &wc[..n] {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            done.push(c.wr_id);
        }
        let n = b.ep.endpoint().poll_cq(b.cq, &mut wc);
        for c in &wc[..n] {
            assert_eq!(
                (c.status, c.imm),
                (WcStatus::Success, Some(0xfeed)),
                "{c:?}"
            );
            imm_seen = true;
        }
    }
    let mut want: Vec<u64> = (0..32).collect();
    want.push(1000);
    assert_eq!(done, want, "every write completes once, in order");
    assert!(imm_seen);
    assert!(b.ep.buffer(b.addr).unwrap() == &data[..], "data differs");
    let s = b.ep.stats();
    assert!(s.rx_datagrams >= (LEN / MTU as usize) as u64, "{s:?}");
    assert_eq!(b.ep.refused_accesses(), 0);
    // Every plane carried a share.
    for p in 0..PLANES {
        let ps = a.ep.endpoint_ref().plane_stats(a.qpn, p).unwrap();
        assert!(ps.tx_packets > 0, "plane {p}: {ps:?}");
    }
}

/// A verified 8 MiB WRITE from A to B, with `attack` run once while it moves (after 100 data packets); returns
/// both sides after the transfer completed byte-exact and the dust settled, and what `attack` returned.
fn transfer_under_attack(attack: impl FnOnce(&Side, &Side) -> u64) -> (Side, Side, u64) {
    const LEN: usize = 8 << 20;
    const CHUNK: u32 = 1 << 20;
    let (mut a, mut b) = pair(LEN);
    let data = pattern(LEN, 5);
    a.ep.buffer(a.addr).unwrap().copy_from_slice(&data);
    let remote = (b.addr, b.keys.rkey);
    let local = (a.qpn, a.addr, a.keys.lkey);
    for i in 0..(LEN as u64 / u64::from(CHUNK)) {
        post_write(
            &mut a.ep,
            local,
            remote,
            i * u64::from(CHUNK),
            CHUNK,
            i,
            None,
        );
    }
    let mut attack = Some(attack);
    let mut sent = None;
    let mut done = 0;
    let mut wc = [Completion::default(); 64];
    let start = WallClock::now();
    while done < LEN / CHUNK as usize && start.elapsed() < Duration::from_secs(20) {
        a.ep.poll(Duration::ZERO).unwrap();
        b.ep.poll(Duration::ZERO).unwrap();
        if a.ep.endpoint_ref().qp_stats(a.qpn).unwrap().tx_data_packets > 100
            && let Some(f) = attack.take()
        {
            sent = Some(f(&a, &b));
        }
        let n = a.ep.endpoint().poll_cq(a.cq, &mut wc);
        for c in &wc[..n] {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
        done += n;
    }
    let sent = sent.expect("the attack ran during the transfer");
    assert_eq!(done, LEN / CHUNK as usize, "every write completed");
    assert!(b.ep.buffer(b.addr).unwrap() == &data[..], "data differs");
    for _ in 0..100 {
        a.ep.poll(Duration::ZERO).unwrap();
        b.ep.poll(Duration::ZERO).unwrap();
    }
    for side in [&a, &b] {
        assert_eq!(
            side.ep.endpoint_ref().qp_state(side.qpn),
            Some(QpState::Rts)
        );
    }
    (a, b, sent)
}

/// 8 fatal NACKs with random PSNs (from `dice`) to `qpn`, as the attacker builds them.
fn blind_nacks(qpn: u32, dice: &mut u64) -> Vec<Vec<u8>> {
    let reasons = [
        wire::NackReason::RemoteAccess,
        wire::NackReason::InvalidRequest,
        wire::NackReason::Unexpected,
    ];
    let mut roll = || {
        *dice = dice
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (*dice >> 33) as u32
    };
    (0..8)
        .map(|k| {
            let psn = roll() & wire::PSN_MASK;
            let nack = wire::Nack {
                reason: reasons[k % 3],
                psn,
                ev: 0,
                ts_echo: roll(),
                mpr: 8,
                cack_psn: psn.wrapping_sub(1) & wire::PSN_MASK,
            };
            forge(wire::Opcode::Nack, qpn, 0, wire::Body::Nack(nack))
        })
        .collect()
}

/// The blind attack of issue 10 over real sockets: while a verified 8 MiB WRITE moves, a stranger's socket sends
/// 8 fatal NACKs with random PSNs to every plane port of each side, and a WRITE of junk into the receiver's
/// region with the right QPN, key and PSN. The datapath drops them all (their source is no peer's), and the
/// transfer completes byte-exact.
#[test]
fn strangers_datagrams_never_reach_the_engine() {
    let (a, b, sent) = transfer_under_attack(|a, b| {
        let stranger = std::net::UdpSocket::bind("[::1]:0").unwrap();
        let mut dice = 0x5EED_u64;
        let mut sent = 0;
        for side in [a, b] {
            for nack in blind_nacks(side.qpn, &mut dice) {
                for p in side.ep.local_planes() {
                    stranger.send_to(&nack, p.addr).unwrap();
                    sent += 1;
                }
            }
        }
        let junk = [0xEEu8; 256];
        let write = forge(
            wire::Opcode::WriteOnly,
            b.qpn,
            a.psn,
            wire::Body::Data(wire::Data {
                meth: wire::Meth {
                    ev: 0,
                    msn: 0,
                    rqmsn: 0,
                },
                ts: Some(1),
                reth: wire::Reth {
                    va: b.addr,
                    rkey: b.keys.rkey,
                    dma_len: 256,
                },
                imm: None,
                payload: &junk,
            }),
        );
        stranger
            .send_to(&write, b.ep.local_planes()[0].addr)
            .unwrap();
        sent + 1
    });
    let dropped = a.ep.stats().rx_unknown_source + b.ep.stats().rx_unknown_source;
    assert_eq!(
        dropped, sent,
        "every stranger's datagram dropped by the datapath"
    );
}

/// A raw IPv6 socket that sends UDP datagrams with any source port: an off-path attacker spoofing a peer's
/// address. `None` without the privilege (raw sockets need root).
struct Spoofer(std::os::fd::OwnedFd);

impl Spoofer {
    fn open() -> Option<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: socket(2) with constant arguments; the descriptor is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // The kernel fills in the UDP checksum (offset 6 of what we send).
        let offset: libc::c_int = 6;
        // SAFETY: setsockopt(2) on an open descriptor with a pointer to a live c_int of the given size.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                libc::IPPROTO_IPV6,
                libc::IPV6_CHECKSUM,
                (&offset as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        (r == 0).then_some(Self(fd))
    }

    /// Sends `payload` to `to` as if from port `from_port` of the same loopback address.
    fn send(&self, from_port: u16, to: std::net::SocketAddrV6, payload: &[u8]) {
        let len = (8 + payload.len()) as u16;
        let mut d = Vec::with_capacity(usize::from(len));
        d.extend_from_slice(&from_port.to_be_bytes());
        d.extend_from_slice(&to.port().to_be_bytes());
        d.extend_from_slice(&len.to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(payload);
        // SAFETY: an all-zero sockaddr_in6 is valid; the fields set below make it the destination.
        let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        sa.sin6_addr.s6_addr = to.ip().octets();
        // SAFETY: sendto(2) with a live buffer of `d.len()` bytes and a sockaddr_in6 of its own size.
        let n = unsafe {
            libc::sendto(
                std::os::fd::AsRawFd::as_raw_fd(&self.0),
                d.as_ptr().cast(),
                d.len(),
                0,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        assert_eq!(
            n,
            d.len() as isize,
            "raw send: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The blind attack of issue 10 at its strongest over real sockets: the attacker spoofs each side's real plane
/// address and port (so the datapath takes the datagrams for the peer's) and knows both QPNs; only the PSNs
/// are guesses. 8 fatal NACKs with random PSNs go to every plane port of each side while a verified 8 MiB
/// WRITE moves; the engine drops them all and the transfer completes byte-exact.
#[test]
fn spoofed_blind_nacks_leave_a_verified_transfer_verified() {
    let Some(spoofer) = Spoofer::open() else {
        testing::skip(
            "spoofed_blind_nacks_leave_a_verified_transfer_verified",
            "needs root for a raw socket",
        );
        return;
    };
    let (a, b, sent) = transfer_under_attack(|a, b| {
        let mut dice = 0xB11D_u64;
        let mut sent = 0;
        for (victim, peer) in [(a, b), (b, a)] {
            for nack in blind_nacks(victim.qpn, &mut dice) {
                for (p, from) in victim.ep.local_planes().iter().zip(peer.ep.local_planes()) {
                    spoofer.send(from.addr.port(), p.addr, &nack);
                    sent += 1;
                }
            }
        }
        sent
    });
    let bad = a.ep.endpoint_ref().qp_stats(a.qpn).unwrap().rx_bad_acks
        + b.ep.endpoint_ref().qp_stats(b.qpn).unwrap().rx_bad_acks;
    eprintln!(
        "spoofed blind NACKs: {sent} sent from the peers' own addresses, {bad} counted and dropped as naming no \
         outstanding PSN, 8 MiB verified"
    );
    assert_eq!(
        bad, sent,
        "every forged NACK reached the engine and was dropped there"
    );
    assert_eq!(
        a.ep.stats().rx_unknown_source + b.ep.stats().rx_unknown_source,
        0
    );
}
