//! `mrc-blast`: raw per-packet UDP sender and sink over the mrc-fabric planes (or loopback), to measure the
//! forwarding ceiling. Exit codes: 0 success, 1 failure, 2 bad argument.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mrc_host::NodeConfig;
use mrc_tools::blast::{self, SendOpts, SinkOpts};

#[derive(Parser)]
#[command(
    name = "mrc-blast",
    version,
    about = "Raw per-packet UDP blaster/sink for the uSID fabric"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Receive on every plane of a node file (or on `[::1]:PORT`) and report goodput.
    Sink {
        /// This host's node file (from `mrc-fabric up`); omit for loopback.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Loopback mode: UDP port on ::1.
        #[arg(long, default_value_t = 4791)]
        port: u16,
        /// Milliseconds between progress lines (0: none).
        #[arg(long, default_value_t = 10)]
        interval_ms: u64,
        /// Stop after this many seconds (default: on SIGINT/SIGTERM).
        #[arg(long)]
        duration: Option<f64>,
        /// Stop after this many datagrams.
        #[arg(long)]
        count: Option<u64>,
        /// Print only the final summary, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send datagrams round-robin over planes and paths.
    Send {
        /// This host's node file; omit for loopback.
        #[arg(long, requires = "peer_config")]
        config: Option<PathBuf>,
        /// The receiving host's node file.
        #[arg(long, requires = "config")]
        peer_config: Option<PathBuf>,
        /// Loopback mode: UDP port on ::1.
        #[arg(long, default_value_t = 4791)]
        port: u16,
        /// UDP payload bytes per datagram (8952 fills a 9000 MTU).
        #[arg(long, default_value_t = 8952)]
        size: usize,
        /// Seconds to send.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Paths (EV path indices) per plane.
        #[arg(long, default_value_t = 16)]
        paths: u32,
        /// Datagrams per sendmmsg.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// Datagrams per message to one path: segmentation offload trains (UDP_SEGMENT, which needs UDP checksums:
        /// over SRv6 they are wrong at the receiver, which a veth fabric does not check), as mrc-host sends with
        /// offload on; 1: one datagram per message.
        #[arg(long, default_value_t = 1)]
        train: usize,
        /// Print only the final summary, as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn bad(arg: &str, msg: String) -> Result<(), (u8, String)> {
    Err((2, format!("invalid value for {arg}: {msg}")))
}

fn load(p: &Path) -> Result<NodeConfig, (u8, String)> {
    NodeConfig::load(p).map_err(|e| (1, format!("{}: {}: {}", p.display(), e.field, e.problem)))
}

fn secs(arg: &str, s: f64) -> Result<Duration, (u8, String)> {
    if s.is_finite() && s > 0.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err((
            2,
            format!("invalid value for {arg}: {s}; allowed > 0 seconds"),
        ))
    }
}

fn run(cli: Cli) -> Result<(), (u8, String)> {
    mrc_tools::stop::install();
    match cli.cmd {
        Cmd::Sink {
            config,
            port,
            interval_ms,
            duration,
            count,
            json,
        } => {
            let (binds, usid) = match &config {
                Some(p) => {
                    let c = load(p)?;
                    (
                        c.planes.iter().map(|pl| pl.addr).collect(),
                        c.usid_block.is_some(),
                    )
                }
                None => (vec![blast::loopback(port)], false),
            };
            let opts = SinkOpts {
                binds,
                usid,
                interval: (interval_ms > 0 && !json).then(|| Duration::from_millis(interval_ms)),
                duration: duration.map(|d| secs("--duration", d)).transpose()?,
                count,
            };
            let s =
                blast::sink(&opts, |l| println!("{l}")).map_err(|e| (1, format!("sink: {e}")))?;
            if json {
                println!("{}", serde_json::to_string(&s).unwrap_or_default());
            } else {
                println!("{}", s.line());
            }
            Ok(())
        }
        Cmd::Send {
            config,
            peer_config,
            port,
            size,
            duration,
            paths,
            batch,
            train,
            json,
        } => {
            if !(1..=65507).contains(&size) {
                return bad("--size", format!("{size}; allowed 1..=65507 bytes"));
            }
            if !(1..=1024).contains(&batch) {
                return bad("--batch", format!("{batch}; allowed 1..=1024"));
            }
            if !(1..=64).contains(&train) || size * train > 65_000 {
                return bad(
                    "--train",
                    format!("{train}; allowed 1..=64 datagrams, at most 65000 bytes together"),
                );
            }
            if paths == 0 || paths > 65535 {
                return bad("--paths", format!("{paths}; allowed 1..=65535"));
            }
            let planes = match (&config, &peer_config) {
                (Some(me), Some(peer)) => {
                    let (me, peer) = (load(me)?, load(peer)?);
                    if me.plane_count() != peer.plane_count() {
                        return bad(
                            "--peer-config",
                            format!(
                                "{} planes but --config has {}",
                                peer.plane_count(),
                                me.plane_count()
                            ),
                        );
                    }
                    blast::fabric_targets(&me, &peer, paths)
                }
                _ => vec![(blast::loopback(0), vec![blast::loopback(port)])],
            };
            let opts = SendOpts {
                planes,
                size,
                duration: secs("--duration", duration)?,
                batch,
                train,
            };
            let s = blast::send(&opts).map_err(|e| (1, format!("send: {e}")))?;
            if json {
                println!("{}", serde_json::to_string(&s).unwrap_or_default());
            } else {
                println!("{}", s.line());
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("mrc-blast: {msg}");
            ExitCode::from(code)
        }
    }
}
