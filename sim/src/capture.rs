//! Packet capture of a simulated run: pcapng at chosen hosts (one interface per host and plane: what the
//! host's endpoint sends and receives) and chosen links (one interface per directed port: what leaves it),
//! within a window of simulated time, with simulated timestamps. Written with mrc-host's pcapng writer, so
//! Wireshark with `tools/wireshark/mrc.lua` reads a simulated failure as it reads a real one.
//!
//! What the frames hold: the datagram the engine produced (headers as sent; the simulator keeps no payload, so
//! payload bytes are its placement markers and filler), in IPv6/UDP with made-up addresses
//! (`fd00:0:0:<plane>::<host>`, host as two 16-bit words), UDP source port `0xC000 | (EV & 0x3FFF)` and the EV's low
//! 20 bits in the flow label (spec WIRE-ENC-5), DSCP and ECN as the fabric left them (trimmed, CE), and an ICRC
//! computed for the bytes written (the simulated endpoints skip it). By default 128 bytes of each frame are
//! kept: every header, no filler.

use std::net::{Ipv6Addr, SocketAddrV6};
use std::path::PathBuf;
use std::time::Duration;

use mrc::wire::{TrafficClass, traffic_class};
use mrc_host::capture::{Datagram, Direction, PcapngFile};

use crate::scenario::{LinkRef, ScenarioError};
use crate::topo::Topology;

const NONE: u32 = u32::MAX;
/// Default bytes kept per frame: IPv6 + UDP + the longest header stack with an AUTH tag, and then some.
pub const DEFAULT_SNAPLEN: usize = 128;

/// What to capture.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureSpec {
    /// The pcapng file.
    pub path: PathBuf,
    /// Hosts whose endpoints' traffic is captured.
    pub hosts: Vec<u32>,
    /// Links whose packets are captured, both directions, as they leave each end (the scenario's link syntax).
    pub links: Vec<LinkRef>,
    /// Start of the window, µs of simulated time.
    pub from_us: f64,
    /// End of the window (none: the end of the run).
    pub until_us: Option<f64>,
    /// Bytes kept per frame (0: whole frames).
    pub snaplen: usize,
    /// Stop writing past this many bytes (0: no cap).
    pub max_bytes: u64,
}

/// A packet as the capture sees it.
pub(crate) struct Seen<'a> {
    /// Sending and receiving host.
    pub src: u32,
    /// Receiving host.
    pub dst: u32,
    /// Plane.
    pub plane: u8,
    /// EV (for the flow label and the UDP source port).
    pub ev: u32,
    /// Data (else control).
    pub data: bool,
    /// CE-marked.
    pub ce: bool,
    /// Trimmed (`Some(true)` on the last hop).
    pub trimmed: Option<bool>,
    /// The datagram.
    pub bytes: &'a [u8],
}

/// An open capture.
pub struct SimCapture {
    file: PcapngFile,
    from_ps: u64,
    until_ps: u64,
    planes: u32,
    /// Per host: the interface of its plane 0 (planes follow), or `NONE`.
    host_iface: Vec<u32>,
    /// Per directed port: its interface, or `NONE`.
    port_iface: Vec<u32>,
    buf: Vec<u8>,
    errors: u64,
}

impl std::fmt::Debug for SimCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCapture")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// The made-up address of `host` on `plane`.
pub fn host_addr(host: u32, plane: u8) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0,
        0,
        u16::from(plane),
        0,
        0,
        (host >> 16) as u16,
        host as u16,
    )
}

fn node_name(t: &Topology, node: u32) -> String {
    if node < t.hosts {
        return format!("h{node}");
    }
    match t.sw.get((node - t.hosts) as usize) {
        Some(s) if t.shape.pods > 1 || s.tier == 2 => {
            format!("t{}-{}.{}", s.tier, s.pod, s.index)
        }
        Some(s) => format!("t{}-{}", s.tier, s.index),
        None => format!("n{node}"),
    }
}

impl SimCapture {
    /// Opens `spec.path` with its interfaces, checking every host and link against the topology.
    pub fn new(spec: &CaptureSpec, t: &Topology) -> Result<Self, ScenarioError> {
        let planes = t.shape.planes;
        let mut ifaces: Vec<(String, String)> = Vec::new();
        let mut host_iface = vec![NONE; t.hosts as usize];
        for (k, &h) in spec.hosts.iter().enumerate() {
            let slot = host_iface.get_mut(h as usize).ok_or_else(|| {
                ScenarioError::new(
                    format!("capture.hosts[{k}]"),
                    format!("host {h} does not exist (the fabric has {})", t.hosts),
                )
            })?;
            if *slot != NONE {
                continue;
            }
            *slot = ifaces.len() as u32;
            for p in 0..planes {
                ifaces.push((
                    format!("h{h}.p{p}"),
                    format!("host {h}, plane {p}: what its endpoint sends and receives"),
                ));
            }
        }
        let mut port_iface = vec![NONE; t.ports.len()];
        for (k, r) in spec.links.iter().enumerate() {
            let named = t.select_links(r, &format!("capture.links[{k}]"))?;
            // Both directions of each link.
            for pi in named
                .into_iter()
                .flat_map(|pi| [pi, t.ports[pi as usize].rev])
            {
                if port_iface[pi as usize] != NONE {
                    continue;
                }
                let p = &t.ports[pi as usize];
                port_iface[pi as usize] = ifaces.len() as u32;
                let (a, b) = (node_name(t, p.from), node_name(t, p.to));
                ifaces.push((
                    format!("p{}.{a}-{b}", p.plane),
                    format!("plane {} port {a} -> {b}: packets leaving it", p.plane),
                ));
            }
        }
        if ifaces.is_empty() {
            return Err(ScenarioError::new(
                "capture",
                "names no host and no link: give --capture-host or --capture-link",
            ));
        }
        let file = PcapngFile::create(&spec.path, &ifaces, spec.snaplen, spec.max_bytes)
            .map_err(|e| ScenarioError::new("capture", format!("{}: {e}", spec.path.display())))?;
        Ok(Self {
            file,
            from_ps: ps(spec.from_us),
            until_ps: spec.until_us.map_or(u64::MAX, ps),
            planes,
            host_iface,
            port_iface,
            buf: Vec::new(),
            errors: 0,
        })
    }

    /// Whether anything at host `h` is captured.
    #[inline]
    pub(crate) fn wants_host(&self, h: u32) -> bool {
        self.host_iface.get(h as usize).is_some_and(|&i| i != NONE)
    }

    /// Whether departures from port `pi` are captured.
    #[inline]
    pub(crate) fn wants_port(&self, pi: u32) -> bool {
        self.port_iface.get(pi as usize).is_some_and(|&i| i != NONE)
    }

    /// Host `h`'s endpoint sent (`Out`) or received (`In`) a packet at `now_ps`.
    pub(crate) fn at_host(&mut self, now_ps: u64, h: u32, dir: Direction, s: &Seen<'_>) {
        if let Some(&base) = self.host_iface.get(h as usize)
            && base != NONE
            && u32::from(s.plane) < self.planes
        {
            self.write(now_ps, base + u32::from(s.plane), dir, s);
        }
    }

    /// A packet left port `pi` at `now_ps`.
    pub(crate) fn at_port(&mut self, now_ps: u64, pi: u32, s: &Seen<'_>) {
        if let Some(&i) = self.port_iface.get(pi as usize)
            && i != NONE
        {
            self.write(now_ps, i, Direction::Out, s);
        }
    }

    fn write(&mut self, now_ps: u64, iface: u32, dir: Direction, s: &Seen<'_>) {
        if now_ps < self.from_ps || now_ps > self.until_ps || self.errors > 0 {
            return;
        }
        let tclass = match (s.trimmed, s.data) {
            (Some(true), _) => traffic_class(TrafficClass::TrimmedLastHop.default_dscp(), 0),
            (Some(false), _) => traffic_class(TrafficClass::Trimmed.default_dscp(), 0),
            (None, true) => traffic_class(
                TrafficClass::Data.default_dscp(),
                if s.ce {
                    mrc::wire::ECN_CE
                } else {
                    mrc::wire::ECN_ECT0
                },
            ),
            (None, false) => traffic_class(TrafficClass::Control.default_dscp(), 0),
        };
        self.buf.clear();
        self.buf.extend_from_slice(s.bytes);
        // The simulated endpoints skip the ICRC: write the one a NIC would (a trimmed packet has none).
        let n = self.buf.len();
        if s.trimmed.is_none() && n >= 4 {
            let crc = mrc::wire::icrc(&self.buf[..n - 4]);
            self.buf[n - 4..].copy_from_slice(&crc.to_be_bytes());
        }
        let d = Datagram {
            src: SocketAddrV6::new(
                host_addr(s.src, s.plane),
                0xC000 | (s.ev & 0x3FFF) as u16,
                0,
                0,
            ),
            dst: SocketAddrV6::new(host_addr(s.dst, s.plane), mrc::wire::UDP_PORT, 0, 0),
            tclass,
            flow_label: s.ev & 0xF_FFFF,
            payload: &self.buf,
            checksum: false,
        };
        if self
            .file
            .write(iface, Duration::from_nanos(now_ps / 1000), dir, &d)
            .is_err()
        {
            self.errors += 1;
        }
    }

    /// Writes the drop counts and flushes; returns (packets written, packets left out by the cap).
    pub fn finish(mut self, end_ps: u64) -> std::io::Result<(u64, u64)> {
        self.file.finish(Duration::from_nanos(end_ps / 1000))?;
        if self.errors > 0 {
            return Err(std::io::Error::other("writing the capture failed"));
        }
        Ok((self.file.packets(), self.file.dropped()))
    }
}
