//! Keyed connections (spec `security.md` SEC-AUTH-1..3, PATH-PLANE-3), written as the attacks they stop: an
//! off-path attacker who knows the QPN, the PSN window and the peer's address but not the connection's key
//! forges acknowledgements and port reports; none of them changes anything, and a masked plane comes back by
//! itself.

mod common;

use common::*;
use mrc::testing::{Net, NetConfig, PlaneConfig};
use mrc::wire::{AuthKey, Body, EP_QPN, EpOp, EpRequest, Opcode, PSN_MASK, Sack, SackMark, icrc};
use mrc::*;

fn keyed_pair(planes: u8, seed: u64) -> (Net, u32, u32) {
    let mut net = Net::new(NetConfig::uniform(planes, PlaneConfig::default(), seed));
    net.add_node(Caps::ALL);
    net.add_node(Caps::ALL);
    let (qa, qb) = net.connect_keyed(A, B, &qp_config(planes));
    (net, qa, qb)
}

fn inject(net: &mut Net, to: usize, from: usize, port: u8, bytes: &[u8]) {
    let now = net.now();
    let meta = RecvMeta {
        peer: Some(PeerId(from as u32)),
        port,
        ecn_ce: false,
        trim: None,
    };
    let node = &mut net.nodes[to];
    node.ep.handle_datagram(now, meta, bytes, &mut node.mem);
}

/// Inserts an AUTH tag made with `key` (BTH.AT set) after the headers of a sealed packet and seals it again.
fn tagged(mut pkt: Vec<u8>, key: &AuthKey) -> Vec<u8> {
    let hlen = pkt.len() - 4;
    pkt.truncate(hlen);
    pkt.resize(hlen + 12, 0);
    let n = key.seal_headers(&mut pkt, hlen).unwrap();
    let crc = icrc(&pkt[..n]);
    pkt[n..n + 4].copy_from_slice(&crc.to_be_bytes());
    pkt
}

/// A SACK that acknowledges everything up to `cack`: in flight, not yet arrived.
fn sack_all(qa: u32, cack: u32) -> Vec<u8> {
    forge(
        Opcode::Sack,
        qa,
        0,
        Body::Sack(Sack {
            mark: SackMark::None,
            probe_reply: false,
            mpr: 8,
            ev: 0,
            cack_psn: cack & PSN_MASK,
            sack_base: cack.wrapping_add(1) & PSN_MASK,
            bitmap: u64::MAX,
            ts_echo: None,
            cwnd_pen: 0,
            ooo_count: 0,
        }),
    )
}

fn writes(net: &mut Net, qa: u32, qb: u32, n: u64, len: u32) -> Vec<Posted> {
    let op = Op {
        kind: OpKind::Write,
        len,
    };
    (0..n).map(|i| post(net, qa, qb, op, i)).collect()
}

fn finish_verified(net: &mut Net, posted: &[Posted]) {
    let limit = net.now() + Duration::from_millis(200);
    let (ok, seen) = run_to_completion(net, posted, limit);
    assert!(ok, "every write completes");
    check(net, posted, &seen).unwrap();
}

#[test]
fn keyed_transfer_is_byte_exact_and_every_packet_proves_the_key() {
    let (mut net, qa, qb) = keyed_pair(4, 7);
    let posted = writes(&mut net, qa, qb, 8, 256 * 1024);
    finish_verified(&mut net, &posted);
    for n in [A, B] {
        let s = net.nodes[n].ep.stats();
        assert_eq!(
            s.rx_bad_auth, 0,
            "node {n}: the peer's packets all prove the key"
        );
        assert!(s.rx_datagrams > 100);
    }
}

#[test]
fn forged_sacks_without_the_key_acknowledge_nothing() {
    let (mut net, qa, qb) = keyed_pair(2, 11);
    let posted = writes(&mut net, qa, qb, 4, 256 * 1024);
    net.run_until(net.now() + Duration::from_millis(5), |n| {
        n.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets >= 40
    });
    let first = net.first_psn(A, qa).unwrap();
    let sent = net.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets as u32;
    let cack = first.wrapping_add(sent - 1);
    // Untagged, tagged with a guessed key, tagged with A's own sending key (the wrong direction).
    let own = net.keys(A, qa).unwrap().tx;
    let forged = [
        sack_all(qa, cack),
        tagged(sack_all(qa, cack), &AuthKey::new([0x5A; 16])),
        tagged(sack_all(qa, cack), &own),
    ];
    let acked = net.nodes[A].ep.qp_stats(qa).unwrap().rx_sacks;
    for f in &forged {
        inject(&mut net, A, B, 0, f);
    }
    let s = net.nodes[A].ep.stats();
    assert_eq!(s.rx_bad_auth, 3, "each forgery is counted and dropped");
    assert_eq!(net.nodes[A].ep.qp_stats(qa).unwrap().rx_sacks, acked);
    finish_verified(&mut net, &posted);
}

#[test]
fn a_sack_that_proves_the_key_is_taken() {
    // The check is not a wall: the peer's key makes the same bytes acceptable (a stale cumulative point, so it
    // acknowledges nothing new and the transfer is unaffected).
    let (mut net, qa, qb) = keyed_pair(2, 12);
    let posted = writes(&mut net, qa, qb, 2, 64 * 1024);
    net.run_until(net.now() + Duration::from_millis(5), |n| {
        n.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets >= 4
    });
    let first = net.first_psn(A, qa).unwrap();
    let peer_key = net.keys(B, qb).unwrap().tx;
    let before = net.nodes[A].ep.stats().rx_bad_auth;
    inject(
        &mut net,
        A,
        B,
        0,
        &tagged(sack_all(qa, first.wrapping_sub(1)), &peer_key),
    );
    assert_eq!(net.nodes[A].ep.stats().rx_bad_auth, before);
    finish_verified(&mut net, &posted);
}

/// `write_only` with an AUTH tag made with `key` between its headers and its 64 payload bytes, sealed again.
fn tagged_write(plain: &[u8], key: &AuthKey) -> Vec<u8> {
    let hlen = plain.len() - 4 - 64;
    let mut pkt = plain[..hlen].to_vec();
    pkt.extend_from_slice(&[0; 8]);
    pkt.extend_from_slice(&plain[hlen..hlen + 64]);
    pkt.extend_from_slice(&[0; 4]);
    let n = key.seal_headers(&mut pkt, hlen).unwrap() + 64;
    let crc = icrc(&pkt[..n]);
    pkt[n..].copy_from_slice(&crc.to_be_bytes());
    pkt
}

/// A request carries the direction's request token (spec WIRE-AUTH-1); an attacker who knows the QPN, the next
/// PSN, the region and its key but not the token places nothing, whatever it tags the WRITE with: no tag, the
/// token of a guessed key, the token of the other direction, or the MAC of the WRITE's headers under the right
/// key (a request's tag is the token, not a MAC).
#[test]
fn forged_writes_without_the_request_token_place_nothing() {
    let (mut net, qa, qb) = keyed_pair(2, 13);
    let (dst, kd) = net.alloc_mr(B, 256, Access::REMOTE_WRITE);
    let psn = net.first_psn(A, qa).unwrap();
    let genuine = net.keys(A, qa).unwrap().tx;
    let other_direction = net.keys(B, qb).unwrap().tx;
    let plain = write_only(qb, psn, dst, kd.rkey, 64, &[0xEE; 64]);
    let mut mac = tagged_write(&plain, &genuine);
    let hlen = plain.len() - 4 - 64;
    let headers_mac = genuine.tag(&mac[..hlen]);
    mac[hlen..hlen + 8].copy_from_slice(&headers_mac);
    let crc_at = mac.len() - 4;
    let crc = icrc(&mac[..crc_at]);
    mac[crc_at..].copy_from_slice(&crc.to_be_bytes());
    let forged = [
        plain.clone(),
        tagged_write(&plain, &AuthKey::new([0x5A; 16])),
        tagged_write(&plain, &other_direction),
        mac,
    ];
    for f in &forged {
        inject(&mut net, B, A, 0, f);
    }
    assert_eq!(
        net.nodes[B].ep.stats().rx_bad_auth,
        4,
        "each forgery is counted and dropped"
    );
    assert_eq!(net.nodes[B].ep.qp_stats(qb).unwrap().rx_data_packets, 0);
    assert!(
        net.nodes[B].mem.slice(dst, 64).iter().all(|&b| b == 0),
        "nothing placed"
    );
    // The genuine requester's token makes the same WRITE acceptable.
    inject(&mut net, B, A, 0, &tagged_write(&plain, &genuine));
    assert_eq!(net.nodes[B].ep.stats().rx_bad_auth, 4);
    assert_eq!(net.nodes[B].mem.slice(dst, 64), &[0xEE; 64]);
}

fn port_status(mask: u32) -> Vec<u8> {
    forge(
        Opcode::EpRequest,
        EP_QPN,
        0,
        Body::EpRequest(EpRequest {
            op: EpOp::PortStatus,
            req_id: 77,
            port_mask: mask,
            ev: 0,
            ts: None,
        }),
    )
}

#[test]
fn forged_port_status_to_a_keyed_peer_masks_nothing() {
    let (mut net, qa, qb) = keyed_pair(4, 13);
    inject(&mut net, A, B, 0, &port_status(0b0001));
    let s = net.nodes[A].ep.stats();
    assert_eq!(
        (s.rx_bad_auth, s.rx_ep_requests),
        (1, 0),
        "dropped unanswered"
    );
    let posted = writes(&mut net, qa, qb, 8, 256 * 1024);
    finish_verified(&mut net, &posted);
    for plane in 1..4 {
        let p = net.nodes[A].ep.plane_stats(qa, plane).unwrap();
        assert!(p.tx_packets > 0, "plane {plane} carried data");
    }
}

#[test]
fn a_plane_the_peer_reported_down_is_probed_and_comes_back_when_it_delivers() {
    // An unkeyed pair takes the report (spec SEC-AUTH-2 only binds keyed peers); the mask must still expire.
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 17, &qp_config(2));
    inject(&mut net, A, B, 0, &port_status(0b01));
    assert_eq!(net.nodes[A].ep.stats().rx_ep_requests, 1, "taken");
    let posted = writes(&mut net, qa, qb, 16, 256 * 1024);
    finish_verified(&mut net, &posted);
    let p1 = net.nodes[A].ep.plane_stats(qa, 1).unwrap();
    let p0 = net.nodes[A].ep.plane_stats(qa, 0).unwrap();
    assert!(
        p1.tx_packets * 4 > p0.tx_packets,
        "plane 1 back in service: {} packets against plane 0's {}",
        p1.tx_packets,
        p0.tx_packets
    );
}
