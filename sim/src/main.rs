//! The `mrc-sim` command line: run, validate, sweep (in parallel or as a Slurm job array), merge shards and
//! list metrics. Everything that can be checked before simulating is: the scenario, its references against
//! the fabric, the memory it needs and the output folder.

mod pages;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use mrc_sim::capture::CaptureSpec;
use mrc_sim::metrics::METRICS;
use mrc_sim::plan::{self, Plan, human_bytes};
use mrc_sim::sweep::{self, Item};
use mrc_sim::{Report, Scenario, run_scenario, run_scenario_with};

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

#[derive(clap::Args, Clone)]
struct Limits {
    /// Refuse scenarios estimated to need more memory than this (e.g. 64G, 512M, 2Ti; default: the memory
    /// this machine has available now).
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
}

/// Packet capture of the failed run (`run` only; sim/README.md "Packet capture").
#[derive(clap::Args, Clone)]
struct CaptureArgs {
    /// Write a pcapng of the packets of the hosts and links named below (open it with tools/wireshark).
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// A host whose endpoint's packets are captured, one interface per plane (repeatable).
    #[arg(long, value_name = "HOST", requires = "capture")]
    capture_host: Vec<u32>,
    /// Links whose ports' departures are captured, in the scenario's syntax, e.g.
    /// '{ tier = "t0_t1", plane = 3, t0 = 0 }' (repeatable).
    #[arg(long, value_name = "LINK", requires = "capture")]
    capture_link: Vec<String>,
    /// Start of the window, µs of simulated time.
    #[arg(long, default_value_t = 0.0, requires = "capture")]
    capture_from_us: f64,
    /// End of the window, µs of simulated time (default: the end of the run).
    #[arg(long, requires = "capture")]
    capture_until_us: Option<f64>,
    /// Bytes kept per frame (0: whole; the simulator's payload bytes are filler).
    #[arg(long, default_value_t = mrc_sim::capture::DEFAULT_SNAPLEN, requires = "capture")]
    capture_snaplen: usize,
    /// Stop writing past this many MiB (0: no cap).
    #[arg(long, default_value_t = 256, requires = "capture")]
    capture_max_mb: u64,
}

impl CaptureArgs {
    fn spec(&self) -> Result<Option<CaptureSpec>, String> {
        let Some(path) = &self.capture else {
            return Ok(None);
        };
        #[derive(serde::Deserialize)]
        struct One {
            link: mrc_sim::scenario::LinkRef,
        }
        let links = self
            .capture_link
            .iter()
            .map(|l| {
                toml::from_str::<One>(&format!("link = {l}"))
                    .map(|o| o.link)
                    .map_err(|e| format!("--capture-link {l}: {}", e.message()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(CaptureSpec {
            path: path.clone(),
            hosts: self.capture_host.clone(),
            links,
            from_us: self.capture_from_us,
            until_us: self.capture_until_us,
            snaplen: self.capture_snaplen,
            max_bytes: self.capture_max_mb.saturating_mul(1 << 20),
        }))
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and write report.json, summary.txt, CSVs and SVG plots.
    Run(RunArgs),
    /// Run a scenario and compare its FCTs with the ideal (fair share of each transfer's tightest bottleneck
    /// plus one base RTT) and, when it has failures, with the same run without them.
    Compare(CompareArgs),
    /// Run scenarios and check the thresholds written in them; exits 1 if any fails.
    Validate(ValidateArgs),
    /// Run a scenario over seeds and/or failure sets in parallel; writes sweep.csv (or a shard of it) and one
    /// folder per run, named by failure set and seed.
    Sweep(SweepArgs),
    /// Write a Slurm job-array script that spreads a sweep over N tasks; `sbatch` it, then `mrc-sim merge`.
    Slurm(SlurmArgs),
    /// Join the shard files of a sweep folder into sweep.csv; exits 1 if any run failed a check.
    Merge {
        /// The sweep's output folder.
        dir: PathBuf,
    },
    /// Check scenarios without running them: every field, every reference against the fabric, and the
    /// memory each would need.
    Check(CheckArgs),
    /// List the metrics thresholds can use.
    Metrics,
}

/// The arguments of `mrc-sim run`.
#[derive(clap::Args)]
struct RunArgs {
    /// Scenario file (TOML).
    scenario: PathBuf,
    /// Output folder (created; must not be a file).
    #[arg(long, default_value = "sim-out")]
    out: PathBuf,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Skip the healthy baseline (and victim-alone) runs.
    #[arg(long)]
    no_baseline: bool,
    /// Threads for one run (default: this machine's cores; capped at one per T0 position; one with a
    /// capture). The outputs are the same for every count (sim/README.md "Parallel runs").
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Run each lookahead window in time order rather than leaf by leaf: the same outputs, slower at scale
    /// (sim/README.md "Speed and scale"); for comparing the two.
    #[arg(long)]
    time_order: bool,
    #[command(flatten)]
    limits: Limits,
    #[command(flatten)]
    capture: CaptureArgs,
}

/// The arguments of `mrc-sim compare`.
#[derive(clap::Args)]
struct CompareArgs {
    /// Scenario file (TOML).
    scenario: PathBuf,
    /// Also write the run's outputs here (as `run` does).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    limits: Limits,
}

/// The arguments of `mrc-sim validate`.
#[derive(clap::Args)]
struct ValidateArgs {
    /// Scenario files.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Also write each report under this folder (one subfolder per scenario name).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    limits: Limits,
}

/// The arguments of `mrc-sim sweep`.
#[derive(clap::Args)]
struct SweepArgs {
    /// Scenario file.
    scenario: PathBuf,
    /// Seeds, e.g. `1-8` or `1,5,9` (default: the scenario's `sweep.seeds`, else its seed).
    #[arg(long)]
    seeds: Option<String>,
    /// Output folder.
    #[arg(long, default_value = "sweep-out")]
    out: PathBuf,
    /// Worker threads (default: all cores, fewer if memory is short).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only items with index % N == I (for a cluster job array), as `I/N`; writes
    /// sweep-shard-I-of-N.csv for `mrc-sim merge`.
    #[arg(long)]
    shard: Option<String>,
    /// Skip baselines.
    #[arg(long)]
    no_baseline: bool,
    #[command(flatten)]
    limits: Limits,
}

/// The arguments of `mrc-sim check`.
#[derive(clap::Args)]
struct CheckArgs {
    /// Scenario files.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// Threads the run would use (as `run --threads`; default: this machine's cores): each partition
    /// past the first adds its copy of the ports to the estimate.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    #[command(flatten)]
    limits: Limits,
}

fn load(p: &Path, seed: Option<u64>) -> Result<Scenario, String> {
    let mut s = Scenario::load(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if let Some(x) = seed {
        s.seed = x;
    }
    Ok(s)
}

/// The memory a run may use: `--max-memory`, else what the machine has available.
fn memory_limit(l: &Limits) -> Result<(u64, String), String> {
    match &l.max_memory {
        Some(m) => Ok((plan::parse_size(m)?, "given by --max-memory".into())),
        None => Ok(match plan::available_memory() {
            Some(b) => (b, "this machine has available".into()),
            None => (u64::MAX, "(unknown on this system)".into()),
        }),
    }
}

/// Checks a scenario against the fabric and the memory limit before anything is built.
fn plan_for(p: &Path, s: &Scenario, limit: &(u64, String)) -> Result<Plan, String> {
    let plan = Plan::new(s).map_err(|e| format!("{}: {e}", p.display()))?;
    plan.check_memory(s, limit.0, &limit.1)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(plan)
}

/// Makes sure `dir` is (or can become) a writable folder, before any simulation starts.
fn prepare_out(dir: &Path, flag: &str) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "{flag} {}: is a file, not a folder; give a folder (it is created if missing)",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{flag} {}: cannot create the folder: {e}", dir.display()))?;
    // One probe name per process: the shards of a Slurm array check the same folder at the same moment.
    let probe = dir.join(format!(".mrc-sim-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| format!("{flag} {}: cannot write into it: {e}", dir.display()))
}

/// `run`, `compare` and `validate` run one scenario; failure sets are a sweep's, and running the scenario's own
/// failures alone would quietly drop them.
fn refuse_failure_sets(s: &Scenario, path: &Path, cmd: &str) -> Result<(), String> {
    if s.sweep.failure_sets.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}: sweep.failure_sets: `{cmd}` runs one failure set, and this scenario has {}; run them with \
         `mrc-sim sweep {}` (each set's failures are added to the scenario's `failures`)",
        path.display(),
        s.sweep.failure_sets.len(),
        path.display()
    ))
}

fn refuse_baseline_metrics(s: &Scenario, flag: &str) -> Result<(), String> {
    for (i, th) in s.validate.iter().enumerate() {
        if mrc_sim::metrics::find(&th.metric).is_some_and(|m| match m.needs {
            mrc_sim::metrics::Needs::Run | mrc_sim::metrics::Needs::Failures => false,
            mrc_sim::metrics::Needs::Healthy => !s.failures.is_empty(),
            _ => true,
        }) {
            return Err(format!(
                "{flag}: validate[{i}].metric `{}` needs the baseline run that {flag} skips; drop {flag}",
                th.metric
            ));
        }
    }
    Ok(())
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

/// Peak resident memory of this process so far (Linux), bytes.
fn peak_rss() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

fn events(r: &Report) -> u64 {
    r.run.counters.events
        + r.baseline.as_ref().map_or(0, |b| b.counters.events)
        + r.victim_alone.as_ref().map_or(0, |b| b.counters.events)
}

/// Runs one scenario with a progress bar per phase (baseline, victim alone, run) over the share of the
/// workload's payload placed, so its ETA is the time the rest of the payload takes at the rate so far (the
/// simulated time says nothing of how far a run is: it ends when the last transfer does, well before
/// `run.limit_us`). Prints speed and memory to stderr (never to files: reports hold no wall-clock values).
/// `first` says whether this is the process's first run: the peak RSS is the process's, so after the first run
/// it also counts earlier scenarios.
fn run_with_progress(
    s: &Scenario,
    plan: &Plan,
    baseline: bool,
    capture: Option<&CaptureSpec>,
    first: bool,
) -> Result<Report, String> {
    let pb = bar(1000, "simulating");
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>40} [{bar:40}] {percent:>3}% of the payload placed, {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let t0 = Instant::now();
    let mut current = String::new();
    let r = run_scenario_with(s, baseline, capture, &mut |phase, p| {
        if current != phase {
            // Each phase is a run of its own: its bar (and ETA) starts again.
            current = phase.to_string();
            pb.reset();
        }
        pb.set_message(format!(
            "{phase}: {:.1} M events, {:.0} µs",
            p.events as f64 / 1e6,
            p.now_ps as f64 / 1e6
        ));
        pb.set_position((p.done * 1000.0) as u64);
        true
    })
    .map_err(|e| e.to_string());
    pb.finish_and_clear();
    if let Ok(r) = &r {
        for w in &r.warnings {
            eprintln!("{}: warning: {w}", s.name);
        }
        let wall = t0.elapsed().as_secs_f64();
        let ev = events(r);
        let runs = 1 + usize::from(r.baseline.is_some()) + usize::from(r.victim_alone.is_some());
        eprintln!(
            "{}: wall {:.2} s, {} events in {} (the run{}{}), {:.2} M events/s, {} {} (estimated {})",
            s.name,
            wall,
            ev,
            if runs == 1 {
                "1 run".to_string()
            } else {
                format!("{runs} runs")
            },
            if r.baseline.is_some() {
                " and its healthy baseline"
            } else {
                ""
            },
            if r.victim_alone.is_some() {
                " and the victim alone"
            } else {
                ""
            },
            ev as f64 / wall / 1e6,
            if first {
                "peak RSS"
            } else {
                "peak RSS of this process so far (earlier scenarios included)"
            },
            peak_rss().map_or("?".into(), human_bytes),
            human_bytes(plan.memory.bytes)
        );
    }
    r
}

fn main() -> ExitCode {
    pages::use_huge_pages();
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn print_checks(r: &Report) {
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
}

fn real_main() -> Result<ExitCode, String> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => run(a),
        Cmd::Compare(a) => compare(a),
        Cmd::Validate(a) => validate(a),
        Cmd::Sweep(a) => sweep_cmd(a),
        Cmd::Slurm(a) => slurm(a),
        Cmd::Merge { dir } => {
            let m = sweep::merge(&dir)?;
            println!(
                "merged {} runs from {} shards into {}",
                m.runs,
                m.shards,
                m.path.display()
            );
            let csv = std::fs::read_to_string(&m.path)
                .map_err(|e| format!("{}: {e}", m.path.display()))?;
            let sets = sweep::write_summary(&dir, &csv)?;
            print!("{}", sweep::summary_table(&sets));
            for (folder, checks) in &m.failed {
                println!("FAIL {folder}: {checks}");
            }
            if m.failed.is_empty() {
                println!("every run passed its checks");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("{} of {} runs failed a check", m.failed.len(), m.runs);
                Ok(ExitCode::from(1))
            }
        }
        Cmd::Check(a) => check(a),
        Cmd::Metrics => {
            for m in METRICS {
                println!("{:<30} {}", m.name, m.about);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `mrc-sim run`: one scenario, its outputs written and its invariants checked.
fn run(a: RunArgs) -> Result<ExitCode, String> {
    let RunArgs {
        scenario,
        out,
        seed,
        no_baseline,
        threads,
        time_order,
        limits,
        capture,
    } = a;
    let mut s = load(&scenario, seed)?;
    s.run.threads = threads.unwrap_or_else(cores).max(1);
    s.run.time_order = time_order;
    refuse_failure_sets(&s, &scenario, "run")?;
    if no_baseline {
        refuse_baseline_metrics(&s, "--no-baseline")?;
    }
    let capture = capture.spec()?;
    let plan = plan_for(&scenario, &s, &memory_limit(&limits)?)?;
    prepare_out(&out, "--out")?;
    let r = run_with_progress(
        &s,
        &plan,
        s.run.baseline && !no_baseline,
        capture.as_ref(),
        true,
    )?;
    if let Some(c) = &capture {
        println!("wrote {}", c.path.display());
    }
    r.write(&out)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    print!("{}", r.summary());
    println!("wrote {}", out.display());
    println!(
        "replay: mrc-sim run {}",
        out.join("scenario.toml").display()
    );
    let inv = r.invariant_violations();
    if !inv.is_empty() {
        return Err(format!("invariants violated: {}", inv.join(", ")));
    }
    Ok(ExitCode::SUCCESS)
}

/// `mrc-sim compare`: one scenario against the ideal and against itself without failures.
fn compare(a: CompareArgs) -> Result<ExitCode, String> {
    let CompareArgs {
        scenario,
        out,
        seed,
        limits,
    } = a;
    let s = load(&scenario, seed)?;
    refuse_failure_sets(&s, &scenario, "compare")?;
    let plan = plan_for(&scenario, &s, &memory_limit(&limits)?)?;
    if let Some(o) = &out {
        prepare_out(o, "--out")?;
    }
    let r = run_with_progress(&s, &plan, true, None, true)?;
    if let Some(o) = &out {
        r.write(o).map_err(|e| format!("{}: {e}", o.display()))?;
    }
    print!("{}", r.comparison());
    let inv = r.invariant_violations();
    if !inv.is_empty() {
        return Err(format!("invariants violated: {}", inv.join(", ")));
    }
    Ok(ExitCode::SUCCESS)
}

/// `mrc-sim validate`: every scenario checked first, then each run and its thresholds printed.
fn validate(a: ValidateArgs) -> Result<ExitCode, String> {
    let ValidateArgs {
        scenarios,
        out,
        limits,
    } = a;
    let limit = memory_limit(&limits)?;
    // Check every scenario (and the output folders) before running any.
    let mut loaded = Vec::new();
    for p in &scenarios {
        let s = load(p, None)?;
        refuse_failure_sets(&s, p, "validate")?;
        let plan = plan_for(p, &s, &limit)?;
        if let Some(o) = &out {
            prepare_out(&o.join(&s.name), "--out")?;
        }
        loaded.push((p, s, plan));
    }
    let mut ok = true;
    for (k, (p, s, plan)) in loaded.iter().enumerate() {
        let r = run_with_progress(s, plan, s.run.baseline, None, k == 0)?;
        if let Some(o) = &out {
            let d = o.join(&s.name);
            r.write(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        println!("== {} ({})", s.name, p.display());
        print_checks(&r);
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

/// `mrc-sim sweep`: the items of this shard run in parallel within the memory limit, then the CSV and summary.
fn sweep_cmd(a: SweepArgs) -> Result<ExitCode, String> {
    let SweepArgs {
        scenario,
        seeds,
        out,
        jobs,
        shard,
        no_baseline,
        limits,
    } = a;
    let s = load(&scenario, None)?;
    if no_baseline {
        refuse_baseline_metrics(&s, "--no-baseline")?;
    }
    let items = sweep::items(&s, seeds.as_deref())?;
    let (si, sn) = match shard.as_deref() {
        Some(x) => sweep::parse_shard(x)?,
        None => (0, 1),
    };
    let limit = memory_limit(&limits)?;
    // Every item's scenario is checked (and sized) before the first one runs.
    let mut mine: Vec<(Item, Scenario, Plan)> = Vec::new();
    for it in items.iter().filter(|it| it.index % sn == si) {
        let sc = it.scenario(&s);
        let plan = Plan::new(&sc).map_err(|e| {
            format!(
                "{} (failure set {}): {e}",
                scenario.display(),
                it.set_name()
            )
        })?;
        plan.check_memory(&sc, limit.0, &limit.1)
            .map_err(|e| format!("{}: {e}", scenario.display()))?;
        mine.push((it.clone(), sc, plan));
    }
    prepare_out(&out, "--out")?;
    sweep::write_plan(&out, &items)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut jobs = jobs.unwrap_or(cores).max(1);
    let each = mine
        .iter()
        .map(|m| m.2.memory.bytes)
        .max()
        .unwrap_or(1)
        .max(1);
    let fit = usize::try_from(limit.0 / each).unwrap_or(usize::MAX);
    if fit == 0 {
        return Err(format!(
            "a run needs about {}, more than the {} {}",
            human_bytes(each),
            human_bytes(limit.0),
            limit.1
        ));
    }
    if fit < jobs {
        eprintln!(
            "sweep: {jobs} parallel runs of about {} each would not fit in {}; running {fit} at a time",
            human_bytes(each),
            human_bytes(limit.0)
        );
        jobs = fit;
    }
    let pb = bar(mine.len() as u64, "sweep");
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Report, String>>>> =
        Mutex::new((0..mine.len()).map(|_| None).collect());
    let baseline = s.run.baseline && !no_baseline;
    std::thread::scope(|sc| {
        for _ in 0..jobs.min(mine.len().max(1)) {
            sc.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= mine.len() {
                        break;
                    }
                    let r = run_scenario(&mine[k].1, baseline, &mut |_, _| true)
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
    let mut csv = format!("{}\n", sweep::HEADER);
    let mut ok = true;
    for (k, r) in results.into_iter().enumerate() {
        let item = &mine[k].0;
        let r = r.ok_or("missing sweep result")??;
        let dir = out.join(item.folder());
        r.write(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        csv.push_str(&sweep::row(item, &r));
        ok &= r.passed() && r.invariant_violations().is_empty();
    }
    let name = if shard.is_some() {
        sweep::shard_file(si, sn)
    } else {
        "sweep.csv".to_string()
    };
    sweep::write_atomic(&out.join(&name), &csv)?;
    println!("{} runs; wrote {}", mine.len(), out.join(&name).display());
    if shard.is_none() {
        let sets = sweep::write_summary(&out, &csv)?;
        print!("{}", sweep::summary_table(&sets));
        println!(
            "wrote {} and {}",
            out.join("sweep-summary.csv").display(),
            out.join("sweep-summary.svg").display()
        );
    }
    let failed = sweep::failed_runs(&csv);
    for (folder, checks) in &failed {
        println!("FAIL {folder}: {checks}");
    }
    if !failed.is_empty() {
        println!("{} of {} runs failed a check", failed.len(), mine.len());
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `mrc-sim check`: each scenario planned and sized, nothing run.
fn check(a: CheckArgs) -> Result<ExitCode, String> {
    let CheckArgs {
        scenarios,
        threads,
        limits,
    } = a;
    let limit = memory_limit(&limits)?;
    for p in &scenarios {
        let mut s = load(p, None)?;
        s.run.threads = threads.unwrap_or_else(cores).max(1);
        let plan = plan_for(p, &s, &limit)?;
        let z = &plan.sizes;
        println!(
            "{}: OK: {} hosts x {} planes, {} switches, {} directed ports, {} transfers on {} QP pairs \
             ({} EVs each); about {} of memory ({})",
            p.display(),
            z.hosts,
            plan.shape.planes,
            z.switches,
            z.ports,
            plan.transfers,
            plan.qp_pairs,
            plan.evs_per_qp,
            human_bytes(plan.memory.bytes),
            plan.memory
                .parts
                .iter()
                .map(|(n, b)| format!("{n} {}", human_bytes(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
struct SlurmArgs {
    /// Scenario file.
    scenario: PathBuf,
    /// Array tasks.
    #[arg(long, default_value_t = 16)]
    tasks: usize,
    /// Seeds, as for `sweep`.
    #[arg(long)]
    seeds: Option<String>,
    /// Output folder of the sweep (created now, with its logs/ folder).
    #[arg(long, default_value = "sweep-out")]
    out: PathBuf,
    /// Where to write the script.
    #[arg(long, default_value = "mrc-sim-sweep.sbatch")]
    script: PathBuf,
    /// Time limit per task (Slurm format, e.g. 2:00:00); default: measured by a calibration run.
    #[arg(long)]
    time: Option<String>,
    /// Memory per task (e.g. 4G); default: the larger of the estimate and the calibration's peak.
    #[arg(long)]
    mem: Option<String>,
    /// Wall-clock seconds the calibration run may take (0: none; then give --time).
    #[arg(long, default_value_t = 30)]
    calibrate_secs: u64,
    /// Extra `#SBATCH` lines, e.g. `--partition=short` (repeatable).
    #[arg(long = "sbatch")]
    sbatch: Vec<String>,
    /// A line the script runs before mrc-sim, e.g. `module load rust` (repeatable).
    #[arg(long)]
    setup: Vec<String>,
    /// The mrc-sim binary the tasks run (default: this one, by absolute path).
    #[arg(long)]
    binary: Option<PathBuf>,
}

/// What one calibration run measured.
struct Calibration {
    /// Wall seconds one sweep item is expected to take.
    item_secs: f64,
    /// Peak resident memory seen, bytes.
    peak: Option<u64>,
    /// How it was obtained, for the script's header.
    how: String,
}

/// Runs the sweep's first item for at most `secs` and measures it; extrapolates from the simulated time
/// covered when it does not finish (assuming every variant runs to `limit_us`: an upper bound).
fn calibrate(s: &Scenario, item: &Item, secs: u64) -> Result<Calibration, String> {
    let sc = item.scenario(s);
    let variants = 1
        + usize::from(sc.run.baseline && !sc.failures.is_empty())
        + usize::from(sc.run.baseline && sc.workload.victim.is_some());
    let t0 = Instant::now();
    let mut covered: std::collections::BTreeMap<String, u64> = Default::default();
    let mut stopped = false;
    let r = run_scenario(&sc, sc.run.baseline, &mut |phase, ps| {
        covered.insert(phase.to_string(), ps);
        if t0.elapsed().as_secs() >= secs {
            stopped = true;
            return false;
        }
        true
    })
    .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64();
    let peak = peak_rss();
    if !stopped {
        return Ok(Calibration {
            item_secs: wall,
            peak,
            how: format!(
                "one run ({}) took {wall:.1} s, {} events, peak RSS {}",
                item.folder(),
                events(&r),
                peak.map_or("?".into(), human_bytes)
            ),
        });
    }
    let limit_ps = sc.run.limit_us * 1e6;
    let done: f64 = covered.values().map(|&p| p as f64).sum::<f64>().max(1.0);
    let total = limit_ps * variants as f64;
    let item_secs = wall * (total / done).max(1.0);
    Ok(Calibration {
        item_secs,
        peak,
        how: format!(
            "{wall:.1} s simulated {:.1} of up to {:.1} us ({variants} variant(s) to run.limit_us): about {item_secs:.0} s \
             per run, an upper bound",
            done / 1e6,
            total / 1e6
        ),
    })
}

/// `H:MM:SS` for Slurm.
fn slurm_time(secs: f64) -> String {
    let s = secs.ceil().max(60.0) as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn slurm(a: SlurmArgs) -> Result<ExitCode, String> {
    let s = load(&a.scenario, None)?;
    let items = sweep::items(&s, a.seeds.as_deref())?;
    let limit = memory_limit(&Limits { max_memory: None })?;
    let mut estimate = 0;
    for it in &items {
        let plan = Plan::new(&it.scenario(&s))
            .map_err(|e| format!("{} ({}): {e}", a.scenario.display(), it.folder()))?;
        estimate = estimate.max(plan.memory.bytes);
    }
    let tasks = a.tasks.clamp(1, items.len().max(1));
    let per_task = items.len().div_ceil(tasks);
    let abs = |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    prepare_out(&a.out, "--out")?;
    let out = abs(&a.out)?;
    let logs = out.join("logs");
    prepare_out(&logs, "--out")?;
    sweep::write_plan(&out, &items)?;
    let scen = abs(&a.scenario)?;
    let bin = match a.binary {
        Some(b) => abs(&b)?,
        None => std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?,
    };
    let calib = if a.time.is_some() && a.mem.is_some() {
        None
    } else if a.calibrate_secs == 0 {
        if a.time.is_none() {
            return Err("--calibrate-secs 0 measures nothing: give --time (and --mem)".into());
        }
        None
    } else {
        if estimate > limit.0 {
            return Err(format!(
                "a run needs about {}, more than this machine has to calibrate with; give --time and --mem",
                human_bytes(estimate)
            ));
        }
        eprintln!(
            "calibrating: running {} for up to {} s",
            items[0].folder(),
            a.calibrate_secs
        );
        Some(calibrate(&s, &items[0], a.calibrate_secs)?)
    };
    // Headroom: a cluster core may be slower than this one, and runs differ by seed.
    let time = match (&a.time, &calib) {
        (Some(t), _) => t.clone(),
        (None, Some(c)) => slurm_time(c.item_secs * per_task as f64 * 2.0 + 120.0),
        (None, None) => unreachable!("checked above"),
    };
    let mem = match (&a.mem, &calib) {
        (Some(m), _) => {
            plan::parse_size(m)?;
            m.clone()
        }
        (None, c) => {
            let peak = c.as_ref().and_then(|c| c.peak).unwrap_or(0);
            let b = estimate.max(peak) as f64 * 1.25 + 256e6;
            format!("{}M", (b / 1e6).ceil() as u64)
        }
    };
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let seeds_arg = a
        .seeds
        .as_ref()
        .map_or(String::new(), |x| format!(" --seeds {}", shell_quote(x)));
    let mut text = format!(
        "#!/bin/bash\n\
         # Generated by mrc-sim {ver}: {n} runs of {name} over {tasks} array tasks ({per_task} per task).\n\
         # Memory estimate per run: {est}. Calibration: {calib}.\n\
         # Submit: sbatch {script}   then, when every task is done: {bin} merge {out}\n\
         #SBATCH --job-name=mrc-sim-{jobname}\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --cpus-per-task=1\n\
         #SBATCH --time={time}\n\
         #SBATCH --mem={mem}\n\
         #SBATCH --output={logs}/%A_%a.log\n",
        ver = env!("CARGO_PKG_VERSION"),
        n = items.len(),
        name = s.name,
        est = human_bytes(estimate),
        calib = calib
            .as_ref()
            .map_or("none (--time/--mem given)".into(), |c| c.how.clone()),
        script = a.script.display(),
        bin = bin.display(),
        out = out.display(),
        jobname = s
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            })
            .collect::<String>(),
        last = tasks - 1,
        logs = logs.display(),
    );
    for l in &a.sbatch {
        text.push_str(&format!("#SBATCH {l}\n"));
    }
    text.push_str("set -euo pipefail\n");
    for l in &a.setup {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str(&format!(
        "exec {bin} sweep {scen}{seeds_arg} --out {out} --jobs 1 --shard \"$SLURM_ARRAY_TASK_ID/{tasks}\" \
         --max-memory {mem}\n",
        bin = q(&bin),
        scen = q(&scen),
        out = q(&out),
    ));
    std::fs::write(&a.script, text).map_err(|e| format!("{}: {e}", a.script.display()))?;
    println!(
        "wrote {}: {} tasks, --time={time} --mem={mem}; logs go to {}; after the job: {} merge {}",
        a.script.display(),
        tasks,
        logs.display(),
        bin.display(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Quotes a string for bash when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// This machine's cores (the default thread count of one run).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
