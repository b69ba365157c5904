//! `mrc-fabric`: build a multi-plane SRv6 uSID fabric out of network namespaces and inject faults into it.
//!
//! Exit codes: 0 success, 1 operation failed (message on stderr), 2 bad argument (names the argument and the
//! allowed values). `exec` exits with the command's own status.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};
use mrc_tools::fabric::{self, Error, faults, plan::Topology, show, state::State};

#[derive(Parser)]
#[command(
    name = "mrc-fabric",
    version,
    about = "SRv6 uSID multi-plane netns fabric with fault injection"
)]
struct Cli {
    /// Namespace prefix (1-12 lowercase letters/digits); namespaces are PREFIX-hK, PREFIX-pPt0-I, ...
    #[arg(long, global = true, default_value = "mf")]
    prefix: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct LinkArgs {
    /// Plane of the link.
    #[arg(long)]
    plane: usize,
    /// The link, by its two ends: hK:t0-I (a host NIC) or t0-I:t1-J.
    #[arg(long)]
    link: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the fabric (refuses if this prefix's fabric exists).
    Up {
        /// Planes (1..=16).
        #[arg(long, default_value_t = 8)]
        planes: usize,
        /// T0 switches per plane (1..=256).
        #[arg(long, default_value_t = 2)]
        t0s: usize,
        /// T1 switches per plane (1..=256).
        #[arg(long, default_value_t = 1)]
        t1s: usize,
        /// Hosts per T0 (t0s * hosts-per-t0 <= 256).
        #[arg(long, default_value_t = 1)]
        hosts_per_t0: usize,
        /// MTU of every link (1280..=65535).
        #[arg(long, default_value_t = 9000)]
        mtu: u32,
        /// Switches ignore routes through a port without carrier (ICMP unreachable instead of silent loss).
        #[arg(long)]
        ignore_linkdown: bool,
    },
    /// Remove everything the state file lists (idempotent).
    Down,
    /// Hosts, links with counters, uN counters, active faults.
    Show {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside host k's namespace.
    Exec {
        /// Host index.
        host: usize,
        /// The command and its arguments (after --).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Admin-down one end of a link (routes the kernel deletes are saved and restored by link-up).
    LinkDown {
        #[command(flatten)]
        link: LinkArgs,
        /// Which end: a (first named) or b.
        #[arg(long, default_value = "a")]
        end: String,
    },
    /// Bring a downed link end back up and restore its routes.
    LinkUp {
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Silent cut: drop everything in and out of both ends (no carrier change, no ICMP).
    Cut {
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Undo a cut.
    Uncut {
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Silently cut every T0-T1 link of a plane.
    PlaneDown {
        /// The plane.
        plane: usize,
        /// Admin-down the T0 ends instead (hosts' T0s send ICMP unreachable).
        #[arg(long)]
        signal: bool,
        /// Cut at the next whole second at least 300 ms away, to the nanosecond (the command returns before it
        /// and prints that instant), instead of when nft happens to commit.
        #[arg(long)]
        at_second: bool,
    },
    /// Undo plane-down.
    PlaneUp {
        /// The plane.
        plane: usize,
    },
    /// Random drop on a link (nft numgen at the receiving end's ingress).
    Drop {
        #[command(flatten)]
        link: LinkArgs,
        /// Percentage dropped (0..=100, 0.01 steps).
        #[arg(long)]
        percent: f64,
        /// Direction: both, a-to-b, b-to-a.
        #[arg(long, default_value = "both")]
        dir: String,
    },
    /// Undo drop.
    Undrop {
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Rate-limit one end's egress (tbf).
    Rate {
        #[command(flatten)]
        link: LinkArgs,
        /// Rate in Mbit/s.
        #[arg(long)]
        mbit: u64,
        /// Which end's egress: a (first named) or b.
        #[arg(long, default_value = "a")]
        end: String,
        /// tbf burst in kB.
        #[arg(long, default_value_t = 256)]
        burst_kb: u64,
    },
    /// Undo rate.
    Unrate {
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Toggle a silent cut in the foreground until --for elapses or a signal; leaves the link up.
    Flap {
        #[command(flatten)]
        link: LinkArgs,
        /// Cuts per second.
        #[arg(long, default_value_t = 10.0)]
        hz: f64,
        /// Fraction of each period the link is cut.
        #[arg(long, default_value_t = 0.5)]
        duty: f64,
        /// Seconds to flap (default: until SIGINT/SIGTERM).
        #[arg(long = "for")]
        for_secs: Option<f64>,
    },
    /// Packet trimming on one end's egress (HTB + tc-BPF; needs clang and bpftool).
    Trim {
        /// on or off.
        state: String,
        #[command(flatten)]
        link: LinkArgs,
        /// Backlog (packets) above which uSID UDP packets are trimmed.
        #[arg(long, default_value_t = 32)]
        threshold: u32,
        /// Port rate in Mbit/s.
        #[arg(long, default_value_t = 1000)]
        mbit: u64,
        /// UDP payload bytes kept in a trimmed packet.
        #[arg(long, default_value_t = 64)]
        keep: u32,
        /// Which end's egress: a (first named) or b.
        #[arg(long, default_value = "a")]
        end: String,
    },
}

fn run(cli: Cli) -> Result<(), Error> {
    let pfx = cli.prefix.as_str();
    fabric::check_prefix(pfx)?;
    let say = |r: Result<String, Error>| r.map(|s| println!("{s}"));
    match cli.cmd {
        Cmd::Up {
            planes,
            t0s,
            t1s,
            hosts_per_t0,
            mtu,
            ignore_linkdown,
        } => {
            let topo = Topology {
                planes,
                t0s,
                t1s,
                hosts_per_t0,
                mtu,
            };
            let b = fabric::up(pfx, topo, ignore_linkdown)?;
            println!(
                "fabric {pfx} up in {:.2} s: {} namespaces, {} planes x ({t0s} T0 + {t1s} T1), {} hosts, mtu {mtu}",
                b.seconds,
                b.state.namespaces.len(),
                planes,
                topo.hosts()
            );
            for (k, f) in b.state.node_files.iter().enumerate() {
                println!("h{k} {} {}", Topology::host_ns(pfx, k), f.display());
            }
            Ok(())
        }
        Cmd::Down => {
            match fabric::down(pfx)? {
                Some(n) => println!("fabric {pfx} down: {n} namespaces deleted"),
                None => println!("no fabric with prefix {pfx}; nothing to do"),
            }
            Ok(())
        }
        Cmd::Show { json } => {
            let st = State::need(pfx)?;
            let r = show::report(&st)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&r).map_err(|e| Error::msg(e.to_string()))?
                );
            } else {
                print!("{}", show::render(&r));
            }
            Ok(())
        }
        Cmd::Exec { host, cmd } => {
            let st = State::need(pfx)?;
            let n = st.topology.hosts();
            if host >= n {
                return Err(Error::arg(
                    "<HOST>",
                    format!("{host}; allowed 0..={}", n - 1),
                ));
            }
            let ns = Topology::host_ns(pfx, host);
            let e = Command::new("ip")
                .args(["netns", "exec", &ns])
                .args(&cmd)
                .exec();
            Err(Error::msg(format!("ip netns exec {ns}: {e}")))
        }
        Cmd::LinkDown { link, end } => say(faults::link_down(pfx, link.plane, &link.link, &end)),
        Cmd::LinkUp { link } => say(faults::clear(pfx, "link-down", link.plane, &link.link)),
        Cmd::Cut { link } => say(faults::cut(pfx, link.plane, &link.link)),
        Cmd::Uncut { link } => say(faults::clear(pfx, "cut", link.plane, &link.link)),
        Cmd::PlaneDown {
            plane,
            signal,
            at_second,
        } => say(faults::plane_down(
            pfx,
            plane,
            signal,
            if at_second {
                faults::CutTime::NextSecond
            } else {
                faults::CutTime::Now
            },
        )),
        Cmd::PlaneUp { plane } => say(faults::plane_up(pfx, plane)),
        Cmd::Drop { link, percent, dir } => {
            let d = faults::Dir::parse(&dir)?;
            say(faults::drop(pfx, link.plane, &link.link, percent, d))
        }
        Cmd::Undrop { link } => say(faults::clear(pfx, "drop", link.plane, &link.link)),
        Cmd::Rate {
            link,
            mbit,
            end,
            burst_kb,
        } => say(faults::rate(
            pfx, link.plane, &link.link, &end, mbit, burst_kb,
        )),
        Cmd::Unrate { link } => say(faults::clear(pfx, "rate", link.plane, &link.link)),
        Cmd::Flap {
            link,
            hz,
            duty,
            for_secs,
        } => say(faults::flap(
            pfx, link.plane, &link.link, hz, duty, for_secs,
        )),
        Cmd::Trim {
            state,
            link,
            threshold,
            mbit,
            keep,
            end,
        } => match state.as_str() {
            "on" => say(faults::trim_on(
                pfx, link.plane, &link.link, &end, threshold, mbit, keep,
            )),
            "off" => say(faults::clear(pfx, "trim", link.plane, &link.link)),
            _ => Err(Error::arg(
                "<STATE>",
                format!("{state:?}; allowed: on, off"),
            )),
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrc-fabric: {e}");
            if e.arg.is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
