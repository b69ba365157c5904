//! `sim/render-plots.sh` (named by the READMEs for the PNG plots) turns every SVG plot of a run's folder into a
//! PNG beside it, and says what to install when no converter is found.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mrc_sim::{Scenario, run_scenario_captured};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("render-plots.sh")
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

#[test]
fn every_svg_of_a_run_becomes_a_png() {
    if !on_path("rsvg-convert") && !on_path("resvg") {
        mrc::testing::skip(
            "render_plots::every_svg_of_a_run_becomes_a_png",
            "no rsvg-convert (apt-get install librsvg2-bin) or resvg",
        );
        return;
    }
    let path = format!(
        "{}/scenarios/plane-return-8host.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut s = Scenario::load(path.as_ref()).expect("scenario loads");
    s.run.baseline = false;
    let r = run_scenario_captured(&s, false, None, &mut |_, _| true).expect("runs");
    let tmp = common::scratch("render");
    let dir = tmp.path();
    r.write(dir).unwrap();
    let out = Command::new(script())
        .arg(dir)
        .output()
        .expect("run the script");
    assert!(
        out.status.success(),
        "render-plots.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut svgs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    svgs.sort();
    assert!(svgs.len() >= 3, "plots written: {svgs:?}");
    for svg in &svgs {
        let png = svg.with_extension("png");
        let bytes = std::fs::read(&png).unwrap_or_default();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000,
            "{} is not a PNG ({} bytes)",
            png.display(),
            bytes.len()
        );
    }
}

#[test]
fn a_folder_without_plots_is_refused() {
    let tmp = common::scratch("render-empty");
    let dir = tmp.path();
    let out = Command::new(script())
        .arg(dir)
        .output()
        .expect("run the script");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no .svg in"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
