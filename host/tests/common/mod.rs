//! Helpers shared by the host's integration tests, for hosts over any plane I/O.
#![allow(dead_code, reason = "each test binary uses a subset")]

use std::time::{Duration, Instant};

use mrc_host::{Blob, Host, Link, PlaneIo};

/// A bound on waiting loops so a broken build fails instead of hanging; no assertion is about time.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// Connects a link of `qps` QPs from `a` to a listener on `b` (bootstrap datagrams in band), exchanging app
/// data both ways; runs progress rounds itself, so it works in every progress mode.
pub(crate) fn link<P: PlaneIo>(a: &Host<P>, b: &Host<P>, qps: usize) -> (Link<P>, Link<P>) {
    let mut l = b.listen().unwrap();
    let blob = l.blob();
    assert!(blob.len() <= Blob::MAX_LEN);
    let mut c = a.connect(&blob, qps, b"from a").unwrap();
    let start = Instant::now();
    let (mut la, mut lb) = (None, None);
    while la.is_none() || lb.is_none() {
        assert!(start.elapsed() < LIMIT, "bootstrap did not finish");
        if lb.is_none()
            && let Some((link, app)) = l.poll_accept(b"from b").unwrap()
        {
            assert_eq!(app, b"from a");
            lb = Some(link);
        }
        if la.is_none()
            && let Some((link, app)) = c.poll().unwrap()
        {
            assert_eq!(app, b"from b");
            la = Some(link);
        }
        for h in [a, b] {
            h.progress().unwrap();
        }
    }
    (la.unwrap(), lb.unwrap())
}

/// One signaled WRITE of `len` patterned bytes from `a` to fresh memory on `b` over `qp` (a QP of `a`
/// connected to `b`, completing on `send_cq`); drives both hosts until it completes, then checks every byte.
pub(crate) fn write_and_check<P: PlaneIo>(
    a: &Host<P>,
    b: &Host<P>,
    qp: &mrc_host::Qp<P>,
    send_cq: &mrc_host::Cq,
    len: usize,
) {
    use mrc::{Access, SendOp, Sge, WcStatus};
    let mut src: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
    let mut dst = vec![0u8; len];
    // SAFETY: both vectors outlive their registrations (deregistered below before they drop).
    let (ms, md) = unsafe {
        (
            a.reg_mr(a.default_pd(), src.as_mut_ptr(), len, Access::LOCAL_WRITE)
                .unwrap(),
            b.reg_mr(b.default_pd(), dst.as_mut_ptr(), len, Access::REMOTE_WRITE)
                .unwrap(),
        )
    };
    let sges = [Sge {
        addr: ms.addr,
        len: len as u32,
        lkey: ms.lkey,
    }];
    qp.post_send(&mrc_host::SendRequest {
        wr_id: 1,
        op: SendOp::Write {
            remote_addr: md.addr,
            rkey: md.rkey,
        },
        sges: &sges,
        inline: None,
        signaled: true,
        solicited: false,
        fence: false,
    })
    .unwrap();
    let start = Instant::now();
    let mut out = [mrc::Completion::default(); 1];
    while send_cq.poll(&mut out) == 0 {
        assert!(start.elapsed() < LIMIT, "no completion");
        a.progress().unwrap();
        b.progress().unwrap();
    }
    assert_eq!(out[0].status, WcStatus::Success);
    b.dereg_mr(&md).unwrap();
    a.dereg_mr(&ms).unwrap();
    assert_eq!(dst, src, "every byte placed");
}
