//! One plane's UDP socket: batched `sendmmsg`/`recvmmsg`, the traffic class both ways, and the ICMP error
//! queue. Raw `libc` because we need what portable wrappers hide: the whole traffic class (the DSCP carries
//! the trim mark, not just ECN), `MSG_ERRQUEUE`, and Linux's zero-checksum UDP mode.
#![allow(unsafe_code, reason = "socket system calls and their C structures")]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

mod addr;
mod rx;
mod tx;

pub use rx::RxBatch;
pub use tx::TxBatch;

use addr::{sockaddr_from, sockaddr_to};

/// Linux `UDP_NO_CHECK6_TX`: send IPv6 UDP with a zero checksum.
const UDP_NO_CHECK6_TX: libc::c_int = 101;
/// Linux `UDP_NO_CHECK6_RX`: accept IPv6 UDP with a zero checksum.
const UDP_NO_CHECK6_RX: libc::c_int = 102;
fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed alongside.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A non-blocking IPv6 UDP socket bound to one plane's address.
#[derive(Debug)]
pub(crate) struct PlaneSocket {
    fd: OwnedFd,
    local: SocketAddrV6,
}

/// What the ICMP error queue said about a datagram we sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendError {
    /// Where the datagram was going.
    pub dest: SocketAddrV6,
    /// The error (`ENETUNREACH`, `EHOSTUNREACH`, ...).
    pub errno: i32,
    /// The router that reported it, if any.
    pub offender: Option<Ipv6Addr>,
    /// The start of the datagram's UDP payload.
    pub payload: Vec<u8>,
}

impl PlaneSocket {
    /// Binds to `addr` (port 0: any free port). `zero_checksum` turns on Linux's zero-checksum IPv6 UDP both
    /// ways, needed on SRv6 paths where every hop rewrites the destination inside the checksum's
    /// pseudo-header; MRC's own ICRC protects the packet instead.
    pub(crate) fn bind(
        addr: SocketAddrV6,
        zero_checksum: bool,
        buffer_bytes: usize,
    ) -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET6,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)?;
        if zero_checksum {
            setsockopt_int(raw, libc::IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)?;
            setsockopt_int(raw, libc::IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)?;
        }
        let bytes = buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            // FORCE needs CAP_NET_ADMIN; without it the plain option is capped by the sysctl.
            if setsockopt_int(raw, libc::SOL_SOCKET, force, bytes).is_err() {
                setsockopt_int(raw, libc::SOL_SOCKET, plain, bytes)?;
            }
        }
        let sa = sockaddr_from(&addr);
        // SAFETY: `sa` is a valid sockaddr_in6 of the size passed.
        let r = unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("bind {addr}: {e}")));
        }
        // SAFETY: all-zero is a valid sockaddr_in6; getsockname writes at most `len` bytes.
        let mut out: libc::sockaddr_in6 = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        // SAFETY: `out` and `len` are valid for writes.
        let r = unsafe {
            libc::getsockname(raw, (&mut out as *mut libc::sockaddr_in6).cast(), &mut len)
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd,
            local: sockaddr_to(&out),
        })
    }

    /// The bound address, with the real port.
    pub(crate) fn local_addr(&self) -> SocketAddrV6 {
        self.local
    }

    /// Turns on receive offload (`UDP_GRO`): the kernel may hand over consecutive datagrams of one flow as one
    /// message, which [`RxBatch`] cuts back into them.
    pub(crate) fn receive_trains(&self) -> io::Result<()> {
        setsockopt_int(self.fd.as_raw_fd(), libc::SOL_UDP, rx::UDP_GRO, 1)
    }

    /// The receive buffer the kernel granted, as `SO_RCVBUF` reports it (twice the bytes asked for: the kernel
    /// counts its own overhead in it).
    pub(crate) fn receive_buffer(&self) -> io::Result<usize> {
        let mut v: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` outlive the call and `len` is `v`'s size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            Ok(v.max(0) as usize)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sends `batch[from..]` (`from` starting a message) with one `sendmmsg`. Returns how many datagrams went
    /// out; `WouldBlock` when none did because the socket buffer is full; another error concerns the first unsent
    /// message only (one datagram, or a train: [`TxBatch::message_len`]).
    pub(crate) fn send(&self, batch: &mut TxBatch, from: usize) -> io::Result<usize> {
        let n = batch.len - from.min(batch.len);
        if n == 0 {
            return Ok(0);
        }
        let messages = batch.prepare(from, n);
        // SAFETY: `prepare` pointed every header at buffers owned by `batch`, which outlives the call and is
        // not touched meanwhile, and at lent payloads, which `push_lent`'s contract keeps valid.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                messages as libc::c_uint,
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            // Messages sent, counted in datagrams.
            Ok(batch.msg_datagrams[..r as usize].iter().sum())
        }
    }

    /// Receives up to `batch.capacity()` datagrams with one `recvmmsg`. `Ok(0)` when none is waiting.
    pub(crate) fn recv(&self, batch: &mut RxBatch) -> io::Result<usize> {
        batch.prepare();
        // SAFETY: every header points at buffers owned by `batch`, valid for the sizes recorded in them.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                batch.hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                batch.clear();
                Ok(0)
            } else {
                Err(e)
            };
        }
        batch.finish(r as usize);
        Ok(batch.len())
    }

    /// Takes one entry off the socket's error queue (ICMP unreachable and local send errors).
    pub(crate) fn recv_error(&self) -> io::Result<Option<SendError>> {
        let mut payload = [0u8; 256];
        let mut ctrl = [0u64; 64];
        // SAFETY: all-zero is valid for these C structures.
        let mut name: libc::sockaddr_in6 = unsafe { zeroed() };
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 64]>();
        // SAFETY: every pointer in `msg` refers to a live local buffer of the recorded size.
        let r = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        let mut errno = 0;
        let mut offender = None;
        // SAFETY: the kernel filled `msg_controllen` bytes of `ctrl` with well-formed control messages; the
        // CMSG_* macros walk them within that length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR {
                    let ee = libc::CMSG_DATA(c)
                        .cast::<libc::sock_extended_err>()
                        .read_unaligned();
                    errno = ee.ee_errno as i32;
                    let off = libc::SO_EE_OFFENDER(libc::CMSG_DATA(c).cast());
                    let off = off.cast::<libc::sockaddr_in6>().read_unaligned();
                    if off.sin6_family == libc::AF_INET6 as libc::sa_family_t {
                        offender = Some(Ipv6Addr::from(off.sin6_addr.s6_addr));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let n = (r as usize).min(payload.len());
        Ok(Some(SendError {
            dest: sockaddr_to(&name),
            errno,
            offender,
            payload: payload[..n].to_vec(),
        }))
    }
}

impl AsRawFd for PlaneSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An eventfd: a counter the kernel makes readable while it is not zero. Wakes a sleeping progress thread (the
/// doorbell) and makes completion channels and the async-event queue pollable.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    /// A new non-blocking eventfd at zero.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Adds one: readable now. A full counter (2^64 − 2) is left alone: it is readable anyway.
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reads and clears the counter; 0 when it was zero.
    pub(crate) fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let r = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if r == 8 { v } else { 0 }
    }

    /// The descriptor, for poll/epoll.
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable (or has an error queued, or is writable where `want_write` says so), or
/// until `timeout` passes (`None`: forever). Returns whether anything is ready.
pub(crate) fn wait(
    fds: &[RawFd],
    want_write: &[bool],
    timeout: Option<std::time::Duration>,
) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .enumerate()
        .map(|(i, &fd)| libc::pollfd {
            fd,
            events: libc::POLLIN
                | if want_write.get(i).copied().unwrap_or(false) {
                    libc::POLLOUT
                } else {
                    0
                },
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` and `tsp` are valid for the duration of the call; no signal mask is passed.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receives `n` datagrams on `sock` (waiting up to a second), each mapped by `f`.
    fn receive<T>(
        sock: &PlaneSocket,
        n: usize,
        f: impl Fn((&[u8], SocketAddrV6, u8, bool)) -> T,
    ) -> Vec<T> {
        let mut rx = RxBatch::new(8, 2048);
        let mut got = Vec::new();
        for _ in 0..100 {
            let k = sock.recv(&mut rx).unwrap();
            got.extend((0..k).map(|i| f(rx.get(i))));
            if got.len() >= n {
                break;
            }
            wait(
                &[sock.as_raw_fd()],
                &[],
                Some(std::time::Duration::from_millis(10)),
            )
            .unwrap();
        }
        got
    }

    #[test]
    fn loopback_batch_carries_payload_and_traffic_class() {
        let any = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0);
        let a = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let b = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let mut tx = TxBatch::new(4, 2048);
        let mut buf = vec![0u8; 2048];
        for (i, tc) in [(0u8, 0x1cu8), (1, 0xb8), (2, 0x28)] {
            buf[..3].copy_from_slice(&[i, i, i]);
            assert!(tx.push(&mut buf, 3 + usize::from(i), b.local_addr(), tc));
        }
        assert_eq!(a.send(&mut tx, 0).unwrap(), 3);
        let got: Vec<_> = receive(&b, 3, |(p, src, tc, cut)| (p.len(), p[0], src, tc, cut));
        assert_eq!(
            got,
            vec![
                (3, 0, a.local_addr(), 0x1c, false),
                (4, 1, a.local_addr(), 0xb8, false),
                (5, 2, a.local_addr(), 0x28, false)
            ]
        );
    }

    /// Segmentation offload: datagrams to one destination with one class and one length (the last shorter) leave
    /// as one train, another destination or class starts a new one, and a receiver with `UDP_GRO` gets every
    /// datagram back whole, in order, byte for byte.
    #[test]
    #[allow(unsafe_code, reason = "push_lent takes a raw payload pointer")]
    fn trains_leave_in_one_message_and_arrive_as_their_datagrams() {
        let any = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0);
        let a = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let (b, c) = (
            PlaneSocket::bind(any, false, 1 << 20).unwrap(),
            PlaneSocket::bind(any, false, 1 << 20).unwrap(),
        );
        b.receive_trains().unwrap();
        let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
        let mut tx = TxBatch::new(16, 2048).with_segmentation(true);
        let mut buf = vec![0u8; 2048];
        // Five datagrams to b: four of 1006 bytes (3 header, 1000 lent, 3 trailer), the last of 506.
        for k in 0..5u8 {
            buf[..6].copy_from_slice(&[k, k, k, 0xee, 0xee, 0xee]);
            let n = if k == 4 { 500 } else { 1000 };
            let lent = payload[usize::from(k) * 100..].as_ptr();
            // SAFETY: `payload` outlives the batch's use of it below.
            assert!(unsafe { tx.push_lent(&mut buf, 6, b.local_addr(), 0, (3, lent, n)) });
        }
        // Then one to c, one to b with another class, one to b again.
        for (dest, tc) in [
            (c.local_addr(), 0),
            (b.local_addr(), 0x1c),
            (b.local_addr(), 0),
        ] {
            buf[..6].copy_from_slice(&[9; 6]);
            assert!(tx.push(&mut buf, 6, dest, tc));
        }
        assert_eq!(
            (0..tx.len()).map(|i| tx.message_len(i)).collect::<Vec<_>>(),
            [5, 4, 3, 2, 1, 1, 1, 1],
            "one train of five, then single datagrams"
        );
        assert_eq!(a.send(&mut tx, 0).unwrap(), 8);
        let mut rx = RxBatch::new(8, 1 << 16);
        wait(
            &[b.as_raw_fd()],
            &[],
            Some(std::time::Duration::from_secs(1)),
        )
        .unwrap();
        assert_eq!(
            b.recv(&mut rx).unwrap(),
            7,
            "five datagrams of the train and two singles"
        );
        assert_eq!(rx.msgs, 3, "the train arrived as one message");
        let got: Vec<Vec<u8>> = (0..7).map(|i| rx.get(i).0.to_vec()).collect();
        for (k, d) in got.iter().take(5).enumerate() {
            let n = if k == 4 { 500 } else { 1000 };
            let mut want = vec![k as u8; 3];
            want.extend_from_slice(&payload[k * 100..k * 100 + n]);
            want.extend_from_slice(&[0xee; 3]);
            assert_eq!(d, &want, "datagram {k} of the train");
        }
        assert_eq!(receive(&c, 1, |(p, ..)| p.len()), [6]);
    }

    #[test]
    #[allow(unsafe_code, reason = "push_lent takes a raw payload pointer")]
    fn lent_payloads_are_gathered_and_materialized() {
        let any = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0);
        let a = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let b = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut tx = TxBatch::new(4, 2048);
        let mut buf = vec![0u8; 2048];
        // Headers "HH", payload elsewhere, trailer "TTTT".
        buf[..6].copy_from_slice(b"HHTTTT");
        for _ in 0..2 {
            // SAFETY: `payload` outlives the batch's use of it below.
            assert!(unsafe {
                tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 1000))
            });
            buf[..6].copy_from_slice(b"HHTTTT");
        }
        // Dropping the first keeps the second's lent payload with it; it goes out gathered from three places.
        tx.consume(1);
        assert_eq!(a.send(&mut tx, 0).unwrap(), 1);
        tx.consume(1);
        // A materialized datagram holds its payload and no longer needs the memory.
        // SAFETY: as above.
        assert!(unsafe {
            tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 1000))
        });
        tx.materialize();
        assert_eq!(tx.payload(0).len(), 1006);
        assert_eq!(a.send(&mut tx, 0).unwrap(), 1);
        // Too long for a slot: refused.
        // SAFETY: as above; refused, so never used.
        assert!(!unsafe {
            tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 2043))
        });
        let want = [&b"HH"[..], &payload, b"TTTT"].concat();
        let got = receive(&b, 2, |(p, ..)| p.to_vec());
        assert_eq!(got, vec![want.clone(), want]);
    }

    #[test]
    fn consume_keeps_the_rest_in_order() {
        let d = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0);
        let mut tx = TxBatch::new(4, 16);
        let mut buf = vec![0u8; 16];
        for i in 0..4u8 {
            buf[0] = i;
            assert!(tx.push(&mut buf, 1, d, i));
        }
        assert!(tx.is_full());
        assert!(!tx.push(&mut buf, 1, d, 9));
        tx.consume(3);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx.payload(0), &[3]);
    }
}
