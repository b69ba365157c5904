//! Socket addresses in and out of their C form, and the control-message room: what the socket and both
//! batches share.
#![allow(unsafe_code, reason = "an all-zero C socket address")]

use std::mem::zeroed;
use std::net::{Ipv6Addr, SocketAddrV6};

/// Control-message room per datagram: one `int` (the traffic class) with its header.
pub(super) const CMSG_ROOM: usize = 32;

pub(super) fn sockaddr_from(a: &SocketAddrV6) -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
    let mut s: libc::sockaddr_in6 = unsafe { zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_port = a.port().to_be();
    s.sin6_addr.s6_addr = a.ip().octets();
    s.sin6_flowinfo = a.flowinfo();
    s.sin6_scope_id = a.scope_id();
    s
}

pub(super) fn sockaddr_to(s: &libc::sockaddr_in6) -> SocketAddrV6 {
    SocketAddrV6::new(
        Ipv6Addr::from(s.sin6_addr.s6_addr),
        u16::from_be(s.sin6_port),
        s.sin6_flowinfo,
        s.sin6_scope_id,
    )
}
