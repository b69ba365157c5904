//! SVG plots a planner reads at a glance: every failure window shaded and labelled, round tick values (plotters
//! picks them), units scaled to the data (Mbit/s to Tbit/s, KiB to GiB), sums over hosts said so on the axis,
//! and the completion-time distribution both as a CDF and as a log-scale tail.

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::{Report, RunSummary};
use crate::scenario::{FailureCfg, FailureKind, LinkRef, LinkTier};
use crate::topo::PortKind;

const W: u32 = 960;
const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];
const SHADE: RGBColor = RGBColor(0xff, 0xd0, 0xc0);
const GREY: RGBColor = RGBColor(0x70, 0x70, 0x70);

/// A failure's time span and what it is, for shading.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Start, µs.
    pub from_us: f64,
    /// End, µs (the plot's end when the failure lasts).
    pub to_us: f64,
    /// What fails.
    pub label: String,
    /// When the failure really ends (`None`: it lasts), whatever the plot shows: a label says the scenario's
    /// times, not the plotted range's.
    pub until_us: Option<f64>,
}

impl Window {
    /// The label with the failure's own times.
    pub fn text(&self) -> String {
        match self.until_us {
            Some(u) => format!("{} ({}–{} µs)", self.label, num(self.from_us), num(u)),
            None => format!("{} (from {} µs)", self.label, num(self.from_us)),
        }
    }
}

/// A time as the scenario would write it: whole µs without decimals.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

fn links(l: &LinkRef) -> String {
    let mut s = match l.tier {
        LinkTier::Host => "host links".to_string(),
        LinkTier::T0T1 => "T0-T1 links".to_string(),
        LinkTier::T1T2 => "T1-T2 links".to_string(),
    };
    let sel: Vec<String> = [
        ("plane", l.plane.map(u32::from)),
        ("host", l.host),
        ("pod", l.pod),
        ("T0", l.t0),
        ("T1", l.t1),
        ("T2", l.t2),
    ]
    .iter()
    .filter_map(|(n, v)| v.map(|v| format!("{n} {v}")))
    .collect();
    if sel.is_empty() {
        s = format!("all {s}");
    } else {
        s = format!("{s} of {}", sel.join(", "));
    }
    s
}

/// A short description of a failure.
pub fn describe(f: &FailureCfg) -> String {
    let link = f.link.as_ref().map(links).unwrap_or_default();
    match f.kind {
        FailureKind::LinkDown => format!("{link} down"),
        FailureKind::LinkUp => format!("{link} up"),
        FailureKind::LinkFlap => format!("{link} flapping"),
        FailureKind::SwitchDown | FailureKind::SwitchUp => {
            let s = f.switch.unwrap_or(crate::scenario::SwitchRef {
                tier: 0,
                plane: None,
                index: 0,
                pod: None,
            });
            let pod = s.pod.map_or(String::new(), |p| format!(" pod {p}"));
            let plane = s.plane.map_or(String::new(), |p| format!(" of plane {p}"));
            let what = if f.kind == FailureKind::SwitchDown {
                "down"
            } else {
                "up"
            };
            format!("T{} {}{pod}{plane} {what}", s.tier, s.index)
        }
        FailureKind::PlaneDown => format!("plane {} down", f.plane.unwrap_or(0)),
        FailureKind::NicPortDown => format!(
            "host {} plane-{} port down",
            f.host.unwrap_or(0),
            f.plane.unwrap_or(0)
        ),
        FailureKind::LinkLoss => format!("{:.3}% loss on {link}", f.rate.unwrap_or(0.0) * 100.0),
        FailureKind::LinkSlow => {
            format!("{link} at {:.0}% speed", f.fraction.unwrap_or(1.0) * 100.0)
        }
    }
}

/// The failure windows of a report's scenario, clipped to `[0, end_us]`. Repairs (`link_up`, `switch_up`) end
/// the window of the failure they repair instead of opening one.
pub fn windows(r: &Report, end_us: f64) -> Vec<Window> {
    let fs = &r.scenario.failures;
    let mut out = Vec::new();
    for (i, f) in fs.iter().enumerate() {
        if matches!(f.kind, FailureKind::LinkUp | FailureKind::SwitchUp) {
            continue;
        }
        let repaired = fs[i + 1..]
            .iter()
            .filter(|u| {
                u.at_us > f.at_us
                    && match (f.kind, u.kind) {
                        (FailureKind::LinkDown, FailureKind::LinkUp) => u.link == f.link,
                        (FailureKind::SwitchDown, FailureKind::SwitchUp) => u.switch == f.switch,
                        _ => false,
                    }
            })
            .map(|u| u.at_us)
            .next();
        let until = f.until_us.or(repaired);
        let to = until.unwrap_or(end_us).min(end_us);
        if f.kind == FailureKind::LinkFlap {
            // Shade each time the link is down, not the whole span: a flap is down `1 - duty` of each period.
            let period = f.period_us.unwrap_or(1.0).max(1e-3);
            let down = period * (1.0 - f.duty.unwrap_or(0.5));
            let label = describe(f);
            let mut t = f.at_us;
            let mut first = true;
            while t < to {
                out.push(Window {
                    from_us: t,
                    to_us: (t + down).min(to),
                    // One label for the whole flap, on its first down time.
                    label: if first { label.clone() } else { String::new() },
                    until_us: until,
                });
                first = false;
                t += period;
            }
            continue;
        }
        if f.at_us < to {
            out.push(Window {
                from_us: f.at_us,
                to_us: to,
                label: describe(f),
                until_us: until,
            });
        }
    }
    out
}

/// A unit that puts `max` between 1 and 1000: (divisor, name).
fn rate_unit(max_gbps: f64) -> (f64, &'static str) {
    if max_gbps >= 1e6 {
        (1e6, "Pbit/s")
    } else if max_gbps >= 1000.0 {
        (1000.0, "Tbit/s")
    } else if max_gbps >= 1.0 || max_gbps == 0.0 {
        (1.0, "Gbit/s")
    } else {
        (0.001, "Mbit/s")
    }
}

fn size_unit(max_bytes: f64) -> (f64, &'static str) {
    const K: f64 = 1024.0;
    if max_bytes >= K * K * K {
        (K * K * K, "GiB")
    } else if max_bytes >= K * K {
        (K * K, "MiB")
    } else if max_bytes >= K {
        (K, "KiB")
    } else {
        (1.0, "bytes")
    }
}

/// A binned series drawn as steps: each bin holds its value from its start to its end.
fn steps(values: impl Iterator<Item = f64>, bin: f64, div: f64) -> Vec<(f64, f64)> {
    let mut v = Vec::new();
    for (b, y) in values.enumerate() {
        let t = b as f64 * bin;
        v.push((t, y / div));
        v.push((t + bin, y / div));
    }
    v
}

/// Ticks of a log axis from `floor` (a power of ten) to 1: 1, 2 and 5 times each power of ten.
fn log_ticks(floor: f64) -> Vec<f64> {
    let mut v = Vec::new();
    let mut p = floor;
    while p < 1.0 {
        v.extend([p, 2.0 * p, 5.0 * p]);
        p *= 10.0;
    }
    v.push(1.0);
    v
}

/// A tick label: no trailing zeros, at most three decimals (`50`, `2.5`, `0.125`).
fn tick(v: &f64) -> String {
    let t = format!("{v:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" { "0".into() } else { t.into() }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>;

/// A line to draw: name, points (already in the axis unit), colour, dashed (thin) or not.
struct Series {
    name: String,
    pts: Vec<(f64, f64)>,
    color: RGBColor,
    thin: bool,
}

/// A chart on `area` with this project's layout.
fn builder<'a, 'b>(area: &'a Area<'b>, title: &str) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(title, (FONT, 17))
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(70);
    b
}

/// Axes with round labels, no minor grid.
fn mesh<Y>(chart: &mut Chart<'_, Y>, x: &str, y: &str) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .light_line_style(WHITE.mix(0.0))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)
}

/// Draws a series with its legend entry.
fn line<Y>(chart: &mut Chart<'_, Y>, s: &Series) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    let style = ShapeStyle {
        color: s.color.to_rgba(),
        filled: false,
        stroke_width: if s.thin { 1 } else { 2 },
    };
    chart
        .draw_series(LineSeries::new(s.pts.iter().copied(), style))
        .map_err(err)?
        .label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    Ok(())
}

fn legend<Y>(chart: &mut Chart<'_, Y>, at: SeriesLabelPosition) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .label_font((FONT, 12))
        .draw()
        .map_err(err)
}

/// One time-series panel with shaded failure windows; `series` values are already in the axis unit.
fn time_panel(
    area: &Area<'_>,
    title: &str,
    y_desc: &str,
    x: (f64, f64),
    windows: &[Window],
    series: &[Series],
) -> Result<(), String> {
    let (x_start, x_end) = x;
    let y_max = series
        .iter()
        .flat_map(|s| s.pts.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    // The failure labels, one row each at the top left, and the legend at the top right sit above the data.
    let labels: Vec<String> = windows
        .iter()
        .filter(|w| !w.label.is_empty())
        .map(Window::text)
        .collect();
    let rows = labels.len().min(4) as f64;
    let y_top = if y_max > 0.0 {
        y_max * (1.18 + 0.07 * rows)
    } else {
        1.0
    };
    let mut chart = builder(area, title)
        .build_cartesian_2d(x_start..x_end, 0f64..y_top)
        .map_err(err)?;
    mesh(&mut chart, "time (µs)", y_desc)?;
    for w in windows {
        let (a, b) = (w.from_us.max(x_start), w.to_us.min(x_end));
        if a >= b {
            continue;
        }
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, y_top)],
                SHADE.mix(0.45).filled(),
            )))
            .map_err(err)?;
    }
    let extra = labels.len().saturating_sub(4);
    for (row, text) in labels.iter().take(4).enumerate() {
        let text = if row == 3 && extra > 0 {
            format!("{text} (+{extra} more failures)")
        } else {
            text.clone()
        };
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (
                    x_start + (x_end - x_start) * 0.004,
                    y_top * (0.985 - 0.06 * row as f64),
                ),
                (FONT, 13).into_font().color(&RGBColor(0xa0, 0x20, 0x10)),
            )))
            .map_err(err)?;
    }
    for s in series {
        line(&mut chart, s)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Where the time axis starts: the first transfer's start, rounded down to a bin (0 when traffic starts at
/// once), so a job that starts late is not drawn as a long empty stretch.
fn x_start(r: &Report) -> f64 {
    let first = r
        .run
        .times_us
        .iter()
        .map(|t| t.0)
        .filter(|&t| t >= 0.0)
        .fold(f64::INFINITY, f64::min);
    if !first.is_finite() {
        return 0.0;
    }
    let bin = r.run.bin_us.max(1e-9);
    (first / bin).floor() * bin
}

/// The time axis of the plots, µs: from where the traffic starts to where the last run ends.
pub fn time_axis(r: &Report) -> (f64, f64) {
    (x_start(r), x_end(r))
}

fn x_end(r: &Report) -> f64 {
    let bins = |s: &RunSummary| s.goodput_gbps.len() as f64 * s.bin_us;
    let mut end = bins(&r.run).max(r.run.jct_us);
    if let Some(b) = &r.baseline {
        end = end.max(bins(b)).max(b.jct_us);
    }
    if end > 0.0 { end } else { 1.0 }
}

/// `goodput.svg`: the job's total goodput against the healthy run, then each plane's.
pub fn goodput_svg(r: &Report) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (W, 760)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(330);
        let end = x_end(r);
        let win = windows(r, end);
        let total = |s: &RunSummary| -> Vec<f64> {
            s.goodput_gbps.iter().map(|row| row.iter().sum()).collect()
        };
        let mut max = total(&r.run).into_iter().fold(0.0, f64::max);
        if let Some(b) = &r.baseline {
            max = total(b).into_iter().fold(max, f64::max);
        }
        let (div, unit) = rate_unit(max);
        let mut series = vec![Series {
            name: "with failures".into(),
            pts: steps(total(&r.run).into_iter(), r.run.bin_us, div),
            color: COLORS[0],
            thin: false,
        }];
        if let Some(b) = &r.baseline {
            series.push(Series {
                name: "without failures".into(),
                pts: steps(total(b).into_iter(), b.bin_us, div),
                color: GREY,
                thin: true,
            });
        }
        time_panel(
            &top,
            &format!(
                "Job goodput: payload placed per {} µs bin, summed over all {} hosts and {} planes",
                r.run.bin_us, r.hosts, r.planes
            ),
            &format!("{unit}, sum of {} hosts", r.hosts),
            (x_start(r), end),
            &win,
            &series,
        )?;
        let pmax = r
            .run
            .goodput_gbps
            .iter()
            .flatten()
            .copied()
            .fold(0.0, f64::max);
        let (pdiv, punit) = rate_unit(pmax);
        let planes: Vec<_> = (0..r.planes as usize)
            .map(|p| Series {
                name: format!("plane {p}"),
                pts: steps(
                    r.run
                        .goodput_gbps
                        .iter()
                        .map(|row| row.get(p).copied().unwrap_or(0.0)),
                    r.run.bin_us,
                    pdiv,
                ),
                color: COLORS[p % COLORS.len()],
                thin: false,
            })
            .collect();
        time_panel(
            &bottom,
            &format!(
                "Per-plane goodput with failures (each plane summed over all {} hosts)",
                r.hosts
            ),
            &format!("{punit} per plane, sum of {} hosts", r.hosts),
            (x_start(r), end),
            &win,
            &planes,
        )?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// Sorted completion times of a run, µs.
fn fcts(s: &RunSummary) -> Vec<f64> {
    let mut f: Vec<f64> = s
        .times_us
        .iter()
        .filter(|t| t.0 >= 0.0 && t.1 >= 0.0)
        .map(|t| t.1 - t.0)
        .collect();
    f.sort_by(f64::total_cmp);
    f
}

/// `fct_cdf.svg`: the completion-time CDF, and its tail (the fraction taking at least x) on a log scale.
pub fn fct_svg(r: &Report) -> Result<String, String> {
    let mut runs = vec![("with failures", fcts(&r.run), COLORS[0])];
    if let Some(b) = &r.baseline {
        runs.push(("without failures", fcts(b), GREY));
    }
    let (lo, hi) = runs
        .iter()
        .flat_map(|r| r.1.iter().copied())
        .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    // Frame the completion times with a twentieth of their spread on each side (never below zero).
    let pad = ((hi - lo) * 0.05).max(hi * 0.01).max(1e-3);
    let (x_min, x_max) = ((lo - pad).max(0.0), hi + pad);
    let n_max = runs.iter().map(|r| r.1.len()).max().unwrap_or(1).max(1);
    // The tail's floor: the decade at or below one transfer in n.
    let floor = 10f64.powf((1.0 / n_max as f64).log10().floor());
    let unfinished = r.run.times_us.iter().filter(|t| t.1 < 0.0).count();
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (W, 760)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(370);
        let note = if unfinished > 0 {
            format!(", {unfinished} unfinished (not shown)")
        } else {
            String::new()
        };
        let mut cdf = builder(
            &top,
            &format!(
                "Transfer completion time CDF ({} transfers{note})",
                r.transfers
            ),
        )
        .build_cartesian_2d(x_min..x_max, 0f64..1f64)
        .map_err(err)?;
        mesh(
            &mut cdf,
            "completion time (µs)",
            "fraction of transfers done",
        )?;
        let mut tail = builder(
            &bottom,
            "Tail: fraction of transfers taking at least that long (log scale)",
        )
        .build_cartesian_2d(
            x_min..x_max,
            (floor..1.0f64)
                .log_scale()
                .with_key_points(log_ticks(floor)),
        )
        .map_err(err)?;
        mesh(&mut tail, "completion time (µs)", "fraction taking ≥ time")?;
        for (name, f, color) in &runs {
            let n = f.len() as f64;
            // The CDF steps up by 1/n at each completion; the tail steps down.
            let mut up = vec![(x_min, 0.0)];
            let mut down = Vec::new();
            for (i, &x) in f.iter().enumerate() {
                up.push((x, i as f64 / n));
                up.push((x, (i + 1) as f64 / n));
                down.push((x, (n - i as f64) / n));
                down.push((x, ((n - i as f64 - 1.0) / n).max(floor)));
            }
            let series = |pts| Series {
                name: name.to_string(),
                pts,
                color: *color,
                thin: false,
            };
            line(&mut cdf, &series(up))?;
            line(&mut tail, &series(down))?;
        }
        legend(&mut cdf, SeriesLabelPosition::LowerRight)?;
        legend(&mut tail, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// `queues.svg`: the largest queue of each port kind in each bin, failure windows shaded.
pub fn queues_svg(r: &Report) -> Result<String, String> {
    let q = &r.run.queue_max_bytes;
    let max = q.iter().flatten().copied().max().unwrap_or(0) as f64;
    let (div, unit) = size_unit(max);
    let series: Vec<_> = PortKind::ALL
        .iter()
        .enumerate()
        .filter(|(k, _)| q.iter().any(|row| row[*k] > 0))
        .map(|(k, kind)| Series {
            name: match kind {
                PortKind::HostUp => "NIC → T0",
                PortKind::T0Down => "T0 → host (last hop)",
                PortKind::T0Up => "T0 → T1",
                PortKind::T1Down => "T1 → T0",
                PortKind::T1Up => "T1 → T2",
                PortKind::T2Down => "T2 → T1",
            }
            .to_string(),
            pts: steps(q.iter().map(|row| row[k] as f64), r.run.bin_us, div),
            color: COLORS[k % COLORS.len()],
            thin: false,
        })
        .collect();
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (W, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let end = x_end(r);
        time_panel(
            &root,
            &format!(
                "Largest output queue per port kind, per {} µs bin (any switch, any plane)",
                r.run.bin_us
            ),
            &format!("{unit} queued"),
            (x_start(r), end),
            &windows(r, end),
            &series,
        )?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// `sweep-summary.svg`: per failure set, the job's slowdown against the healthy run (or its completion time
/// when the sweep ran without baselines): the median over the seeds as a dot, their range as a bar.
pub fn sweep_svg(sets: &[crate::sweep::SetSummary]) -> Result<String, String> {
    let slow = sets.iter().all(|s| s.slowdown.is_some());
    let val = |s: &crate::sweep::SetSummary| {
        if slow {
            s.slowdown
                .map_or((0.0, 0.0, 0.0), |x| (x.0 * 100.0, x.1 * 100.0, x.2 * 100.0))
        } else {
            s.jct_us
        }
    };
    let lo = sets.iter().map(|s| val(s).0).fold(0.0f64, f64::min);
    let hi = sets.iter().map(|s| val(s).2).fold(0.0f64, f64::max);
    let pad = ((hi - lo) * 0.15).max(1e-3);
    let names: Vec<String> = sets.iter().map(|s| s.set.clone()).collect();
    let mut buf = String::new();
    {
        let h = 420 + 14 * names.iter().map(String::len).max().unwrap_or(0) as u32;
        let root = SVGBackend::with_string(&mut buf, (W, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = sets.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                if slow {
                    "Job slowdown by failure set: median over the seeds (dot) and their range (bar)"
                } else {
                    "Job completion time by failure set: median over the seeds (dot) and their range (bar)"
                },
                (FONT, 17),
            )
            .margin(12)
            .x_label_area_size(40 + 7 * names.iter().map(String::len).max().unwrap_or(0) as u32)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n - 0.5, (lo - pad).min(0.0)..hi + pad)
            .map_err(err)?;
        let label = |x: &f64| {
            let k = x.round();
            if (x - k).abs() < 1e-6 && k >= 0.0 {
                names.get(k as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("failure set")
            .y_desc(if slow {
                "job slowdown (%)"
            } else {
                "job completion time (µs)"
            })
            .x_labels(sets.len().max(1))
            .x_label_formatter(&label)
            .y_label_formatter(&tick)
            .x_label_style((FONT, 13).into_font().transform(FontTransform::Rotate90))
            .label_style((FONT, 13))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for (k, s) in sets.iter().enumerate() {
            let (a, m, b) = val(s);
            let x = k as f64;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, a), (x, b)],
                    ShapeStyle {
                        color: COLORS[0].to_rgba(),
                        filled: false,
                        stroke_width: 6,
                    },
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Circle::new((x, m), 6, COLORS[1].filled())))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scenario, run_scenario};

    fn report(extra: &str, planes: u32, hosts_per_t0: u32) -> Report {
        let s = Scenario::parse(&format!(
            "name = \"p\"\n[topology]\nkind = \"two_tier\"\nplanes = {planes}\nhosts_per_t0 = {hosts_per_t0}\n\
             t0 = 2\nt1 = 2\n[workload]\nkind = \"permutation\"\nbytes = 400000\n[run]\nlimit_us = 2000\n\
             bin_us = 2\n{extra}"
        ))
        .unwrap();
        run_scenario(&s, true, &mut |_, _| true).unwrap()
    }

    /// The numbers printed on an axis, in SVG text order.
    fn numbers(svg: &str) -> Vec<String> {
        svg.split("<text")
            .filter_map(|t| t.split('>').nth(1))
            .map(|t| t.split('<').next().unwrap_or("").trim().to_string())
            .filter(|t| !t.is_empty() && t.parse::<f64>().is_ok())
            .collect()
    }

    #[test]
    fn failure_windows_are_shaded_and_labelled() {
        let r = report(
            "[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 10\nuntil_us = 30\n\
             [[failures]]\nkind = \"link_down\"\nat_us = 5\nlink = { tier = \"t0_t1\", plane = 0, t0 = 1 }\n",
            2,
            4,
        );
        let w = windows(&r, 100.0);
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].from_us, w[0].to_us, w[0].label.as_str()),
            (10.0, 30.0, "plane 1 down")
        );
        assert_eq!(w[1].label, "T0-T1 links of plane 0, T0 1 down");
        assert_eq!(w[1].to_us, 100.0, "an open-ended failure lasts to the end");
        let svg = goodput_svg(&r).unwrap();
        assert!(svg.contains("plane 1 down (10–30 µs)"), "label missing");
        assert!(
            svg.contains("T0-T1 links of plane 0, T0 1 down (from 5 µs)"),
            "an open-ended failure's label says so"
        );
        assert!(svg.contains("fill=\"#FFD0C0\""), "shading missing");
        assert_eq!(svg, goodput_svg(&r).unwrap(), "plots are deterministic");
    }

    #[test]
    fn ticks_are_round_and_units_fit_the_data() {
        assert_eq!(tick(&50.0), "50");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&0.125), "0.125");
        assert_eq!(rate_unit(25_000.0), (1000.0, "Tbit/s"));
        assert_eq!(rate_unit(105e6).1, "Pbit/s");
        assert_eq!(rate_unit(400.0), (1.0, "Gbit/s"));
        assert_eq!(rate_unit(0.2).1, "Mbit/s");
        assert_eq!(log_ticks(0.01), vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]);
        // 8 planes x 16 hosts x 100 Gbit/s: the job's total is shown in Tbit/s, and it says whose sum it is.
        let r = report("", 8, 8);
        let svg = goodput_svg(&r).unwrap();
        assert!(
            svg.contains("Tbit/s, sum of 16 hosts"),
            "unit or sum missing"
        );
        let n = numbers(&svg);
        assert!(n.len() > 10, "{n:?}");
        for t in n {
            assert!(
                !t.ends_with(".0") && t.len() <= 5,
                "tick `{t}` is not round"
            );
        }
    }

    #[test]
    fn fct_plot_has_a_bounded_cdf_and_a_log_tail() {
        let r = report(
            "[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 3\nuntil_us = 30\n",
            2,
            4,
        );
        let svg = fct_svg(&r).unwrap();
        assert!(svg.contains("log scale"));
        let n = numbers(&svg);
        assert!(n.iter().any(|t| t == "1"), "{n:?}");
        assert!(
            !n.iter()
                .any(|t| t.parse::<f64>().unwrap() > 1.0 && t.parse::<f64>().unwrap() < 2.0),
            "a fraction axis beyond 1: {n:?}"
        );
        assert!(
            n.iter().any(|t| t == "0.1") && n.iter().any(|t| t == "0.2"),
            "{n:?}"
        );
    }
}
