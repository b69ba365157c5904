//! `mrc-blast`: raw per-packet UDP over the fabric (sendmmsg / recvmmsg, no UDP checksums), to measure the
//! forwarding ceiling that MRC runs against. Destinations come from [`NodeConfig::destination`], so the blast
//! sprays over exactly the paths MRC uses.

use std::io;
use std::mem;
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mrc_host::{NodeConfig, PeerPlane};
use serde::Serialize;

/// `UDP_NO_CHECK6_TX`: send IPv6 UDP with checksum 0 (every uN hop rewrites the destination address, which the
/// pseudo-header covers, so a real checksum would be wrong at the receiver).
pub const UDP_NO_CHECK6_TX: libc::c_int = 101;
/// `UDP_NO_CHECK6_RX`: accept IPv6 UDP with checksum 0.
pub const UDP_NO_CHECK6_RX: libc::c_int = 102;

/// A `sockaddr_in6` for `a`.
pub fn sockaddr(a: &SocketAddrV6) -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain old data; all-zero is a valid value.
    let mut s: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_port = a.port().to_be();
    s.sin6_flowinfo = a.flowinfo();
    s.sin6_addr.s6_addr = a.ip().octets();
    s.sin6_scope_id = a.scope_id();
    s
}

fn setopt(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) -> io::Result<()> {
    // SAFETY: `val` lives across the call and the length matches its type; `fd` is an open socket.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&val as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `UDP_SEGMENT` (level `SOL_UDP`): the size of the datagrams a message is cut into.
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` (level `SOL_UDP`): coalesced receives; as a control message, the datagrams' size.
const UDP_GRO: libc::c_int = 104;

/// An IPv6 UDP socket bound to `bind`, without UDP checksums in either direction, with big buffers.
pub fn udp_socket(bind: &SocketAddrV6) -> io::Result<OwnedFd> {
    udp_socket_opts(bind, false, false)
}

/// [`udp_socket`], optionally with `IPV6_RECVPKTINFO` (each datagram's destination address), and optionally
/// sending with UDP checksums (`trains`: the kernel segments only checksummed messages).
pub fn udp_socket_opts(bind: &SocketAddrV6, pktinfo: bool, trains: bool) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let big = 32 << 20;
    if setopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, big).is_err() {
        setopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, big)?;
    }
    if setopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, big).is_err() {
        setopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, big)?;
    }
    if !trains {
        setopt(&fd, libc::SOL_UDP, UDP_NO_CHECK6_TX, 1)?;
    }
    setopt(&fd, libc::SOL_UDP, UDP_NO_CHECK6_RX, 1)?;
    // Coalesced receives, cut back into datagrams by the size the kernel reports.
    setopt(&fd, libc::SOL_UDP, UDP_GRO, 1)?;
    if pktinfo {
        setopt(&fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
    }
    let sa = sockaddr(bind);
    // SAFETY: `sa` is a valid sockaddr_in6 and the length is its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in6).cast(),
            size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("bind {bind}: {e}")));
    }
    Ok(fd)
}

/// Sends `payload` once to each of `dests` with one sendmmsg; returns how many messages went out. With
/// `segment`, each message is a train the kernel cuts into datagrams of that size (`UDP_SEGMENT`).
pub fn send_batch(
    fd: &OwnedFd,
    dests: &[libc::sockaddr_in6],
    payload: &[u8],
    segment: Option<u16>,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut ctrl = [0u64; 4];
    // SAFETY: mmsghdr is plain old data; all-zero is valid (no control data, no flags).
    let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { mem::zeroed() }; dests.len()];
    for (m, d) in msgs.iter_mut().zip(dests) {
        m.msg_hdr.msg_name = d as *const libc::sockaddr_in6 as *mut libc::c_void;
        m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        m.msg_hdr.msg_iov = &mut iov;
        m.msg_hdr.msg_iovlen = 1;
    }
    if let Some(seg) = segment {
        // Every message shares one control message: the segment size.
        // SAFETY: CMSG_SPACE/CMSG_LEN are arithmetic; `ctrl` (32 bytes) holds one u16 control message, written
        // through CMSG_FIRSTHDR/CMSG_DATA inside it; the kernel only reads it, and it outlives the call.
        unsafe {
            let space = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
            let mut h: libc::msghdr = mem::zeroed();
            h.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_controllen = space;
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
            libc::CMSG_DATA(c).cast::<u16>().write_unaligned(seg);
            for m in &mut msgs {
                m.msg_hdr.msg_control = ctrl.as_mut_ptr().cast();
                m.msg_hdr.msg_controllen = space;
            }
        }
    }
    // SAFETY: every header points at a live sockaddr in `dests` and at `iov`, which points at `payload`; the kernel
    // only reads them, and all outlive the call.
    let n = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            msgs.len() as libc::c_uint,
            0,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Receive buffers for recvmmsg.
pub struct RecvBufs {
    bufs: Vec<Vec<u8>>,
    ctrl: Vec<[u64; 16]>,
}

impl RecvBufs {
    /// `n` buffers of 64 KiB.
    pub fn new(n: usize) -> Self {
        Self {
            bufs: vec![vec![0u8; 65536]; n],
            ctrl: vec![[0u64; 16]; n],
        }
    }

    /// One non-blocking recvmmsg; returns each datagram's length and, where the socket has `IPV6_RECVPKTINFO`,
    /// its destination address (empty when nothing is queued).
    pub fn recv(
        &mut self,
        fd: &OwnedFd,
        lens: &mut Vec<(usize, Option<Ipv6Addr>)>,
    ) -> io::Result<()> {
        lens.clear();
        let mut iovs: Vec<libc::iovec> = self
            .bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain old data; all-zero is valid.
        let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { mem::zeroed() }; iovs.len()];
        for ((m, v), c) in msgs
            .iter_mut()
            .zip(iovs.iter_mut())
            .zip(self.ctrl.iter_mut())
        {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = c.as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = size_of_val(c);
        }
        // SAFETY: every header points at an iovec of a live, writable buffer of the stated length; all outlive the
        // call; a null timeout is allowed.
        let n = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(())
            } else {
                Err(e)
            };
        }
        for m in &msgs[..n as usize] {
            let (dst, seg) = control(&m.msg_hdr);
            let len = m.msg_len as usize;
            // A coalesced receive: one entry per datagram.
            let seg = seg.filter(|&s| s > 0).unwrap_or(len.max(1));
            let mut at = 0;
            while at < len {
                lens.push(((len - at).min(seg), dst));
                at += seg;
            }
        }
        Ok(())
    }
}

/// The destination address from an `IPV6_PKTINFO` control message and the datagram size of a coalesced receive
/// (`UDP_GRO`), if any.
fn control(h: &libc::msghdr) -> (Option<Ipv6Addr>, Option<usize>) {
    let (mut dst, mut seg) = (None, None);
    // SAFETY: `h` was filled by recvmmsg, so its control buffer and length describe valid control messages; the
    // CMSG_* macros stay within msg_controllen; an IPV6_PKTINFO message holds an in6_pktinfo, a UDP_GRO one an
    // int (both read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = libc::CMSG_DATA(c)
                        .cast::<libc::in6_pktinfo>()
                        .read_unaligned();
                    dst = Some(Ipv6Addr::from(info.ipi6_addr.s6_addr));
                }
                (libc::SOL_UDP, UDP_GRO) => {
                    seg = Some(libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned() as usize);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (dst, seg)
}

/// Waits up to `timeout` for any of `fds` to be readable.
pub fn poll_any(fds: &[&OwnedFd], timeout: Duration) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a live array of `p.len()` pollfd structures.
    unsafe {
        libc::poll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            timeout.as_millis() as libc::c_int,
        );
    }
}

/// Per-plane and total counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// `send` or `sink`.
    pub role: String,
    /// Datagrams.
    pub packets: u64,
    /// UDP payload bytes.
    pub bytes: u64,
    /// Seconds measured (sender: whole run; sink: first to last datagram).
    pub seconds: f64,
    /// Gbit/s of UDP payload.
    pub gbps: f64,
    /// Thousands of datagrams per second.
    pub kpps: f64,
    /// Datagrams per plane.
    pub plane_packets: Vec<u64>,
    /// Sink: datagrams whose destination matched no plane.
    pub unknown_plane: u64,
    /// Errors from sendmmsg (ENOBUFS and the like).
    pub send_errors: u64,
}

impl Summary {
    /// Fills the rates.
    pub fn finish(&mut self) {
        if self.seconds > 0.0 {
            self.gbps = self.bytes as f64 * 8.0 / self.seconds / 1e9;
            self.kpps = self.packets as f64 / self.seconds / 1e3;
        }
    }

    /// One line of text.
    pub fn line(&self) -> String {
        format!(
            "{}: {} datagrams, {} bytes of payload in {:.3} s: {:.3} Gbit/s, {:.1} kpps; per plane {:?}{}",
            self.role,
            self.packets,
            self.bytes,
            self.seconds,
            self.gbps,
            self.kpps,
            self.plane_packets,
            if self.send_errors > 0 {
                format!("; {} send errors", self.send_errors)
            } else {
                String::new()
            }
        )
    }
}

/// Sender configuration.
#[derive(Debug, Clone)]
pub struct SendOpts {
    /// Per plane: bind address and the destination of every path.
    pub planes: Vec<(SocketAddrV6, Vec<SocketAddrV6>)>,
    /// Payload bytes per datagram.
    pub size: usize,
    /// How long to send.
    pub duration: Duration,
    /// Datagrams per sendmmsg.
    pub batch: usize,
    /// Datagrams per message to one path (`UDP_SEGMENT` trains, checksums on); 1: one datagram per message.
    pub train: usize,
}

/// The destinations of `paths` paths on every plane from `me` to `peer`, as MRC would compute them.
pub fn fabric_targets(
    me: &NodeConfig,
    peer: &NodeConfig,
    paths: u32,
) -> Vec<(SocketAddrV6, Vec<SocketAddrV6>)> {
    me.planes
        .iter()
        .zip(&peer.planes)
        .enumerate()
        .map(|(p, (mine, theirs))| {
            let pp = PeerPlane {
                addr: theirs.addr,
                t0: theirs.t0,
            };
            let bind = SocketAddrV6::new(*mine.addr.ip(), 0, 0, 0);
            (
                bind,
                (0..paths.max(1))
                    .map(|i| me.destination(p, &pp, i))
                    .collect(),
            )
        })
        .collect()
}

/// Sends round-robin over planes (one sendmmsg batch per plane in turn) and paths (within a batch).
pub fn send(opts: &SendOpts) -> io::Result<Summary> {
    let train = opts.train.max(1);
    let socks: Vec<OwnedFd> = opts
        .planes
        .iter()
        .map(|(b, _)| udp_socket_opts(b, false, train > 1))
        .collect::<io::Result<_>>()?;
    let dests: Vec<Vec<libc::sockaddr_in6>> = opts
        .planes
        .iter()
        .map(|(_, d)| d.iter().map(sockaddr).collect())
        .collect();
    let payload = vec![0x5au8; opts.size * train];
    let segment = (train > 1).then_some(opts.size as u16);
    // Messages per sendmmsg: the same number of datagrams per call as without trains.
    let batch = opts.batch.div_ceil(train).max(1);
    let mut sum = Summary {
        role: "send".into(),
        plane_packets: vec![0; socks.len()],
        ..Default::default()
    };
    let mut cursor = vec![0usize; socks.len()];
    let mut batch_dests: Vec<libc::sockaddr_in6> = Vec::with_capacity(batch);
    let start = Instant::now();
    let end = start + opts.duration;
    'run: loop {
        for (p, fd) in socks.iter().enumerate() {
            if Instant::now() >= end || crate::stop::requested() {
                break 'run;
            }
            let d = &dests[p];
            batch_dests.clear();
            for i in 0..batch {
                batch_dests.push(d[(cursor[p] + i) % d.len()]);
            }
            match send_batch(fd, &batch_dests, &payload, segment) {
                Ok(n) => {
                    cursor[p] = (cursor[p] + n) % d.len();
                    sum.packets += (n * train) as u64;
                    sum.plane_packets[p] += (n * train) as u64;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR)) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN)) => {
                    sum.send_errors += 1
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("sendmmsg on plane {p}: {e}"),
                    ));
                }
            }
        }
    }
    sum.seconds = start.elapsed().as_secs_f64();
    sum.bytes = sum.packets * opts.size as u64;
    sum.finish();
    Ok(sum)
}

/// Sink configuration.
#[derive(Debug, Clone)]
pub struct SinkOpts {
    /// Each plane's port address. In uSID mode (`usid` true) the sink binds the wildcard address on each distinct
    /// port and tells planes apart by the destination's host uSID, so it counts datagrams for any address of the
    /// host, whatever follows the host uSID.
    pub binds: Vec<SocketAddrV6>,
    /// uSID mode (see `binds`).
    pub usid: bool,
    /// Interval between progress lines (`None`: none).
    pub interval: Option<Duration>,
    /// Stop after this long (`None`: on a signal).
    pub duration: Option<Duration>,
    /// Stop after this many datagrams.
    pub count: Option<u64>,
}

/// Receives on every plane until the duration elapses, `count` datagrams arrived, or a signal.
pub fn sink(opts: &SinkOpts, mut progress: impl FnMut(&str)) -> io::Result<Summary> {
    // Per socket: the plane it belongs to (plain mode), or None (uSID mode: by destination).
    let mut socks: Vec<(OwnedFd, Option<usize>)> = Vec::new();
    if opts.usid {
        let mut ports: Vec<u16> = opts.binds.iter().map(|b| b.port()).collect();
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            socks.push((
                udp_socket_opts(
                    &SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0),
                    true,
                    false,
                )?,
                None,
            ));
        }
    } else {
        for (p, b) in opts.binds.iter().enumerate() {
            socks.push((udp_socket(b)?, Some(p)));
        }
    }
    let host_usids: Vec<u16> = opts
        .binds
        .iter()
        .map(|b| NodeConfig::host_usid(b.ip()))
        .collect();
    let plane_of = |dst: Option<Ipv6Addr>| -> Option<usize> {
        let u = NodeConfig::host_usid(&dst?);
        host_usids.iter().position(|&h| h == u)
    };
    let fds: Vec<&OwnedFd> = socks.iter().map(|(f, _)| f).collect();
    let mut bufs = RecvBufs::new(64);
    let mut lens = Vec::with_capacity(64);
    let mut sum = Summary {
        role: "sink".into(),
        plane_packets: vec![0; opts.binds.len()],
        ..Default::default()
    };
    let start = Instant::now();
    let (mut first, mut last) = (None::<Instant>, start);
    let (mut ipk, mut iby) = (0u64, 0u64);
    let mut next_tick = opts.interval.map(|i| start + i);
    let mut tick_start = start;
    loop {
        let now = Instant::now();
        if crate::stop::requested()
            || opts.duration.is_some_and(|d| now >= start + d)
            || opts.count.is_some_and(|c| sum.packets >= c)
        {
            break;
        }
        if let (Some(t), Some(i)) = (next_tick, opts.interval)
            && now >= t
        {
            if first.is_some() {
                let dt = now.duration_since(tick_start).as_secs_f64();
                progress(&format!(
                    "{:9.3} s  {:8.3} Gbit/s  {:9.1} kpps  total {}",
                    now.duration_since(start).as_secs_f64(),
                    iby as f64 * 8.0 / dt / 1e9,
                    ipk as f64 / dt / 1e3,
                    sum.packets
                ));
            }
            ipk = 0;
            iby = 0;
            tick_start = now;
            next_tick = Some(t + i);
        }
        let mut got = false;
        for (fd, plane) in &socks {
            bufs.recv(fd, &mut lens)?;
            if lens.is_empty() {
                continue;
            }
            got = true;
            for &(len, dst) in &lens {
                sum.packets += 1;
                sum.bytes += len as u64;
                match plane.or_else(|| plane_of(dst)) {
                    Some(p) => sum.plane_packets[p] += 1,
                    None => sum.unknown_plane += 1,
                }
                ipk += 1;
                iby += len as u64;
            }
        }
        if got {
            let t = Instant::now();
            first.get_or_insert(t);
            last = t;
        } else {
            poll_any(&fds, Duration::from_millis(5));
        }
    }
    sum.seconds = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    sum.finish();
    Ok(sum)
}

/// Plain-mode address: `::1` port `port`.
pub fn loopback(port: u16) -> SocketAddrV6 {
    SocketAddrV6::new(Ipv6Addr::LOCALHOST, port, 0, 0)
}
