//! The out-of-band exchange: newline-delimited JSON over one TCP connection.

use std::io::{self, BufRead, BufReader, Read as _, Write};
use std::net::{SocketAddrV6, TcpStream};

use mrc_host::MAX_PLANES;
use mrc_host::PeerPlane;
use mrc_host::{Blob, BlobKind};
use serde::{Deserialize, Serialize};

use super::{MAX_DEPTH, MAX_EVS, MAX_MEMORY, MAX_QPS, MAX_SIZE, Mode, Test};

/// Longest control message: a hello with 256 connection blobs and 16 planes takes about 30 KB.
pub const MAX_LINE: u64 = 1 << 20;
/// Largest MRC payload per packet (`QpConfig::mtu`).
const MTU_RANGE: std::ops::RangeInclusive<u32> = 64..=65000;

/// A plane address as exchanged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WirePlane {
    /// Socket address of the plane's port.
    pub addr: String,
    /// uSID of the node's T0 in this plane (0 in plain mode).
    pub t0: u16,
}

/// A registered region the peer may access.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct WireRegion {
    /// Base address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length.
    pub len: u64,
}

/// What one side tells the other before the test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// The verb (client's choice; echoed by the server).
    pub test: Test,
    /// Bandwidth or latency.
    pub mode: Mode,
    /// QPs.
    pub qps: usize,
    /// Largest message.
    pub max_size: u64,
    /// Memory slots per QP.
    pub slots: usize,
    /// MRC MTU.
    pub mtu: u32,
    /// ICRC on.
    pub icrc: bool,
    /// Active EVs per plane.
    pub evs: u16,
    /// The sender's planes.
    pub planes: Vec<WirePlane>,
    /// One connection blob per QP, hex.
    pub conn: Vec<String>,
    /// The sender's region.
    pub region: WireRegion,
    /// Both directions at once: how the server is to send (the client's `--bidir`).
    #[serde(default)]
    pub bidir: Option<Bidir>,
}

/// What a server sending back (`--bidir`) takes from the client's options.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Bidir {
    /// Messages in flight per QP.
    pub depth: usize,
    /// Seconds per size.
    pub duration: f64,
    /// Bytes per size instead of the duration.
    pub bytes: Option<u64>,
}

impl Hello {
    /// Bytes of the region this hello describes: QPs × slots × largest message, if that fits in a `u64`.
    pub fn region_len(&self) -> Option<u64> {
        (self.qps as u64)
            .checked_mul(self.slots as u64)?
            .checked_mul(self.max_size)
    }

    /// Checks every field against the limits of a test (the same ones the client's options obey), so a hello
    /// from a buggy or hostile peer is refused with a reason instead of crashing or exhausting this side.
    /// `planes` is this side's plane count, which the peer's must match.
    pub fn check(&self, planes: usize) -> Result<(), String> {
        if !(1..=MAX_QPS).contains(&self.qps) {
            return Err(format!("qps {}: use 1..={MAX_QPS}", self.qps));
        }
        if !(1..=MAX_SIZE).contains(&self.max_size) {
            return Err(format!(
                "max_size {}: use 1..={MAX_SIZE} bytes",
                self.max_size
            ));
        }
        if !(1..=MAX_DEPTH).contains(&self.slots) {
            return Err(format!("slots {}: use 1..={MAX_DEPTH}", self.slots));
        }
        let len = self
            .region_len()
            .filter(|&l| l <= MAX_MEMORY)
            .ok_or_else(|| {
                format!(
                    "qps {} × slots {} × max_size {} is more than {} GiB of memory; ask for less",
                    self.qps,
                    self.slots,
                    self.max_size,
                    MAX_MEMORY >> 30
                )
            })?;
        if !MTU_RANGE.contains(&self.mtu) {
            return Err(format!(
                "mtu {}: use {}..={} payload bytes",
                self.mtu,
                MTU_RANGE.start(),
                MTU_RANGE.end()
            ));
        }
        if !(1..=MAX_EVS).contains(&self.evs) {
            return Err(format!("evs {}: use 1..={MAX_EVS} per plane", self.evs));
        }
        if self.planes.is_empty() || self.planes.len() > MAX_PLANES {
            return Err(format!(
                "{} planes: use 1..={MAX_PLANES}",
                self.planes.len()
            ));
        }
        if self.planes.len() != planes {
            return Err(format!(
                "{} planes, and this side has {planes}; run both sides with the same --planes or fabric",
                self.planes.len()
            ));
        }
        planes_from_wire(&self.planes).map_err(|e| format!("planes: {e}"))?;
        if self.conn.len() != self.qps {
            return Err(format!(
                "{} connection blobs for {} QPs; send one per QP",
                self.conn.len(),
                self.qps
            ));
        }
        for (i, c) in self.conn.iter().enumerate() {
            let c = conn_from_hex(c).map_err(|e| format!("conn[{i}]: {e}"))?;
            match c.kind {
                BlobKind::Qp { mtu, .. } if mtu != self.mtu => {
                    return Err(format!(
                        "conn[{i}]: mtu {mtu} differs from the hello's {}",
                        self.mtu
                    ));
                }
                BlobKind::Qp { .. } => {}
                _ => return Err(format!("conn[{i}]: names a listener, not a QP")),
            }
        }
        if let Some(b) = &self.bidir {
            if !((1..=MAX_DEPTH).contains(&b.depth) && b.duration > 0.0 && b.duration <= 3600.0) {
                return Err(format!(
                    "bidir: depth {} (use 1..={MAX_DEPTH}), duration {} s (use up to 3600)",
                    b.depth, b.duration
                ));
            }
            if self.test != Test::Write || self.mode != Mode::Bw {
                return Err("bidir: only WRITE bandwidth runs both ways".into());
            }
        }
        if self.region.len != len || self.region.addr.checked_add(len).is_none() {
            return Err(format!(
                "region of {} bytes at {:#x}; it must hold qps × slots × max_size = {len} bytes",
                self.region.len, self.region.addr
            ));
        }
        Ok(())
    }
}

/// The server's answer to a client's hello.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    /// Refused, and why.
    Refused {
        /// What was wrong with the hello.
        refused: String,
    },
    /// Accepted: the server's own hello.
    Hello(Box<Hello>),
}

/// Control messages during the test.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Ctl {
    /// The next message size (the server answers pings of this size in latency mode).
    Size {
        /// Bytes.
        size: u64,
    },
    /// The test is over; the server answers with `Hash` when asked to verify.
    Done {
        /// Hash the region.
        verify: bool,
        /// Per QP, how many slots (from 0) the largest size wrote.
        slots: Vec<usize>,
        /// Bytes per slot to hash.
        len: u64,
    },
    /// The server's hash of each QP's slot 0..slots region part written so far.
    Hash {
        /// One hash per QP.
        hashes: Vec<u64>,
    },
    /// `--bidir`: what the server sent to the client during the last size.
    Sent {
        /// Payload bytes completed.
        bytes: u64,
        /// Seconds they took.
        seconds: f64,
    },
    /// The server refuses a control message and ends the test.
    Refused {
        /// Why.
        reason: String,
    },
}

/// One JSON line each way.
pub struct Channel {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Channel {
    /// Wraps a connected stream.
    pub fn new(s: TcpStream) -> io::Result<Self> {
        s.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&mut self, m: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(m).map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)
    }

    /// The connection's stream (for timeouts).
    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    /// Reads the rest of a line into `line`, at most [`MAX_LINE`] bytes in all.
    fn read_line(&mut self, line: &mut String) -> io::Result<usize> {
        let room = MAX_LINE.saturating_sub(line.len() as u64);
        let n = (&mut self.reader).take(room).read_line(line)?;
        if n > 0 && !line.ends_with('\n') && line.len() as u64 >= MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a control message longer than {MAX_LINE} bytes"),
            ));
        }
        Ok(n)
    }

    /// Receives one message (blocking).
    pub fn recv<T: for<'a> Deserialize<'a>>(&mut self) -> io::Result<T> {
        let mut line = String::new();
        if self.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            ));
        }
        serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Receives a message if a whole line is waiting, without blocking.
    pub fn try_recv<T: for<'a> Deserialize<'a>>(&mut self) -> io::Result<Option<T>> {
        self.reader.get_ref().set_nonblocking(true)?;
        let mut line = String::new();
        let r = self.read_line(&mut line);
        self.reader.get_ref().set_nonblocking(false)?;
        match r {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            )),
            Ok(_) => serde_json::from_str(&line)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if line.is_empty() {
                    Ok(None)
                } else {
                    // Part of a line: finish it blocking (the rest follows at once).
                    self.read_line(&mut line)?;
                    serde_json::from_str(&line)
                        .map(Some)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// Encodes planes for the wire.
pub fn planes_to_wire(p: &[PeerPlane]) -> Vec<WirePlane> {
    p.iter()
        .map(|p| WirePlane {
            addr: p.addr.to_string(),
            t0: p.t0,
        })
        .collect()
}

/// Decodes planes from the wire.
pub fn planes_from_wire(p: &[WirePlane]) -> io::Result<Vec<PeerPlane>> {
    p.iter()
        .map(|w| {
            let addr: SocketAddrV6 = w.addr.parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad plane address {:?}", w.addr),
                )
            })?;
            Ok(PeerPlane { addr, t0: w.t0 })
        })
        .collect()
}

/// Hex of a connection blob.
pub fn conn_to_hex(c: &Blob) -> String {
    c.encode().iter().map(|b| format!("{b:02x}")).collect()
}

/// A connection blob from hex.
pub fn conn_from_hex(s: &str) -> io::Result<Blob> {
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    bytes
        .as_deref()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad connection blob (hex)"))
        .and_then(|b| {
            Blob::decode(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
        })
}

/// A fast 64-bit hash of a byte range (FNV-style over 8-byte words), for `--verify`.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x100_0000_01b3);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}
