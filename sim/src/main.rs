//! The `mrc-sim` command line: run, validate, sweep (in parallel or as a Slurm job array) and list metrics.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mrc_sim::report::METRICS;
use mrc_sim::scenario::FailureSet;
use mrc_sim::{Report, Scenario, run_scenario};

#[derive(Parser)]
#[command(
    name = "mrc-sim",
    version,
    about = "Fabric simulator running the MRC transport engine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and write report.json, summary.txt, CSVs and SVG plots.
    Run {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Output folder.
        #[arg(long, default_value = "sim-out")]
        out: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Skip the healthy baseline (and victim-alone) runs.
        #[arg(long)]
        no_baseline: bool,
    },
    /// Run scenarios and check the thresholds written in them; exits non-zero if any fails.
    Validate {
        /// Scenario files.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Also write each report under this folder.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a scenario over seeds and/or failure sets in parallel; writes sweep.csv and one folder per run.
    Sweep {
        /// Scenario file.
        scenario: PathBuf,
        /// Seeds, e.g. `1-8` or `1,5,9` (default: the scenario's `sweep.seeds`, else its seed).
        #[arg(long)]
        seeds: Option<String>,
        /// Output folder.
        #[arg(long, default_value = "sweep-out")]
        out: PathBuf,
        /// Worker threads (default: all cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only items with index % N == I (for a cluster job array), as `I/N`.
        #[arg(long)]
        shard: Option<String>,
        /// Skip baselines.
        #[arg(long)]
        no_baseline: bool,
    },
    /// Write a Slurm job-array script that spreads a sweep over N tasks (`sbatch` it).
    Slurm {
        /// Scenario file.
        scenario: PathBuf,
        /// Array tasks.
        #[arg(long, default_value_t = 16)]
        tasks: usize,
        /// Seeds, as for `sweep`.
        #[arg(long)]
        seeds: Option<String>,
        /// Output folder of the sweep.
        #[arg(long, default_value = "sweep-out")]
        out: PathBuf,
        /// Where to write the script.
        #[arg(long, default_value = "mrc-sim-sweep.sbatch")]
        script: PathBuf,
    },
    /// List the metrics thresholds can use.
    Metrics,
}

fn load(p: &Path, seed: Option<u64>) -> Result<Scenario, String> {
    let mut s = Scenario::load(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if let Some(x) = seed {
        s.seed = x;
    }
    Ok(s)
}

fn bar(len: u64, msg: &str) -> ProgressBar {
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(
            "{msg:>14} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    b.set_message(msg.to_string());
    b
}

/// Runs one scenario with a progress bar over simulated time; prints speed to stderr (never to files).
fn run_with_progress(s: &Scenario, baseline: bool) -> Result<Report, String> {
    let limit = s.run.limit_us as u64;
    let pb = bar(limit, "simulating");
    let t0 = std::time::Instant::now();
    let r = run_scenario(s, baseline, &mut |phase, ps| {
        pb.set_message(phase.to_string());
        pb.set_position(ps / 1_000_000);
    })
    .map_err(|e| e.to_string());
    pb.finish_and_clear();
    if let Ok(r) = &r {
        let wall = t0.elapsed().as_secs_f64();
        let ev = r.run.counters.events
            + r.baseline.as_ref().map_or(0, |b| b.counters.events)
            + r.victim_alone.as_ref().map_or(0, |b| b.counters.events);
        eprintln!(
            "{}: wall {:.2} s, {} events, {:.2} M events/s",
            s.name,
            wall,
            ev,
            ev as f64 / wall / 1e6
        );
    }
    r
}

fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u64, u64) = (
                a.parse()
                    .map_err(|_| format!("--seeds: bad number `{a}`"))?,
                b.parse()
                    .map_err(|_| format!("--seeds: bad number `{b}`"))?,
            );
            if b < a || b - a > 1_000_000 {
                return Err("--seeds: use A-B with A <= B (at most a million)".into());
            }
            v.extend(a..=b);
        } else {
            v.push(
                part.parse()
                    .map_err(|_| format!("--seeds: bad number `{part}`; use e.g. 1-8 or 1,5,9"))?,
            );
        }
    }
    Ok(v)
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let err = || format!("--shard {s}: use I/N with 0 <= I < N");
    let (i, n) = s.split_once('/').ok_or_else(err)?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| err())?, n.parse().map_err(|_| err())?);
    if n == 0 || i >= n {
        return Err(err());
    }
    Ok((i, n))
}

fn sweep_items(
    s: &Scenario,
    seeds: Option<&str>,
) -> Result<Vec<(u64, Option<FailureSet>)>, String> {
    let seeds = match seeds {
        Some(x) => parse_seeds(x)?,
        None if !s.sweep.seeds.is_empty() => s.sweep.seeds.clone(),
        None => vec![s.seed],
    };
    let sets: Vec<Option<FailureSet>> = if s.sweep.failure_sets.is_empty() {
        vec![None]
    } else {
        s.sweep.failure_sets.iter().cloned().map(Some).collect()
    };
    Ok(sets
        .iter()
        .flat_map(|f| seeds.iter().map(move |&x| (x, f.clone())))
        .collect())
}

fn main() -> ExitCode {
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> Result<ExitCode, String> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run {
            scenario,
            out,
            seed,
            no_baseline,
        } => {
            let s = load(&scenario, seed)?;
            let r = run_with_progress(&s, s.run.baseline && !no_baseline)?;
            r.write(&out)
                .map_err(|e| format!("{}: {e}", out.display()))?;
            print!("{}", r.summary());
            println!("wrote {}", out.display());
            let inv = r.invariant_violations();
            if !inv.is_empty() {
                return Err(format!("invariants violated: {}", inv.join(", ")));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Validate { scenarios, out } => {
            let mut ok = true;
            for p in &scenarios {
                let s = load(p, None)?;
                let r = run_with_progress(&s, true)?;
                if let Some(o) = &out {
                    let d = o.join(&s.name);
                    r.write(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                }
                println!("== {} ({})", s.name, p.display());
                for v in &r.checks {
                    println!(
                        "  {} {:<30} = {:<12.4} bounds [{}, {}]{}",
                        if v.pass { "PASS" } else { "FAIL" },
                        v.metric,
                        v.value,
                        v.min.map_or("-inf".into(), |x| x.to_string()),
                        v.max.map_or("inf".into(), |x| x.to_string()),
                        if v.why.is_empty() {
                            String::new()
                        } else {
                            format!("  {}", v.why)
                        }
                    );
                }
                let inv = r.invariant_violations();
                if !inv.is_empty() {
                    println!("  FAIL invariants: {}", inv.join(", "));
                    ok = false;
                }
                ok &= r.passed();
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Sweep {
            scenario,
            seeds,
            out,
            jobs,
            shard,
            no_baseline,
        } => {
            let s = load(&scenario, None)?;
            let items = sweep_items(&s, seeds.as_deref())?;
            let (si, sn) = match shard.as_deref() {
                Some(x) => parse_shard(x)?,
                None => (0, 1),
            };
            let mine: Vec<usize> = (0..items.len()).filter(|i| i % sn == si).collect();
            let jobs = jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .max(1);
            let pb = bar(mine.len() as u64, "sweep");
            let next = AtomicUsize::new(0);
            let results: Mutex<Vec<Option<Result<Report, String>>>> =
                Mutex::new((0..mine.len()).map(|_| None).collect());
            std::thread::scope(|sc| {
                for _ in 0..jobs.min(mine.len().max(1)) {
                    sc.spawn(|| {
                        loop {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            if k >= mine.len() {
                                break;
                            }
                            let (seed, set) = &items[mine[k]];
                            let mut sc = s.clone();
                            sc.seed = *seed;
                            if let Some(f) = set {
                                sc.failures = f.failures.clone();
                                sc.name = format!("{}-{}", s.name, f.name);
                            }
                            let r =
                                run_scenario(&sc, s.run.baseline && !no_baseline, &mut |_, _| {})
                                    .map_err(|e| e.to_string());
                            if let Ok(mut g) = results.lock() {
                                g[k] = Some(r);
                            }
                            pb.inc(1);
                        }
                    });
                }
            });
            pb.finish_and_clear();
            let results = results
                .into_inner()
                .map_err(|_| "a sweep worker panicked".to_string())?;
            std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
            let mut csv = String::from(
                "item,name,seed,finished,jct_us,jct_slowdown,fct_p99_us,waste_fraction,ev_retirements,checks_passed\n",
            );
            let mut ok = true;
            for (k, r) in results.into_iter().enumerate() {
                let idx = mine[k];
                let r = r.ok_or("missing sweep result")??;
                let dir = out.join(format!("item-{idx:05}"));
                r.write(&dir)
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
                let m = |n: &str| {
                    r.metrics
                        .get(n)
                        .map_or(String::new(), |v| format!("{v:.6}"))
                };
                csv.push_str(&format!(
                    "{idx},{},{},{},{},{},{},{},{},{}\n",
                    r.name,
                    r.seed,
                    r.run.finished,
                    m("jct_us"),
                    m("jct_slowdown"),
                    m("fct_p99_us"),
                    m("waste_fraction"),
                    m("ev_retirements"),
                    r.passed()
                ));
                ok &= r.invariant_violations().is_empty();
            }
            let name = if sn == 1 {
                "sweep.csv".to_string()
            } else {
                format!("sweep-shard-{si}-of-{sn}.csv")
            };
            std::fs::write(out.join(&name), csv).map_err(|e| e.to_string())?;
            println!("{} runs; wrote {}", mine.len(), out.join(name).display());
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Slurm {
            scenario,
            tasks,
            seeds,
            out,
            script,
        } => {
            let s = load(&scenario, None)?;
            let items = sweep_items(&s, seeds.as_deref())?;
            let tasks = tasks.clamp(1, items.len().max(1));
            let seeds_arg = seeds.map_or(String::new(), |x| format!(" --seeds {x}"));
            let text = format!(
                "#!/bin/bash\n\
                 # Generated by mrc-sim: {n} runs of {name} over {tasks} array tasks.\n\
                 #SBATCH --job-name=mrc-sim-{name}\n\
                 #SBATCH --array=0-{last}\n\
                 #SBATCH --cpus-per-task=1\n\
                 #SBATCH --output={out}/slurm-%A_%a.log\n\
                 set -euo pipefail\n\
                 mkdir -p {out}\n\
                 exec mrc-sim sweep {scen}{seeds_arg} --out {out} --jobs 1 --shard \"$SLURM_ARRAY_TASK_ID/{tasks}\"\n",
                n = items.len(),
                name = s.name,
                last = tasks - 1,
                out = out.display(),
                scen = scenario.display(),
            );
            std::fs::write(&script, text).map_err(|e| e.to_string())?;
            println!(
                "wrote {}: sbatch it; each task writes sweep-shard-I-of-{tasks}.csv under {}",
                script.display(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Metrics => {
            for (m, d) in METRICS {
                println!("{m:<30} {d}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
