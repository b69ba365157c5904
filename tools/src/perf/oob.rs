//! The out-of-band exchange: newline-delimited JSON over one TCP connection.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddrV6, TcpStream};

use mrc::ConnInfo;
use mrc::datapath::PeerPlane;
use serde::{Deserialize, Serialize};

use super::{Mode, Test};

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

    /// Receives one message (blocking).
    pub fn recv<T: for<'a> Deserialize<'a>>(&mut self) -> io::Result<T> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
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
        let r = self.reader.read_line(&mut line);
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
                    let mut rest = String::new();
                    self.reader.read_line(&mut rest)?;
                    line.push_str(&rest);
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
pub fn conn_to_hex(c: &ConnInfo) -> String {
    c.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// A connection blob from hex.
pub fn conn_from_hex(s: &str) -> io::Result<ConnInfo> {
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    bytes
        .as_deref()
        .and_then(ConnInfo::from_bytes)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad connection blob"))
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
