//! The server side of `mrc-perf`: one client at a time, each refused by name when its hello is wrong.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use mrc::{Completion, WcStatus};
use mrc_host::NodeConfig;

use super::oob::{Answer, Channel, Ctl, Hello};
use super::report::{Report, ReportHead, SizeResult, finish_report};
use super::run::{
    Failure, Side, bw, connect, hash_slots, hello_of, node_config, params, post, post_recv, setup,
};
use super::{Mode, Options, Test};

/// How long a client may take to send its hello before the server drops it and waits for another.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server stopped serving a client.
enum Refusal {
    /// The client asked for something invalid: it was told why, and the server waits for the next one.
    Refused(String),
    /// The test itself failed: the server reports it and exits.
    Failed(Failure),
}

impl From<Failure> for Refusal {
    fn from(f: Failure) -> Self {
        Refusal::Failed(f)
    }
}

impl From<io::Error> for Refusal {
    fn from(e: io::Error) -> Self {
        Refusal::Failed(e.into())
    }
}

/// Runs the server: waits for a client, serves its test, returns when the client is done. A client whose
/// hello or control messages are invalid is refused with the reason (it sees it, and so does the server's
/// stderr), and the server goes on waiting for the next one.
pub fn server(o: &Options) -> Result<Report, Failure> {
    o.validate().map_err(Failure::usage)?;
    let node = node_config(o)?;
    let listener = TcpListener::bind(("::", o.port))
        .map_err(|e| Failure::usage(format!("--port {}: {e}", o.port)))?;
    if !o.json {
        println!("mrc-perf server: waiting on TCP port {}", o.port);
    }
    loop {
        let (stream, from) = listener.accept()?;
        match serve(o, &node, stream, from) {
            Ok(report) => return Ok(report),
            Err(Refusal::Refused(reason)) => {
                eprintln!("mrc-perf server: refused client {from}: {reason}");
            }
            Err(Refusal::Failed(f)) => return Err(f),
        }
    }
}

/// Reads and checks a client's hello; a bad one is answered with the reason.
fn read_hello(ch: &mut Channel, planes: usize) -> Result<Hello, Refusal> {
    ch.stream().set_read_timeout(Some(HELLO_TIMEOUT))?;
    let hello = ch.recv::<Hello>().map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no hello within {} s", HELLO_TIMEOUT.as_secs())
        }
        _ => format!("bad hello: {e}"),
    });
    let hello = hello.and_then(|h| {
        h.check(planes)
            .map(|()| h)
            .map_err(|e| format!("hello: {e}"))
    });
    ch.stream().set_read_timeout(None)?;
    hello.map_err(|reason| {
        // The client may be gone already; the reason is in the server's log either way.
        let _ = ch.send(&Answer::Refused {
            refused: reason.clone(),
        });
        Refusal::Refused(reason)
    })
}

/// Refuses a control message during the test: tells the client and ends this test.
fn refuse_ctl(ch: &mut Channel, reason: String) -> Refusal {
    let _ = ch.send(&Ctl::Refused {
        reason: reason.clone(),
    });
    Refusal::Refused(reason)
}

fn serve(
    o: &Options,
    node: &NodeConfig,
    stream: TcpStream,
    from: std::net::SocketAddr,
) -> Result<Report, Refusal> {
    let mut ch = Channel::new(stream)?;
    let peer = read_hello(&mut ch, node.plane_count())?;
    let (so, mut side) = prepare(o, node, &mut ch, &peer)?;
    if !o.json {
        println!(
            "client {from}: {:?} {:?}, {} QPs, MTU {}",
            peer.test, peer.mode, peer.qps, peer.mtu
        );
    }
    let (size, received, verify) = run_test(&mut ch, &so, &mut side, &peer)?;
    if let Some((slots, len)) = verify {
        let hashes = hash_slots(&mut side, &slots, len);
        ch.send(&Ctl::Hash { hashes })?;
    }
    // Let the last acknowledgements leave before the sockets close.
    let end = Instant::now() + Duration::from_millis(50);
    while Instant::now() < end {
        side.step(Duration::from_millis(1))?;
    }
    let results = vec![SizeResult {
        size,
        messages: received,
        bytes: 0,
        seconds: 0.0,
        gbps: 0.0,
        mmsgs: 0.0,
        lat_us: None,
    }];
    let head = ReportHead {
        role: "server",
        test: peer.test,
        mode: peer.mode,
        qps: peer.qps,
        mtu: peer.mtu,
    };
    Ok(finish_report(&mut side, head, o, results, None)?)
}

/// The server's options for the client's test, and its side set up, answered and connected.
fn prepare(
    o: &Options,
    node: &NodeConfig,
    ch: &mut Channel,
    peer: &Hello,
) -> Result<(Options, Side), Refusal> {
    let mut so = o.clone();
    so.test = peer.test;
    so.mode = peer.mode;
    so.mtu = Some(peer.mtu);
    so.no_icrc = !peer.icrc;
    let mut p = params(
        &so,
        node,
        peer.test,
        peer.mode,
        peer.qps,
        peer.max_size,
        peer.evs,
    );
    p.slots = peer.slots;
    p.seed = 0x5a;
    let mut side = setup(&so, &p)?;
    ch.send(&Answer::Hello(Box::new(hello_of(
        &mut side, &so, &p, peer.test, peer.mode,
    ))))?;
    connect(&mut side, peer)?;
    Ok((so, side))
}

/// What the client asked the server to hash at the end: slots per QP and bytes per slot.
type Verify = Option<(Vec<usize>, u64)>;

/// Serves the test until the client's DONE: the last size, the messages received and what to hash.
fn run_test(
    ch: &mut Channel,
    so: &Options,
    side: &mut Side,
    peer: &Hello,
) -> Result<(u64, u64, Verify), Refusal> {
    let region = (
        side.region.addr,
        side.region.lkey,
        side.slots,
        side.max_size,
    );
    let needs_recv = peer.test != Test::Write || peer.mode == Mode::Lat;
    let recv_test = if peer.test == Test::Write {
        Test::WriteImm
    } else {
        peer.test
    };
    // A multiple of the slot count, so the n-th SEND always lands in the slot the client sent it from.
    let stock = if peer.mode == Mode::Lat {
        1
    } else {
        side.slots * (1024 / side.slots).max(1)
    };
    if needs_recv {
        for (q, qp) in side.qps.iter().enumerate() {
            for k in 0..stock {
                post_recv(qp, region, q, k, recv_test)?;
            }
        }
    }
    let mut size = peer.max_size;
    let mut wc = vec![Completion::default(); 256];
    let mut pongs = 0u64;
    let mut received = 0u64;
    loop {
        if let Some(verify) = on_ctl(ch, so, side, peer, &mut size)? {
            return Ok((size, received, verify));
        }
        let n = side.cq.poll(&mut wc);
        for c in &wc[..n] {
            if c.status != WcStatus::Success {
                return Err(Failure::test(format!(
                    "error completion {:?} on QP {:#x}",
                    c.status, c.qpn
                ))
                .into());
            }
            if !matches!(
                c.opcode,
                mrc::WcOpcode::Recv | mrc::WcOpcode::RecvRdmaWithImm
            ) {
                continue;
            }
            received += 1;
            let Some(q) = side.q_of(c.qpn) else {
                continue;
            };
            let qp = &side.qps[q];
            post_recv(qp, region, q, c.wr_id as usize, recv_test)?;
            if peer.mode == Mode::Lat {
                post(qp, region, q, 0, recv_test, size, &peer.region, pongs)?;
                pongs += 1;
            }
        }
        side.step(Duration::from_millis(1))?;
    }
}

/// Takes the client's next control message, if any: a new size (with the bidirectional run it starts), or
/// DONE with what to hash.
fn on_ctl(
    ch: &mut Channel,
    so: &Options,
    side: &mut Side,
    peer: &Hello,
    size: &mut u64,
) -> Result<Option<Verify>, Refusal> {
    match ch.try_recv::<Ctl>() {
        Ok(Some(Ctl::Size { size: s })) => {
            if !(1..=peer.max_size).contains(&s) {
                let why = format!("size {s}: use 1..={} (the hello's max_size)", peer.max_size);
                return Err(refuse_ctl(ch, why));
            }
            *size = s;
            if let Some(b) = peer.bidir {
                let back = Options {
                    depth: b.depth,
                    duration: b.duration,
                    bytes: b.bytes,
                    interval_ms: 0,
                    ..so.clone()
                };
                let r = bw(&back, side, &peer.region, s, Instant::now(), None)?;
                ch.send(&Ctl::Sent {
                    bytes: r.bytes,
                    seconds: r.seconds,
                })?;
            }
            Ok(None)
        }
        Ok(Some(Ctl::Done {
            verify: v,
            slots,
            len,
        })) => {
            if slots.len() != side.qps.len()
                || slots.iter().any(|&k| k > side.slots)
                || len > side.max_size
            {
                let why = format!(
                    "done: {} slot counts (each at most {}) and len {len} (at most {}) do not fit the test",
                    slots.len(),
                    side.slots,
                    side.max_size
                );
                return Err(refuse_ctl(ch, why));
            }
            Ok(Some(v.then_some((slots, len))))
        }
        Ok(Some(Ctl::Hash { .. } | Ctl::Sent { .. } | Ctl::Refused { .. })) | Ok(None) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            Err(refuse_ctl(ch, format!("bad control message: {e}")))
        }
        Err(e) => Err(Failure::test(format!("client went away: {e}")).into()),
    }
}
