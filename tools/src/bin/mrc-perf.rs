//! `mrc-perf`: perftest-style bandwidth and latency of MRC over UDP. See `mrc-perf --help`.

use clap::Parser;
use mrc_tools::perf::{Options, run};

fn main() {
    let o = Options::parse();
    let r = match o.server.clone() {
        Some(s) => run::client(&o, &s),
        None => run::server(&o),
    };
    if let Err(f) = r {
        eprintln!("mrc-perf: {}", f.msg);
        std::process::exit(f.code);
    }
}
