//! Helpers shared by the integration tests that touch network namespaces.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::fs::File;
use std::os::fd::AsRawFd;

/// Namespaces, nft and tc need root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `f` on a helper thread that has entered namespace `ns`; sockets it opens stay in that namespace.
pub(crate) fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let h = File::open(format!("/run/netns/{ns}")).expect("open netns");
    std::thread::spawn(move || {
        // SAFETY: setns(2) on a descriptor owned by `h`, alive for the call; it moves only this helper thread.
        let r = unsafe { libc::setns(h.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}

/// An off-path attacker that spoofs a peer: a raw IPv6 socket bound to the peer's address, sending UDP datagrams
/// with the peer's source port (root only). Open it on a thread inside the namespace that holds the address.
pub(crate) struct Spoofer(std::os::fd::OwnedFd);

impl Spoofer {
    /// A raw UDP socket whose datagrams leave from `src`.
    pub(crate) fn bound_to(src: std::net::Ipv6Addr) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: socket(2) with constant arguments; the descriptor is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_UDP) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // The kernel fills in the UDP checksum (offset 6 of what we send).
        let offset: libc::c_int = 6;
        // SAFETY: setsockopt(2) on an open descriptor with a pointer to a live c_int of the given size.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_CHECKSUM,
                (&offset as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let sa = sockaddr(src, 0);
        // SAFETY: bind(2) with a sockaddr_in6 of its own size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self(fd))
    }

    /// Sends `payload` to `to` from port `from_port` of the bound address.
    pub(crate) fn send(
        &self,
        from_port: u16,
        to: std::net::SocketAddrV6,
        payload: &[u8],
    ) -> std::io::Result<()> {
        let len = (8 + payload.len()) as u16;
        let mut d = Vec::with_capacity(usize::from(len));
        d.extend_from_slice(&from_port.to_be_bytes());
        d.extend_from_slice(&to.port().to_be_bytes());
        d.extend_from_slice(&len.to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(payload);
        let sa = sockaddr(*to.ip(), 0);
        // SAFETY: sendto(2) with a live buffer of `d.len()` bytes and a sockaddr_in6 of its own size.
        let n = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
                d.as_ptr().cast(),
                d.len(),
                0,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        if n != d.len() as isize {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

fn sockaddr(ip: std::net::Ipv6Addr, port: u16) -> libc::sockaddr_in6 {
    // SAFETY: an all-zero sockaddr_in6 is valid; the fields set below complete it.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = port.to_be();
    sa.sin6_addr.s6_addr = ip.octets();
    sa
}
