//! Packet capture: pcapng of what a host sends and receives, one capture interface per plane, so that
//! Wireshark (with `tools/wireshark/mrc.lua`) and tshark can open any run of any front end.
//!
//! The sockets hand us UDP payloads, not frames: each datagram is written as the IPv6/UDP frame it travelled
//! as (link type RAW), built from the plane's address, the peer's, the traffic class (DSCP and ECN, so trimmed
//! packets show as trimmed) and the ports. The IPv6 flow label of a received datagram is not reported by the
//! socket and is written as 0. Timestamps are the host's wall clock (nanoseconds).
//!
//! Off by default and free when off: the progress loop tests one `Option` per batch. Turned on by
//! [`HostConfig::capture`](crate::HostConfig::capture), [`Host::start_capture`](crate::Host::start_capture)
//! or the environment (`MRC_CAPTURE=path`, see [`CaptureConfig::from_env`]) for every front end at once.
//! [`PcapngFile`] is the writer underneath, shared with the simulator's captures.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mrc::wire::{IP_PROTO_UDP, Ipv6Header, UdpHeader};
use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::interface_statistics::{
    InterfaceStatisticsBlock, InterfaceStatisticsOption,
};

use crate::socket::{RxBatch, TxBatch};

/// Headers written in front of every datagram.
const FRAME_HEADERS: usize = Ipv6Header::LEN + UdpHeader::LEN;
/// pcapng `epb_flags` direction bits (pcapng §4.3.1).
const EPB_INBOUND: u32 = 1;
const EPB_OUTBOUND: u32 = 2;
/// Interface timestamps in nanoseconds (`if_tsresol` 9).
const TS_RESOLUTION_NS: u8 = 9;

/// Which way a captured packet went, as seen by the interface that captured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received.
    In,
    /// Sent.
    Out,
}

/// One IPv6/UDP datagram to write: addresses, ports, traffic class, flow label and the UDP payload.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// IPv6 source and UDP source port.
    pub src: SocketAddrV6,
    /// IPv6 destination and UDP destination port.
    pub dst: SocketAddrV6,
    /// IPv6 traffic class (DSCP << 2 | ECN).
    pub tclass: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// The UDP payload.
    pub payload: &'a [u8],
    /// Write the UDP checksum the kernel computes (plain IPv6); `false`: zero, as MRC sends it on SRv6 paths
    /// (spec WIRE-ENC-3).
    pub checksum: bool,
}

/// The IPv6 UDP checksum (RFC 8200 §8.1): one's complement sum over the pseudo-header and the datagram.
fn udp_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, udp_header: &[u8], payload: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut add = |bytes: &[u8]| {
        let mut chunks = bytes.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    };
    add(&src.octets());
    add(&dst.octets());
    let len = (udp_header.len() + payload.len()) as u32;
    add(&len.to_be_bytes());
    add(&[0, 0, 0, IP_PROTO_UDP]);
    add(udp_header);
    add(payload);
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    match !(sum as u16) {
        0 => 0xFFFF,
        c => c,
    }
}

/// A pcapng file of IPv6 frames (link type RAW) on named interfaces, with a size cap: once `max_bytes` have
/// been written, further packets are counted as dropped and the file stays a valid capture.
pub struct PcapngFile {
    w: PcapNgWriter<BufWriter<File>>,
    interfaces: u32,
    snaplen: usize,
    max_bytes: u64,
    written: u64,
    packets: u64,
    dropped: Vec<u64>,
    frame: Vec<u8>,
}

impl std::fmt::Debug for PcapngFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapngFile")
            .field("interfaces", &self.interfaces)
            .field("written", &self.written)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

fn pcap_err(e: pcap_file::PcapError) -> io::Error {
    match e {
        pcap_file::PcapError::IoError(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

impl PcapngFile {
    /// Creates `path` with one interface per `(name, description)`; `snaplen` bytes of each frame are kept
    /// (0: all), and writing stops at about `max_bytes` (0: no cap).
    pub fn create(
        path: &Path,
        interfaces: &[(String, String)],
        snaplen: usize,
        max_bytes: u64,
    ) -> io::Result<Self> {
        let file = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("capture {}: {e}", path.display())))?;
        let mut w = PcapNgWriter::new(BufWriter::new(file)).map_err(pcap_err)?;
        let snaplen = if snaplen == 0 { 0xFFFF } else { snaplen };
        for (name, description) in interfaces {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::RAW,
                snaplen: snaplen as u32,
                options: vec![
                    InterfaceDescriptionOption::IfName(name.clone().into()),
                    InterfaceDescriptionOption::IfDescription(description.clone().into()),
                    InterfaceDescriptionOption::IfTsResol(TS_RESOLUTION_NS),
                ],
            };
            w.write_pcapng_block(idb).map_err(pcap_err)?;
        }
        Ok(Self {
            w,
            interfaces: interfaces.len() as u32,
            snaplen,
            max_bytes: if max_bytes == 0 { u64::MAX } else { max_bytes },
            written: 0,
            packets: 0,
            dropped: vec![0; interfaces.len()],
            frame: Vec::with_capacity(FRAME_HEADERS + 9000),
        })
    }

    /// Writes `d` as an IPv6/UDP frame captured on `interface` at `ts` (since the Unix epoch, or since the
    /// start of a simulation). Past the size cap it only counts the packet.
    pub fn write(
        &mut self,
        interface: u32,
        ts: Duration,
        dir: Direction,
        d: &Datagram<'_>,
    ) -> io::Result<()> {
        let udp_len = UdpHeader::LEN + d.payload.len();
        let udp_len16 = u16::try_from(udp_len).unwrap_or(u16::MAX);
        let ip = Ipv6Header {
            traffic_class: d.tclass,
            flow_label: d.flow_label & 0xF_FFFF,
            payload_len: udp_len16,
            next_header: IP_PROTO_UDP,
            hop_limit: 64,
            src: *d.src.ip(),
            dst: *d.dst.ip(),
        };
        let mut udp = UdpHeader {
            src_port: d.src.port(),
            dst_port: d.dst.port(),
            length: udp_len16,
            checksum: 0,
        };
        if d.checksum {
            let mut h = [0u8; UdpHeader::LEN];
            udp.emit(&mut h)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
            udp.checksum = udp_checksum(d.src.ip(), d.dst.ip(), &h, d.payload);
        }
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        frame.resize(FRAME_HEADERS, 0);
        ip.emit(&mut frame[..Ipv6Header::LEN])
            .and_then(|_| udp.emit(&mut frame[Ipv6Header::LEN..]))
            .map_err(|e| io::Error::other(format!("{e:?}")))?;
        let keep = self
            .snaplen
            .saturating_sub(FRAME_HEADERS)
            .min(d.payload.len());
        frame.extend_from_slice(&d.payload[..keep]);
        let r = self.write_frame(interface, ts, dir, &frame, FRAME_HEADERS + d.payload.len());
        self.frame = frame;
        r
    }

    /// Writes a whole frame (IPv6 header first) that was `original_len` bytes long on the wire, cut to the
    /// snap length. Past the size cap it only counts the packet.
    pub fn write_frame(
        &mut self,
        interface: u32,
        ts: Duration,
        dir: Direction,
        frame: &[u8],
        original_len: usize,
    ) -> io::Result<()> {
        if interface >= self.interfaces {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no such capture interface",
            ));
        }
        if self.written >= self.max_bytes {
            self.dropped[interface as usize] += 1;
            return Ok(());
        }
        let flags = match dir {
            Direction::In => EPB_INBOUND,
            Direction::Out => EPB_OUTBOUND,
        };
        let epb = EnhancedPacketBlock {
            interface_id: interface,
            timestamp: ts,
            original_len: original_len as u32,
            data: std::borrow::Cow::Borrowed(&frame[..frame.len().min(self.snaplen)]),
            options: vec![EnhancedPacketOption::Flags(flags)],
        };
        self.written += self.w.write_pcapng_block(epb).map_err(pcap_err)? as u64;
        self.packets += 1;
        Ok(())
    }

    /// Packets written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets not written because the size cap was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Bytes written so far (blocks, not counting the section and interface headers).
    pub fn bytes(&self) -> u64 {
        self.written
    }

    /// Hands what is buffered to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.get_mut().flush()
    }

    /// Writes each interface's drop count (an interface statistics block, as capture tools do when they stop)
    /// and flushes the file.
    pub fn finish(&mut self, ts: Duration) -> io::Result<()> {
        for (i, &dropped) in self.dropped.iter().enumerate() {
            let isb = InterfaceStatisticsBlock {
                interface_id: i as u32,
                timestamp: ts.as_nanos() as u64,
                options: vec![InterfaceStatisticsOption::IsbIfDrop(dropped)],
            };
            self.w.write_pcapng_block(isb).map_err(pcap_err)?;
        }
        self.w.get_mut().flush()
    }
}

/// What and where to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    /// The pcapng file.
    pub path: PathBuf,
    /// Stop writing past this many bytes (0: no cap).
    pub max_bytes: u64,
    /// Bytes kept of each frame, IPv6 and UDP headers included (0: whole frames).
    pub snaplen: usize,
}

/// Default size cap: 256 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// Hosts started in this process with a capture from the environment: the second and later get numbered files.
static ENV_CAPTURES: AtomicUsize = AtomicUsize::new(0);

impl CaptureConfig {
    /// Whole frames into `path`, capped at [`DEFAULT_MAX_BYTES`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_bytes: DEFAULT_MAX_BYTES,
            snaplen: 0,
        }
    }

    /// From `MRC_CAPTURE` (the file; unset or empty: no capture), `MRC_CAPTURE_MAX_MB` (size cap in MiB, 0 for
    /// none; default 256) and `MRC_CAPTURE_SNAPLEN` (bytes kept per frame; default all). `{pid}` in the path
    /// becomes the process id; a process that starts several hosts writes the second host's capture to
    /// `name.1.pcapng`, the third's to `name.2.pcapng`, and so on.
    pub fn from_env() -> Result<Option<Self>, String> {
        let Some(path) = std::env::var_os("MRC_CAPTURE").filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        let num = |name: &str| -> Result<Option<u64>, String> {
            std::env::var(name)
                .ok()
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{name}={v}: not a number"))
                })
                .transpose()
        };
        let mut cfg = Self::new(numbered(
            &path
                .to_string_lossy()
                .replace("{pid}", &std::process::id().to_string()),
            ENV_CAPTURES.fetch_add(1, Ordering::Relaxed),
        ));
        if let Some(mb) = num("MRC_CAPTURE_MAX_MB")? {
            cfg.max_bytes = mb.saturating_mul(1 << 20);
        }
        if let Some(s) = num("MRC_CAPTURE_SNAPLEN")? {
            cfg.snaplen = s as usize;
        }
        Ok(Some(cfg))
    }
}

/// `path` for the first host, `stem.n.ext` for the n-th after it.
fn numbered(path: &str, n: usize) -> PathBuf {
    let p = PathBuf::from(path);
    if n == 0 {
        return p;
    }
    let stem = p
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match p.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    p.with_file_name(name)
}

/// How much a capture wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaptureStats {
    /// Packets written.
    pub packets: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Packets left out because the size cap was reached.
    pub dropped: u64,
    /// Packets that failed to be written (a full disk); the capture stopped at the first.
    pub errors: u64,
}

/// A host's capture: one interface per plane, fed by the progress loop with every batch it sends or receives.
#[derive(Debug)]
pub struct Capture {
    file: PcapngFile,
    locals: Vec<SocketAddrV6>,
    scratch: Vec<u8>,
    errors: u64,
    checksum: bool,
}

fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

impl Capture {
    /// Opens `cfg.path` with one interface per plane address in `locals` (named `planeN`); `zero_checksum`:
    /// the sockets send UDP without a checksum (SRv6 uSID mode).
    pub fn open(
        cfg: &CaptureConfig,
        locals: &[SocketAddrV6],
        zero_checksum: bool,
    ) -> io::Result<Self> {
        let ifaces: Vec<(String, String)> = locals
            .iter()
            .enumerate()
            .map(|(p, a)| (format!("plane{p}"), format!("MRC plane {p} at {a}")))
            .collect();
        Ok(Self {
            file: PcapngFile::create(&cfg.path, &ifaces, cfg.snaplen, cfg.max_bytes)?,
            locals: locals.to_vec(),
            scratch: Vec::new(),
            errors: 0,
            checksum: !zero_checksum,
        })
    }

    fn put(&mut self, plane: usize, dir: Direction, d: &Datagram<'_>, ts: Duration) {
        if self.errors > 0 {
            return;
        }
        if self.file.write(plane as u32, ts, dir, d).is_err() {
            self.errors += 1;
        }
    }

    /// Flushes after every batch: a front end may leave with `exit()` and never drop its host, and a capture
    /// is for finding out what happened last.
    fn end_batch(&mut self) {
        if self.errors == 0 && self.file.flush().is_err() {
            self.errors += 1;
        }
    }

    /// The first `n` datagrams of `batch`, just sent on `plane`.
    pub fn sent(&mut self, plane: usize, batch: &TxBatch, n: usize) {
        let ts = wall_clock();
        let local = self.locals.get(plane).copied().unwrap_or(unspecified());
        let mut buf = std::mem::take(&mut self.scratch);
        for i in 0..n.min(batch.len()) {
            buf.clear();
            batch.gather(i, &mut buf);
            let dst = batch.dest(i);
            let d = Datagram {
                src: local,
                dst,
                tclass: batch.tclass(i),
                flow_label: dst.flowinfo(),
                payload: &buf,
                checksum: self.checksum,
            };
            self.put(plane, Direction::Out, &d, ts);
        }
        self.scratch = buf;
        self.end_batch();
    }

    /// One datagram sent on `plane` outside the batches (bootstrap).
    pub fn sent_one(&mut self, plane: usize, dst: SocketAddrV6, payload: &[u8]) {
        let local = self.locals.get(plane).copied().unwrap_or(unspecified());
        let d = Datagram {
            src: local,
            dst,
            tclass: 0,
            flow_label: 0,
            payload,
            checksum: self.checksum,
        };
        self.put(plane, Direction::Out, &d, wall_clock());
        self.end_batch();
    }

    /// The first `n` datagrams of `batch`, just received on `plane`.
    pub fn received(&mut self, plane: usize, batch: &RxBatch, n: usize) {
        let ts = wall_clock();
        let local = self.locals.get(plane).copied().unwrap_or(unspecified());
        for i in 0..n.min(batch.len()) {
            let (payload, src, tclass, _cut) = batch.get(i);
            let d = Datagram {
                src,
                dst: local,
                tclass,
                flow_label: 0,
                payload,
                checksum: self.checksum,
            };
            self.put(plane, Direction::In, &d, ts);
        }
        self.end_batch();
    }

    /// What was written so far.
    pub fn stats(&self) -> CaptureStats {
        CaptureStats {
            packets: self.file.packets(),
            bytes: self.file.bytes(),
            dropped: self.file.dropped(),
            errors: self.errors,
        }
    }

    /// Writes the drop counts and flushes; the capture is complete on disk.
    pub fn finish(mut self) -> io::Result<CaptureStats> {
        self.file.finish(wall_clock())?;
        Ok(self.stats())
    }
}

fn unspecified() -> SocketAddrV6 {
    SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_checksum_matches_a_known_datagram() {
        // ::1 port 1 -> ::1 port 2, payload "ab": sum by hand, then the receiver's check sums to 0xFFFF.
        let (a, b): (Ipv6Addr, Ipv6Addr) = ("::1".parse().unwrap(), "::1".parse().unwrap());
        let header = [0, 1, 0, 2, 0, 10, 0, 0];
        let c = udp_checksum(&a, &b, &header, b"ab");
        let mut with = header;
        with[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(udp_checksum(&a, &b, &with, b"ab"), 0xFFFF);
        // 1 + 1 (addresses) + 10 (length) + 17 + 1 + 2 + 10 (header) + 0x6162 = 0x618c; !0x618c = 0x9e73.
        assert_eq!(c, 0x9e73);
    }

    #[test]
    fn numbered_paths() {
        assert_eq!(numbered("/tmp/a.pcapng", 0), PathBuf::from("/tmp/a.pcapng"));
        assert_eq!(
            numbered("/tmp/a.pcapng", 2),
            PathBuf::from("/tmp/a.2.pcapng")
        );
        assert_eq!(numbered("cap", 1), PathBuf::from("cap.1"));
    }
}
