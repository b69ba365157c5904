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
