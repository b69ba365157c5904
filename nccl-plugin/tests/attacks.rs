//! Finding 7 of issue 22, as NCCL (or anything in its process) would trip it through the exported table: a
//! handle rewritten to name another connection, requests of a closed comm, closes and deregistrations of the
//! wrong kind, an oversize registration. Each is refused with an error code (spec NCCL-CONN-2, NCCL-HANDLE-1)
//! and fails on the code before the fix (commit 7220f85). Uses loopback UDP (run under the network lock).

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use nccl_net_mrc::abi::{NET_HANDLE_MAXSIZE, PTR_HOST, result::SUCCESS};
use nccl_net_mrc::ncclNetPlugin_v8 as N;

const LIMIT: Duration = Duration::from_secs(30);

fn init() {
    // SAFETY: the table's init, with no logger.
    assert_eq!(unsafe { N.init.unwrap()(None) }, SUCCESS);
}

fn listen() -> ([u8; NET_HANDLE_MAXSIZE], *mut c_void) {
    let mut h = [0u8; NET_HANDLE_MAXSIZE];
    let mut l = null_mut();
    // SAFETY: a handle of NET_HANDLE_MAXSIZE bytes and an out-parameter.
    let rc = unsafe { N.listen.unwrap()(0, h.as_mut_ptr().cast(), &mut l) };
    assert_eq!(rc, SUCCESS);
    (h, l)
}

fn connect(h: &mut [u8; NET_HANDLE_MAXSIZE]) -> (c_int, *mut c_void) {
    let mut s = null_mut();
    let mut dev = null_mut();
    // SAFETY: as above.
    let rc = unsafe { N.connect.unwrap()(0, h.as_mut_ptr().cast(), &mut s, &mut dev) };
    (rc, s)
}

/// A connected send comm and receive comm of this process.
fn pair() -> (*mut c_void, *mut c_void, *mut c_void) {
    init();
    let (mut h, l) = listen();
    let (mut s, mut r): (*mut c_void, *mut c_void) = (null_mut(), null_mut());
    let start = Instant::now();
    while s.is_null() || r.is_null() {
        assert!(start.elapsed() < LIMIT, "no connection");
        if s.is_null() {
            let (rc, c) = connect(&mut h);
            assert_eq!(rc, SUCCESS);
            s = c;
        }
        if r.is_null() {
            let mut dev = null_mut();
            // SAFETY: the listen comm and out-parameters.
            let rc = unsafe { N.accept.unwrap()(l, &mut r, &mut dev) };
            assert_eq!(rc, SUCCESS);
        }
    }
    (s, r, l)
}

fn reg(comm: *mut c_void, buf: &mut [u8]) -> (c_int, *mut c_void) {
    let mut mh = null_mut();
    // SAFETY: memory of this test that outlives the registration.
    let rc =
        unsafe { N.regMr.unwrap()(comm, buf.as_mut_ptr().cast(), buf.len(), PTR_HOST, &mut mh) };
    (rc, mh)
}

#[test]
fn a_handle_rewritten_to_name_another_connection_takes_over_nothing() {
    init();
    let (mut h1, l1) = listen();
    let (h2, _l2) = listen();
    let (rc, s) = connect(&mut h1);
    assert_eq!(rc, SUCCESS);
    assert_eq!(h1[5], 1, "connect in progress");
    // h2 rewritten to the connecting state with h1's key, and with small keys a counter would have given.
    let mut keys: Vec<[u8; 8]> = (1..=8u64).map(u64::to_le_bytes).collect();
    keys.push(h1[8..16].try_into().unwrap());
    for k in keys {
        let mut forged = h2;
        forged[5] = 1;
        forged[8..16].copy_from_slice(&k);
        let (rc, c) = connect(&mut forged);
        assert_ne!(
            rc, SUCCESS,
            "a forged handle was taken for connection {k:?}"
        );
        assert!(c.is_null());
    }
    // The genuine connection still comes up.
    let (mut send, mut recv): (*mut c_void, *mut c_void) = (s, null_mut());
    let start = Instant::now();
    while send.is_null() || recv.is_null() {
        assert!(start.elapsed() < LIMIT);
        if send.is_null() {
            let (rc, c) = connect(&mut h1);
            assert_eq!(rc, SUCCESS);
            send = c;
        }
        if recv.is_null() {
            let mut dev = null_mut();
            // SAFETY: the listen comm and out-parameters.
            let rc = unsafe { N.accept.unwrap()(l1, &mut recv, &mut dev) };
            assert_eq!(rc, SUCCESS);
        }
    }
}

#[test]
fn closes_of_the_wrong_kind_are_refused() {
    let (s, r, _) = pair();
    // SAFETY: the table's close entry points, given live comms of the other kind.
    unsafe {
        assert_ne!(
            N.closeSend.unwrap()(r),
            SUCCESS,
            "closeSend of a receive comm"
        );
        assert_ne!(N.closeRecv.unwrap()(s), SUCCESS, "closeRecv of a send comm");
        assert_eq!(N.closeSend.unwrap()(s), SUCCESS);
        assert_eq!(N.closeRecv.unwrap()(r), SUCCESS);
        assert_ne!(N.closeRecv.unwrap()(r), SUCCESS, "a second close");
    }
}

#[test]
fn an_oversize_registration_is_refused() {
    let (s, _r, _) = pair();
    let mut buf = vec![0u8; 4096];
    let mut mh = null_mut();
    // SAFETY: the size lies (2^62 bytes): what is checked is that the plugin refuses it.
    let rc = unsafe { N.regMr.unwrap()(s, buf.as_mut_ptr().cast(), 1 << 62, PTR_HOST, &mut mh) };
    assert_ne!(rc, SUCCESS, "regMr of 2^62 bytes");
    let (rc, mh) = reg(s, &mut buf);
    assert_eq!(rc, SUCCESS);
    // SAFETY: the handle just registered through `s`.
    assert_eq!(unsafe { N.deregMr.unwrap()(s, mh) }, SUCCESS);
}

#[test]
fn deregistration_through_another_comm_is_refused() {
    let (s, r, _) = pair();
    let mut buf = vec![0u8; 4096];
    let (rc, mh) = reg(s, &mut buf);
    assert_eq!(rc, SUCCESS);
    // SAFETY: live comms and a live handle; the wrong pairing is what is checked.
    unsafe {
        assert_ne!(
            N.deregMr.unwrap()(r, mh),
            SUCCESS,
            "deregMr through the other comm"
        );
        assert_ne!(N.deregMr.unwrap()(s, s), SUCCESS, "deregMr of a comm");
        assert_eq!(N.deregMr.unwrap()(s, mh), SUCCESS);
        assert_ne!(N.deregMr.unwrap()(s, mh), SUCCESS, "a second deregMr");
    }
}

#[test]
fn a_request_of_a_closed_comm_is_refused_unread() {
    let (_s, r, _) = pair();
    let mut buf = vec![0u8; 4096];
    let (rc, mh) = reg(r, &mut buf);
    assert_eq!(rc, SUCCESS);
    let mut data = [buf.as_mut_ptr().cast::<c_void>()];
    let mut sizes = [4096 as c_int];
    let mut tags = [7 as c_int];
    let mut mhs = [mh];
    let mut req = null_mut();
    // SAFETY: one-element arrays and an out-parameter.
    let rc = unsafe {
        N.irecv.unwrap()(
            r,
            1,
            data.as_mut_ptr(),
            sizes.as_mut_ptr(),
            tags.as_mut_ptr(),
            mhs.as_mut_ptr(),
            &mut req,
        )
    };
    assert_eq!(rc, SUCCESS);
    assert!(!req.is_null());
    let mut done = 0;
    // SAFETY: a live request.
    let rc = unsafe { N.test.unwrap()(req, &mut done, null_mut()) };
    assert_eq!(rc, SUCCESS);
    // SAFETY: the registration, then the comm.
    unsafe {
        assert_eq!(N.deregMr.unwrap()(r, mh), SUCCESS);
        assert_eq!(N.closeRecv.unwrap()(r), SUCCESS);
    }
    // SAFETY: what is checked: the plugin refuses the dangling request without reading it.
    let rc = unsafe { N.test.unwrap()(req, &mut done, null_mut()) };
    assert_ne!(rc, SUCCESS);
}
