//! `mrc-nccl-harness`: drives a built `libnccl-net-mrc.so` the way NCCL's proxy threads do.
//!
//! ```text
//! mrc-nccl-harness [--lib PATH] [--version 8..12] props
//! mrc-nccl-harness pair    [run options]               both ranks in one process, two threads
//! mrc-nccl-harness suite                               NCCL's patterns over one connection (two threads)
//! mrc-nccl-harness listen  [run options]               receiving rank: prints HANDLE <hex>, then RESULT
//! mrc-nccl-harness connect --handle HEX [run options]  sending rank
//! mrc-nccl-harness bench   [--sizes 1m,16m] [--comms 1,2,4] [--ways one,both]   plugin vs mrc-perf, two ranks
//! mrc-nccl-harness init                                init (+finalize); exit 0 or the NCCL result code
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use mrc_nccl_harness::proxy::{self, Options, Report};
use mrc_nccl_harness::{Plugin, Version, bench, locate};

#[derive(Parser)]
#[command(about = "Drive libnccl-net-mrc.so as NCCL's proxy threads do")]
struct Cli {
    /// The plugin library (default: the one cargo built next to this binary).
    #[arg(long, global = true)]
    lib: Option<PathBuf>,
    /// Which exported table to use (ncclNetPlugin_vN).
    #[arg(long, global = true, default_value_t = 11, value_parser = clap::value_parser!(u32).range(8..=12))]
    version: u32,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the device properties.
    Props,
    /// Both ranks in one process (two threads).
    Pair(Run),
    /// NCCL's usage patterns in turn over one connection (two threads): steady, grouped, larger receives,
    /// empty messages, the full 32-request window, and the optional-completion hint (v9+). One RESULT line per
    /// pattern and side.
    Suite,
    /// The receiving rank: prints `HANDLE <hex>` for the sending rank.
    Listen(Run),
    /// The sending rank, connecting to a `listen` rank's handle.
    Connect {
        /// The handle `listen` printed.
        #[arg(long)]
        handle: String,
        #[command(flatten)]
        run: Run,
    },
    /// Throughput as NCCL drives the plugin: two rank processes, N comms per direction driven by one thread
    /// per rank, one way and both ways, beside mrc-perf's equivalent; the median of `--reps` ratios per size.
    Bench {
        /// Message sizes (k, m, g suffixes).
        #[arg(long, value_delimiter = ',', default_value = "1m,16m")]
        sizes: Vec<String>,
        /// Comms per direction (NCCL opens one per channel).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        comms: Vec<usize>,
        /// Directions: one, both, or one,both.
        #[arg(long, value_delimiter = ',', default_value = "one,both")]
        ways: Vec<String>,
        /// Bytes per size and direction.
        #[arg(long, default_value = "512m")]
        bytes: String,
        /// Outstanding requests per comm.
        #[arg(long, default_value_t = 8)]
        depth: usize,
        /// Back-to-back repetitions (the figure is their median).
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Loopback planes of both transports.
        #[arg(long, default_value_t = 4)]
        planes: usize,
        /// mrc-perf to compare with (default: the one next to this binary; `none` to skip).
        #[arg(long)]
        perf: Option<PathBuf>,
        /// Check every byte of every message (a test: the figures then include the checking).
        #[arg(long)]
        verify: bool,
    },
    /// One rank of `bench` (started by it; talks to it on stdin/stdout).
    #[command(hide = true)]
    BenchRank {
        #[arg(long)]
        rank: u32,
        #[arg(long)]
        comms: usize,
        #[arg(long)]
        both: bool,
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
        #[arg(long)]
        depth: usize,
        #[arg(long)]
        bytes: usize,
        #[arg(long)]
        verify: bool,
    },
    /// Call init (and finalize): exit 0, or with the NCCL result code.
    Init,
}

#[derive(Args, Clone)]
struct Run {
    /// Receive requests to complete.
    #[arg(long, default_value_t = 64)]
    messages: usize,
    /// Receive buffer size (k, m, g suffixes).
    #[arg(long, default_value = "64k")]
    size: String,
    /// Buffers per grouped receive.
    #[arg(long, default_value_t = 1)]
    group: usize,
    /// Outstanding requests per comm.
    #[arg(long, default_value_t = 8)]
    depth: usize,
    /// Send less than the receive buffer holds.
    #[arg(long)]
    shrink: bool,
    /// Pass the optional receive-completion hint (v9+).
    #[arg(long)]
    hint: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Print `PROGRESS <done> <messages>` every N completed receives (0: never).
    #[arg(long, default_value_t = 0)]
    progress: usize,
}

fn bytes(s: &str) -> Result<usize, String> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last() {
        Some('k') => (&s[..s.len() - 1], 1 << 10),
        Some('m') => (&s[..s.len() - 1], 1 << 20),
        Some('g') => (&s[..s.len() - 1], 1 << 30),
        _ => (&s[..], 1),
    };
    num.parse::<usize>()
        .map(|n| n * mul)
        .map_err(|_| format!("{s:?} is not a size (e.g. 4k, 1m)"))
}

impl Run {
    fn options(&self) -> Result<Options, String> {
        Ok(Options {
            messages: self.messages,
            size: bytes(&self.size)?,
            group: self.group.clamp(1, 8),
            depth: self.depth.clamp(1, 32),
            shrink: self.shrink,
            hint: self.hint,
            verify: true,
            timeout: Duration::from_secs(self.timeout),
            progress: self.progress,
        })
    }
}

fn result_line(role: &str, r: &Report) {
    println!("RESULT ok role={role} {}", result_fields(r));
}

fn result_fields(r: &Report) -> String {
    format!(
        "requests={} bytes={} seconds={:.6} gbps={:.3} null_retries={} short_receives={}",
        r.requests,
        r.bytes,
        r.elapsed.as_secs_f64(),
        r.gbps(),
        r.null_retries,
        r.short_receives
    )
}

fn run(cli: Cli) -> Result<(), String> {
    let lib = match cli.lib {
        Some(l) => l,
        None => locate::plugin_near(&std::env::current_exe().map_err(|e| e.to_string())?)?,
    };
    let v = Version::from_number(cli.version).ok_or("version must be 8..=12")?;
    let p = Plugin::load(&lib, v)?;
    match cli.cmd {
        Cmd::Props => {
            p.init(0).map_err(|c| format!("init: {c}"))?;
            println!(
                "name {:?}, devices {}",
                p.name(),
                p.devices().map_err(|c| c.to_string())?
            );
            println!("{:#?}", p.properties(0).map_err(|c| c.to_string())?);
        }
        Cmd::Init => {
            let ctx = p.init(0).map_err(|c| format!("INIT {}", c.0))?;
            p.finalize(ctx).map_err(|c| format!("FINALIZE {}", c.0))?;
            println!("INIT ok");
        }
        Cmd::Pair(r) => {
            let o = r.options()?;
            let reps = proxy::pair(&p, std::slice::from_ref(&o))?;
            result_line("receiver", &reps[0].0);
            result_line("sender", &reps[0].1);
        }
        Cmd::Suite => {
            let (names, runs): (Vec<&str>, Vec<Options>) = proxy::suite(v).into_iter().unzip();
            let reps = proxy::pair(&p, &runs)?;
            for (name, (r, s)) in names.iter().zip(&reps) {
                println!("RESULT ok run={name} role=receiver {}", result_fields(r));
                println!("RESULT ok run={name} role=sender {}", result_fields(s));
            }
        }
        Cmd::Listen(r) => {
            let o = r.options()?;
            let ctx = p.init(1).map_err(|c| format!("init: {c}"))?;
            let (l, c) = proxy::accept(
                &p,
                ctx,
                |h| println!("HANDLE {}", proxy::hex(&h)),
                o.timeout,
            )?;
            let rep = proxy::receive(&p, c, &o)?;
            p.close_recv(c).map_err(|e| format!("closeRecv: {e}"))?;
            p.close_listen(l).map_err(|e| format!("closeListen: {e}"))?;
            p.finalize(ctx).map_err(|e| format!("finalize: {e}"))?;
            result_line("receiver", &rep);
        }
        Cmd::Connect { handle, run } => {
            let o = run.options()?;
            let ctx = p.init(2).map_err(|c| format!("init: {c}"))?;
            let c = proxy::connect(&p, ctx, proxy::unhex(&handle)?, o.timeout)?;
            let rep = proxy::send(&p, c, &o)?;
            p.close_send(c).map_err(|e| format!("closeSend: {e}"))?;
            p.finalize(ctx).map_err(|e| format!("finalize: {e}"))?;
            result_line("sender", &rep);
        }
        Cmd::Bench {
            sizes,
            comms,
            ways,
            bytes: budget,
            depth,
            reps,
            planes,
            perf,
            verify,
        } => {
            let perf = match perf {
                Some(p) if p.as_os_str() == "none" => None,
                Some(p) => Some(p),
                None => Some(locate::sibling("mrc-perf")?),
            };
            let ways = ways
                .iter()
                .map(|w| match w.as_str() {
                    "one" => Ok(false),
                    "both" => Ok(true),
                    _ => Err(format!("--ways {w}: give one, both or one,both")),
                })
                .collect::<Result<_, _>>()?;
            bench::bench(&bench::BenchOptions {
                comms: comms.into_iter().map(|c| c.clamp(1, 64)).collect(),
                ways,
                sizes: sizes.iter().map(|s| bytes(s)).collect::<Result<_, _>>()?,
                depth: depth.clamp(1, 32),
                bytes: bytes(&budget)?,
                reps: reps.max(1),
                planes,
                perf,
                version: cli.version,
                lib,
                verify,
            })?;
        }
        Cmd::BenchRank {
            rank,
            comms,
            both,
            sizes,
            depth,
            bytes,
            verify,
        } => bench::rank(
            &p,
            &bench::RankOptions {
                rank,
                comms,
                both,
                sizes,
                depth,
                bytes,
                timeout: Duration::from_secs(300),
                verify,
            },
        )?,
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrc-nccl-harness: {e}");
            println!("RESULT failed {e}");
            ExitCode::FAILURE
        }
    }
}
