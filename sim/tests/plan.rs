//! The memory estimate that refuses oversized scenarios (and sizes Slurm's `--mem`) is close to what runs
//! really use: measured as the process's peak resident set, which `mrc-sim run` prints beside the estimate.

mod common;

use std::process::Command;

fn bytes(s: &str) -> f64 {
    let (num, unit) = s.trim().split_once(' ').expect("`12.3 MB`");
    let mult = match unit {
        "B" => 1.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => panic!("unit {unit}"),
    };
    num.parse::<f64>().unwrap() * mult
}

#[test]
fn memory_estimate_is_close() {
    // The default thread count (this machine's cores), and 4 (partitions copy the ports).
    for (name, threads) in [
        ("bench-leafspine-1024-perm", None),
        ("fairwater-8plane", None),
        ("t1-failure", None),
        ("fairwater-8plane", Some("4")),
    ] {
        let scen = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let tmp = common::scratch("plan");
        let out = tmp.path().join(name);
        let mut args = vec!["run", &scen, "--out"];
        let out_s = out.display().to_string();
        args.push(&out_s);
        if let Some(n) = threads {
            args.extend(["--threads", n]);
        }
        let o = Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
            .args(&args)
            .output()
            .expect("run mrc-sim");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let line = err
            .lines()
            .find(|l| l.contains("peak RSS"))
            .expect("a speed line");
        let peak = bytes(
            line.split("peak RSS ")
                .nth(1)
                .unwrap()
                .split(" (")
                .next()
                .unwrap(),
        );
        let est = bytes(
            line.split("(estimated ")
                .nth(1)
                .unwrap()
                .trim_end_matches(')'),
        );
        println!(
            "{name}: peak {peak:.3e} B, estimated {est:.3e} B ({:.2}x)",
            est / peak
        );
        assert!(
            (0.8..=2.0).contains(&(est / peak)),
            "{name}: estimated {est:.3e} B for a peak of {peak:.3e} B"
        );
    }
}
