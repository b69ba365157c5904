//! Sweeps: the runs of a scenario over seeds and failure sets, their folder names, the shard files a cluster
//! job array writes, and the merge that joins shards into one `sweep.csv` and says which checks failed.
//!
//! A sweep folder holds `sweep-plan.csv` (every run: item, folder, seed, failure set), one folder per run
//! named by failure set and seed, and either `sweep.csv` (one process ran everything) or one
//! `sweep-shard-I-of-N.csv` per shard, which `mrc-sim merge` joins into `sweep.csv` after checking that every
//! planned run is there exactly once.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::Report;
use crate::scenario::{FailureSet, Scenario};

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Index in the sweep (0-based; shards take `index % shards == shard`).
    pub index: usize,
    /// Seed.
    pub seed: u64,
    /// Failure set added to the scenario's failures, if the sweep has sets.
    pub set: Option<FailureSet>,
}

impl Item {
    /// The run's folder: `<set>_seed-<seed>`, or `seed-<seed>` without failure sets.
    pub fn folder(&self) -> String {
        match &self.set {
            Some(f) => format!("{}_seed-{}", f.name, self.seed),
            None => format!("seed-{}", self.seed),
        }
    }

    /// Name of the failure set, or `-`.
    pub fn set_name(&self) -> &str {
        self.set.as_ref().map_or("-", |f| f.name.as_str())
    }

    /// The scenario this item runs.
    pub fn scenario(&self, s: &Scenario) -> Scenario {
        let mut sc = s.clone();
        sc.seed = self.seed;
        if let Some(f) = &self.set {
            sc.failures.extend(f.failures.iter().cloned());
            sc.name = format!("{}-{}", s.name, f.name);
        }
        sc.sweep.failure_sets.clear();
        sc
    }
}

/// Parses `--seeds`: `1-8`, `1,5,9` or a mix; every seed once.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u64, u64) = (
                a.trim()
                    .parse()
                    .map_err(|_| format!("--seeds: bad number `{a}`"))?,
                b.trim()
                    .parse()
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
    let mut sorted = v.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "--seeds: seed {} twice; each seed would run twice",
            w[0]
        ));
    }
    Ok(v)
}

/// Parses `--shard I/N`.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let err = || format!("--shard {s}: use I/N with 0 <= I < N");
    let (i, n) = s.split_once('/').ok_or_else(err)?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| err())?, n.parse().map_err(|_| err())?);
    if n == 0 || i >= n {
        return Err(err());
    }
    Ok((i, n))
}

/// The runs of a sweep: every failure set (or the scenario's failures) with every seed (`--seeds`, else the
/// scenario's `sweep.seeds`, else its seed).
pub fn items(s: &Scenario, seeds: Option<&str>) -> Result<Vec<Item>, String> {
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
    let mut out = Vec::new();
    for set in &sets {
        for &seed in &seeds {
            out.push(Item {
                index: out.len(),
                seed,
                set: set.clone(),
            });
        }
    }
    Ok(out)
}

/// Name of the plan file.
pub const PLAN: &str = "sweep-plan.csv";
const PLAN_HEADER: &str = "item,folder,seed,failure_set";
/// Header of `sweep.csv` and of every shard file.
pub const HEADER: &str = "item,folder,name,seed,failure_set,finished,jct_us,jct_slowdown,fct_p99_us,\
                          waste_fraction,ev_retirements,passed,failed_checks";

/// The plan file's text.
pub fn plan_csv(items: &[Item]) -> String {
    let mut t = format!("{PLAN_HEADER}\n");
    for it in items {
        let _ = writeln!(
            t,
            "{},{},{},{}",
            it.index,
            it.folder(),
            it.seed,
            it.set_name()
        );
    }
    t
}

/// Writes the plan, or checks that the one already there is the same (another shard wrote it).
pub fn write_plan(dir: &Path, items: &[Item]) -> Result<(), String> {
    let path = dir.join(PLAN);
    let want = plan_csv(items);
    match std::fs::read_to_string(&path) {
        Ok(have) if have == want => Ok(()),
        Ok(_) => Err(format!(
            "{} lists other runs than this sweep (another scenario or other seeds wrote to this folder); use \
             an empty --out folder",
            path.display()
        )),
        Err(_) => write_atomic(&path, &want),
    }
}

/// Writes a file under a temporary name and renames it, so a reader never sees half of it.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The checks a report failed, as `metric=value` (with the bound) and `invariant:...`, joined by `;`.
pub fn failed_checks(r: &Report) -> String {
    let mut v: Vec<String> = r
        .checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| {
            let bound = match (c.min, c.max) {
                (Some(a), _) if c.value < a || c.value.is_nan() => format!("<{a}"),
                (_, Some(b)) => format!(">{b}"),
                _ => String::new(),
            };
            format!("{}={:.6}{bound}", c.metric, c.value)
        })
        .collect();
    v.extend(
        r.invariant_violations()
            .into_iter()
            .map(|x| format!("invariant:{}", x.replace(' ', ""))),
    );
    v.join(";")
}

/// One row of `sweep.csv`.
pub fn row(item: &Item, r: &Report) -> String {
    let m = |n: &str| {
        r.metrics
            .get(n)
            .map_or(String::new(), |v| format!("{v:.6}"))
    };
    let failed = failed_checks(r);
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        item.index,
        item.folder(),
        r.name.replace(',', " "),
        r.seed,
        item.set_name(),
        r.run.finished,
        m("jct_us"),
        m("jct_slowdown"),
        m("fct_p99_us"),
        m("waste_fraction"),
        m("ev_retirements"),
        failed.is_empty(),
        failed
    )
}

/// Name of shard `i` of `n`'s results.
pub fn shard_file(i: usize, n: usize) -> String {
    format!("sweep-shard-{i}-of-{n}.csv")
}

/// What `merge` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// Rows written to `sweep.csv`.
    pub runs: usize,
    /// Shards joined.
    pub shards: usize,
    /// (folder, failed checks) of every run that failed one.
    pub failed: Vec<(String, String)>,
    /// Where it was written.
    pub path: PathBuf,
}

/// Joins every `sweep-shard-I-of-N.csv` in `dir` into `sweep.csv`, in item order. Refuses (naming the file
/// and what is wrong) when a shard is missing, comes from another split, lacks a planned run or has one twice,
/// or disagrees with `sweep-plan.csv`.
pub fn merge(dir: &Path) -> Result<Merged, String> {
    let plan_path = dir.join(PLAN);
    let plan = std::fs::read_to_string(&plan_path).map_err(|e| {
        format!(
            "{}: {e}; merge joins the shards of a sweep folder that `mrc-sim sweep --shard` or `mrc-sim \
             slurm` wrote",
            plan_path.display()
        )
    })?;
    let planned: Vec<Vec<String>> = plan
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let mut shards: Vec<(usize, usize, PathBuf)> = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot list: {e}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name
            .strip_prefix("sweep-shard-")
            .and_then(|r| r.strip_suffix(".csv"))
        else {
            continue;
        };
        let parsed = rest
            .split_once("-of-")
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
        match parsed {
            Some((i, n)) if i < n => shards.push((i, n, e.path())),
            _ => {
                return Err(format!(
                    "{name}: not a shard file name (sweep-shard-I-of-N.csv)"
                ));
            }
        }
    }
    shards.sort();
    let Some(&(_, n, _)) = shards.first() else {
        return Err(format!(
            "{}: no sweep-shard-I-of-N.csv; have the array tasks run (see their logs)?",
            dir.display()
        ));
    };
    if let Some((_, m, p)) = shards.iter().find(|s| s.1 != n) {
        return Err(format!(
            "{} is shard of {m}, others of {n}: two different splits wrote to this folder",
            p.display()
        ));
    }
    let have: Vec<usize> = shards.iter().map(|s| s.0).collect();
    let missing: Vec<String> = (0..n)
        .filter(|i| !have.contains(i))
        .map(|i| shard_file(i, n))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing {} of {n} shards: {} (did those array tasks fail? see their logs)",
            missing.len(),
            missing.join(", ")
        ));
    }
    let mut rows: Vec<Option<String>> = vec![None; planned.len()];
    for (i, _, path) in &shards {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!(
                "{}: header is not this version's ({HEADER})",
                path.display()
            ));
        }
        for (ln, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
            let at = || format!("{} line {}", path.display(), ln + 2);
            let f: Vec<&str> = line.split(',').collect();
            let k: usize = f
                .first()
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| format!("{}: no item number", at()))?;
            let Some(p) = planned.get(k) else {
                return Err(format!("{}: item {k} is not in {PLAN}", at()));
            };
            if k % n != *i {
                return Err(format!(
                    "{}: item {k} does not belong to shard {i} of {n}",
                    at()
                ));
            }
            if f.get(1).copied() != p.get(1).map(String::as_str)
                || f.get(3).copied() != p.get(2).map(String::as_str)
            {
                return Err(format!(
                    "{}: item {k} is {}/seed {} but the plan says {}/seed {}",
                    at(),
                    f.get(1).unwrap_or(&""),
                    f.get(3).unwrap_or(&""),
                    p.get(1).map_or("", String::as_str),
                    p.get(2).map_or("", String::as_str)
                ));
            }
            if rows[k].replace(format!("{line}\n")).is_some() {
                return Err(format!("{}: item {k} twice", at()));
            }
        }
    }
    let absent: Vec<String> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_none())
        .map(|(k, _)| format!("{k} ({})", planned[k].get(1).map_or("", String::as_str)))
        .collect();
    if !absent.is_empty() {
        return Err(format!(
            "{} planned runs have no row: {}",
            absent.len(),
            absent.join(", ")
        ));
    }
    let mut out = format!("{HEADER}\n");
    let mut failed = Vec::new();
    for r in rows.iter().flatten() {
        out.push_str(r);
        let f: Vec<&str> = r.trim_end().split(',').collect();
        if let (Some(folder), Some(checks)) = (f.get(1), f.last())
            && !checks.is_empty()
            && f.get(11) == Some(&"false")
        {
            failed.push((folder.to_string(), checks.to_string()));
        }
    }
    let path = dir.join("sweep.csv");
    write_atomic(&path, &out)?;
    Ok(Merged {
        runs: planned.len(),
        shards: n,
        failed,
        path,
    })
}

/// One failure set's runs in a sweep, over its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct SetSummary {
    /// Failure set (`-` without sets).
    pub set: String,
    /// Runs (seeds).
    pub runs: usize,
    /// Runs that passed every check.
    pub passed: usize,
    /// Job completion time over the seeds: (min, median, max), µs.
    pub jct_us: (f64, f64, f64),
    /// Job slowdown against the healthy run over the seeds: (min, median, max), when the runs have it.
    pub slowdown: Option<(f64, f64, f64)>,
}

fn spread(mut v: Vec<f64>) -> Option<(f64, f64, f64)> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Some((v[0], mid, v[v.len() - 1]))
}

/// The per-failure-set summary of a `sweep.csv` (its text), sets in the order they first appear.
pub fn summarize(csv: &str) -> Vec<SetSummary> {
    let mut order: Vec<String> = Vec::new();
    let mut rows: Vec<(String, f64, f64, bool)> = Vec::new();
    for line in csv.lines().skip(1).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|x| x.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let set = f.get(4).copied().unwrap_or("-").to_string();
        if !order.contains(&set) {
            order.push(set.clone());
        }
        rows.push((set, num(6), num(7), f.get(11) == Some(&"true")));
    }
    order
        .into_iter()
        .map(|set| {
            let mine: Vec<&(String, f64, f64, bool)> = rows.iter().filter(|r| r.0 == set).collect();
            SetSummary {
                runs: mine.len(),
                passed: mine.iter().filter(|r| r.3).count(),
                jct_us: spread(mine.iter().map(|r| r.1).collect()).unwrap_or((
                    f64::NAN,
                    f64::NAN,
                    f64::NAN,
                )),
                slowdown: spread(mine.iter().map(|r| r.2).collect()),
                set,
            }
        })
        .collect()
}

/// `sweep-summary.csv`: one row per failure set.
pub fn summary_csv(sets: &[SetSummary]) -> String {
    let mut t = String::from(
        "failure_set,runs,passed,jct_us_min,jct_us_median,jct_us_max,jct_slowdown_min,jct_slowdown_median,\
         jct_slowdown_max\n",
    );
    for s in sets {
        let (a, b, c) = s
            .slowdown
            .map_or((String::new(), String::new(), String::new()), |x| {
                (
                    format!("{:.6}", x.0),
                    format!("{:.6}", x.1),
                    format!("{:.6}", x.2),
                )
            });
        let _ = writeln!(
            t,
            "{},{},{},{:.3},{:.3},{:.3},{a},{b},{c}",
            s.set, s.runs, s.passed, s.jct_us.0, s.jct_us.1, s.jct_us.2
        );
    }
    t
}

/// The summary as a table a manager reads: per failure set, how much slower the job is (median over the
/// seeds, and their range) and how many runs passed their checks.
pub fn summary_table(sets: &[SetSummary]) -> String {
    let mut t = format!(
        "{:<24} {:>5} {:>7} {:>14} {:>22}\n",
        "failure set", "runs", "passed", "JCT median us", "slowdown median (range)"
    );
    for s in sets {
        let slow = s.slowdown.map_or("-".to_string(), |x| {
            format!(
                "{:+.1}% ({:+.1}% to {:+.1}%)",
                x.1 * 100.0,
                x.0 * 100.0,
                x.2 * 100.0
            )
        });
        let _ = writeln!(
            t,
            "{:<24} {:>5} {:>7} {:>14.1} {:>22}",
            s.set, s.runs, s.passed, s.jct_us.1, slow
        );
    }
    t
}

/// Writes `sweep-summary.csv` and `sweep-summary.svg` beside a sweep's `sweep.csv` (its text) and returns the
/// summary.
pub fn write_summary(dir: &Path, csv: &str) -> Result<Vec<SetSummary>, String> {
    let sets = summarize(csv);
    write_atomic(&dir.join("sweep-summary.csv"), &summary_csv(&sets))?;
    let svg = crate::plots::sweep_svg(&sets)?;
    write_atomic(&dir.join("sweep-summary.svg"), &svg)?;
    Ok(sets)
}

/// The runs of a `sweep.csv` (its text) that failed a check: (folder, failed checks).
pub fn failed_runs(csv: &str) -> Vec<(String, String)> {
    csv.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.get(11) == Some(&"false")).then(|| {
                (
                    f.get(1).copied().unwrap_or("").to_string(),
                    f.last().copied().unwrap_or("").to_string(),
                )
            })
        })
        .collect()
}
