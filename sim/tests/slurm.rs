//! The Slurm path as a user runs it: `mrc-sim slurm` writes a job-array script, `sbatch` runs it on a
//! single-node Slurm (Debian's slurm-wlm) that this test starts with a configuration of its own in a temporary
//! folder, and `mrc-sim merge` joins the two shards into one sweep.csv that says which check failed.
//!
//! Slurm needs root here (slurmd launches the job steps); without root or without the binaries the test prints
//! a loud SKIPPED line (`mrc::testing::skip`: straight to the terminal, past the test harness's capture, and
//! counted by `.ci/run`) and passes. `.ci/run`
//! installs slurm-wlm when it runs as root. The daemons are stopped (scontrol shutdown, then killed) however
//! the test ends.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const MRC_SIM: &str = env!("CARGO_BIN_EXE_mrc-sim");

fn skipped(why: &str) {
    mrc::testing::skip("slurm_job_array_runs_end_to_end", why);
}

/// Finds a Slurm binary in PATH or the sbin folders a non-login shell may lack.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(PathBuf::from)
        .chain(
            [
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/usr/local/sbin",
                "/usr/local/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running slurmctld and slurmd, stopped on drop.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    bin: [PathBuf; 6], // slurmctld, slurmd, sbatch, squeue, scontrol, sinfo
    daemons: Vec<Child>,
}

impl Cluster {
    fn cmd(&self, i: usize) -> Command {
        let mut c = Command::new(&self.bin[i]);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn start(dir: &Path, bin: [PathBuf; 6]) -> Result<Self, String> {
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        let mem_mb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("MemTotal:"))?
                    .split_whitespace()
                    .nth(1)?
                    .parse::<u64>()
                    .ok()
            })
            .map_or(1024, |kb| (kb / 1024).saturating_sub(512).max(512));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let host = Command::new("hostname")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        let text = format!(
            "ClusterName=mrcsimtest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={}\nSlurmdPort={}\nAuthType=auth/none\nCredType=cred/none\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\nReturnToService=2\n\
             MpiDefault=none\nPlugStackConfig=/dev/null\n\
             NodeName=mrcsimnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} RealMemory={mem_mb} \
             State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
        );
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let mut c = Self {
            dir: dir.to_path_buf(),
            conf,
            bin,
            daemons: Vec::new(),
        };
        for (i, extra) in [(0, vec![]), (1, vec!["-N", "mrcsimnode"])] {
            let child = c
                .cmd(i)
                .arg("-D")
                .args(extra)
                .arg("-f")
                .arg(&c.conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", c.bin[i].display()))?;
            c.daemons.push(child);
            std::thread::sleep(Duration::from_millis(500));
        }
        let t0 = Instant::now();
        loop {
            let idle = c
                .cmd(5)
                .args(["-h", "-o", "%T"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("idle"));
            if idle {
                return Ok(c);
            }
            if let Some(s) = c
                .daemons
                .iter_mut()
                .find_map(|d| d.try_wait().ok().flatten())
            {
                return Err(format!(
                    "a Slurm daemon exited ({s}); see {}",
                    c.dir.display()
                ));
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(format!(
                    "the node never came up idle in 30 s; logs in {}",
                    c.dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.cmd(4).arg("shutdown").output();
        let t0 = Instant::now();
        for d in &mut self.daemons {
            while d.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SCENARIO: &str = r#"
name = "slurm-sweep"
seed = 1
[topology]
kind = "two_tier"
planes = 4
hosts_per_t0 = 4
t0 = 2
t1 = 4
[workload]
kind = "permutation"
bytes = 500000
[run]
limit_us = 2000
bin_us = 5
[sweep]
seeds = [1, 2]
[[sweep.failure_sets]]
name = "t1-down"
[[sweep.failure_sets.failures]]
kind = "switch_down"
at_us = 5
switch = { tier = 1, plane = 1, index = 2 }
[[sweep.failure_sets]]
name = "plane2-down"
[[sweep.failure_sets.failures]]
kind = "plane_down"
at_us = 5
until_us = 30
plane = 2
[[validate]]
metric = "unfinished_transfers"
max = 0
[[validate]]
metric = "ev_retirements"
max = 0
why = "fails where the transport had to retire paths: shows merge naming the check"
"#;

#[test]
fn slurm_job_array_runs_end_to_end() {
    if !is_root() {
        skipped("Slurm's slurmd must run as root to launch job steps; run the suite as root");
        return;
    }
    let names = [
        "slurmctld",
        "slurmd",
        "sbatch",
        "squeue",
        "scontrol",
        "sinfo",
    ];
    let found: Vec<Option<PathBuf>> = names.iter().map(|n| which(n)).collect();
    if let Some(i) = found.iter().position(Option::is_none) {
        skipped(&format!(
            "{} not found: install Debian's slurm-wlm (apt-get install slurm-wlm)",
            names[i]
        ));
        return;
    }
    let bin: [PathBuf; 6] = std::array::from_fn(|i| found[i].clone().unwrap());
    // Declared before the cluster, so dropped after it: the daemons stop before their folder goes.
    let scratch = common::scratch("slurm");
    let dir = scratch.path();
    let cluster = match Cluster::start(&dir.join("slurm"), bin) {
        Ok(c) => c,
        Err(e) => {
            skipped(&format!("Slurm could not start here: {e}"));
            return;
        }
    };
    let scen = dir.join("sweep.toml");
    std::fs::write(&scen, SCENARIO).unwrap();
    let out = dir.join("out");
    let script = dir.join("job.sbatch");
    let o = Command::new(MRC_SIM)
        .args(["slurm", &scen.display().to_string(), "--tasks", "2"])
        .args(["--out", &out.display().to_string()])
        .args(["--script", &script.display().to_string()])
        .args(["--calibrate-secs", "10"])
        .output()
        .unwrap();
    println!("{}", text(&o));
    assert!(o.status.success());
    let job = std::fs::read_to_string(&script).unwrap();
    println!("{job}");
    let exe = std::path::absolute(MRC_SIM).unwrap();
    assert!(
        job.contains(&format!("exec {} sweep", exe.display())),
        "binary not absolute"
    );
    assert!(job.contains("#SBATCH --time=") && job.contains("#SBATCH --mem="));
    assert!(
        out.join("logs").is_dir(),
        "the log folder must exist before sbatch opens it"
    );
    // Submit from another folder: nothing may depend on the submission directory.
    let o = cluster
        .cmd(2)
        .arg("--parsable")
        .arg(&script)
        .current_dir(&cluster.dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch: {}", text(&o));
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let t0 = Instant::now();
    loop {
        let q = cluster.cmd(3).args(["-h", "-j", &id]).output().unwrap();
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "job {id} still queued or running after 300 s: {}",
            text(&q)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    for entry in std::fs::read_dir(out.join("logs")).unwrap().flatten() {
        println!(
            "== {}\n{}",
            entry.path().display(),
            std::fs::read_to_string(entry.path()).unwrap_or_default()
        );
    }
    for i in 0..2 {
        assert!(
            out.join(format!("sweep-shard-{i}-of-2.csv")).exists(),
            "array task {i} wrote no shard; see the logs above"
        );
    }
    let o = Command::new(MRC_SIM)
        .args(["merge", &out.display().to_string()])
        .output()
        .unwrap();
    let merged = text(&o);
    println!("{merged}");
    assert_eq!(
        o.status.code(),
        Some(1),
        "one set retires paths: a check fails"
    );
    assert!(merged.contains("merged 4 runs from 2 shards"), "{merged}");
    assert!(
        merged.contains("FAIL t1-down_seed-1: ev_retirements="),
        "{merged}"
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    for folder in [
        "t1-down_seed-1",
        "t1-down_seed-2",
        "plane2-down_seed-1",
        "plane2-down_seed-2",
    ] {
        assert!(csv.contains(folder), "{csv}");
        assert!(out.join(folder).join("report.json").exists(), "{folder}");
    }
    drop(cluster);
}
