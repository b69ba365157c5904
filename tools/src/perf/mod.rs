//! `mrc-perf`: perftest-style bandwidth and latency tests of MRC over the UDP datapath.
//!
//! Like perftest, one process is the server (no address given) and one the client; they meet over a TCP
//! connection that carries the connection blobs, plane addresses and memory keys (the out-of-band exchange an
//! RDMA job does through its launcher), then move data over MRC only.

pub mod oob;
mod report;
pub mod run;
mod server;
mod verify;

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Most QPs one test may use.
pub const MAX_QPS: usize = 256;
/// Most messages in flight per QP, and most memory slots per QP.
pub const MAX_DEPTH: usize = 4096;
/// Largest message.
pub const MAX_SIZE: u64 = 1 << 30;
/// Most memory one side registers for a test (QPs × slots × largest message).
pub const MAX_MEMORY: u64 = 4 << 30;
/// Most active EVs per plane.
pub const MAX_EVS: u16 = 64;

/// Which verb the test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate (every message consumes a receive at the server).
    WriteImm,
    /// SEND/RECV (MRC extension).
    Send,
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Keep `--depth` messages in flight per QP; report goodput.
    Bw,
    /// Ping-pong one message at a time; report round-trip/2 percentiles.
    Lat,
}

/// Command line of `mrc-perf`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "mrc-perf",
    about = "Bandwidth and latency of MRC over UDP, perftest style: run without SERVER to be the server",
    after_help = "Examples:\n  mrc-perf                      # server on loopback, 8 planes\n  mrc-perf ::1 --sweep          # client: WRITE bandwidth, 2 B..8 MiB\n  mrc-perf --config h1.toml     # server on a fabric host (see mrc-fabric)\n  mrc-perf fcbb:bb00:e001:: --config h0.toml --size 1m --duration 5 --json"
)]
pub struct Options {
    /// Server to connect to (its out-of-band TCP address); omit to be the server.
    pub server: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(long, default_value_t = 18515)]
    pub port: u16,
    /// Node file (planes and uSID plan, as written by `mrc-fabric up`); omitted: loopback, no configuration.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Planes (UDP sockets on ::1) in loopback mode.
    #[arg(long, default_value_t = 8)]
    pub planes: usize,
    /// Verb to test.
    #[arg(long, value_enum, default_value_t = Test::Write)]
    pub test: Test,
    /// Bandwidth or latency.
    #[arg(long, value_enum, default_value_t = Mode::Bw)]
    pub mode: Mode,
    /// Message size (suffixes k, m: 64k, 1m).
    #[arg(long, value_parser = parse_size, default_value = "65536")]
    pub size: u64,
    /// Test every power of two from 2 B to 8 MiB instead of `--size`.
    #[arg(long)]
    pub sweep: bool,
    /// QPs, each with its own slice of memory.
    #[arg(long, default_value_t = 1)]
    pub qps: usize,
    /// Messages in flight per QP (bandwidth mode).
    #[arg(long, default_value_t = 64)]
    pub depth: usize,
    /// Memory per QP that consecutive messages cycle through, one message at least (like perftest's
    /// --cycle_buffer, and like it small enough by default to stay in cache, so the figure is the transport's).
    /// Larger values spread messages over more memory: 64m gives each of 64 in-flight 1 MB messages its own.
    #[arg(long, value_parser = parse_size, default_value = "1m")]
    pub cycle_buffer: u64,
    /// Seconds per message size.
    #[arg(long, default_value_t = 2.0)]
    pub duration: f64,
    /// Stop a size after this many bytes instead of after `--duration` (suffixes k, m, g).
    #[arg(long, value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Payload bytes per MRC packet; default: the largest that fits the planes' links (60000 on loopback, the
    /// link MTU less 112 bytes of headers on a fabric: mrc-host's `pmtu::payload_mtu`).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Path MTU of the network, when the kernel's figure for the planes' links should not be used.
    #[arg(long)]
    pub link_mtu: Option<u32>,
    /// Active EVs per plane (each with two backups). A kernel fabric has as many distinct paths per plane as
    /// T1s, so a few EVs per plane cover them.
    #[arg(long, default_value_t = 4)]
    pub evs: u16,
    /// Packets in flight per QP (a fixed window: the hosts' CPUs are the bottleneck, see `software_cc`).
    #[arg(long, default_value_t = 64)]
    pub window: u32,
    /// Use NSCC congestion control sized for this rate (Gbit/s) instead of the fixed window.
    #[arg(long)]
    pub rate_gbps: Option<u64>,
    /// Live line every this many milliseconds (0: none).
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Write goodput per interval to this CSV file (client): t_ms,gbps,unix_ms (the bin's end).
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Check the data, every message: each carries bytes of its own, and the client reads it back from the
    /// server's memory as it completes (an RDMA READ; a slot is reused only once its message checked out, so
    /// each in-flight message gets a slot of its own: `--depth` slots per QP, not `--cycle-buffer`); at the end
    /// the server also hashes its slots. Costs bandwidth: the figures of a verified run are not comparable.
    #[arg(long)]
    pub verify: bool,
    /// Both directions at once (perftest's `-b`): the server WRITEs to the client with the client's size,
    /// depth and duration while the client WRITEs to it; the figure is the sum of both directions.
    #[arg(long)]
    pub bidir: bool,
    /// Drive the endpoint from a progress thread instead of the application loop.
    #[arg(long)]
    pub progress_thread: bool,
    /// Print one JSON document at the end instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// Disable MRC's ICRC (only where the UDP checksum protects the path, i.e. loopback).
    #[arg(long)]
    pub no_icrc: bool,
}

/// Parses `4096`, `64k`, `1m`, `2g`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m') => (&s[..s.len() - 1], 1 << 20),
        Some('g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("{s:?} is not a size; write e.g. 4096, 64k, 1m or 2g"))
}

impl Options {
    /// The message sizes this run tests.
    pub fn sizes(&self) -> Vec<u64> {
        if self.sweep {
            (1..=23).map(|k| 1u64 << k).collect()
        } else {
            vec![self.size]
        }
    }

    /// Checks what clap cannot; the error names the option and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.qps == 0 || self.qps > MAX_QPS {
            return Err(format!("--qps {}: use 1..={MAX_QPS}", self.qps));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(format!("--depth {}: use 1..={MAX_DEPTH}", self.depth));
        }
        if self.evs == 0 || self.evs > MAX_EVS {
            return Err(format!("--evs {}: use 1..={MAX_EVS}", self.evs));
        }
        if self.planes == 0 || self.planes > mrc_host::MAX_PLANES {
            return Err(format!(
                "--planes {}: use 1..={}",
                self.planes,
                mrc_host::MAX_PLANES
            ));
        }
        if self.sizes().iter().any(|&s| s == 0 || s > MAX_SIZE) {
            return Err("--size: use 1 B ..= 1 GiB".into());
        }
        let largest = self.sizes().into_iter().max().unwrap_or(self.size);
        if (self.qps as u64).saturating_mul(largest) > MAX_MEMORY {
            return Err(format!(
                "--qps {} × --size {largest} needs more than {} GiB per side; use fewer QPs or smaller messages",
                self.qps,
                MAX_MEMORY >> 30
            ));
        }
        if self.bidir && (self.mode != Mode::Bw || self.test != Test::Write || self.verify) {
            return Err(
                "--bidir measures WRITE bandwidth both ways: use it with --test write --mode bw, without --verify"
                    .into(),
            );
        }
        if self.verify && self.mode == Mode::Lat {
            return Err("--verify checks bandwidth runs; drop it or use --mode bw".into());
        }
        if self.duration.is_nan() || self.duration <= 0.0 {
            return Err(format!(
                "--duration {}: use a positive number of seconds",
                self.duration
            ));
        }
        Ok(())
    }
}
