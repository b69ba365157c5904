//! Run-time faults. Each records itself (and how to undo it) in the state file, so `show` lists it and the
//! matching "un" command or `down` removes it.
//!
//! | fault | how |
//! |---|---|
//! | `link-down` / `link-up` | admin-down one end (`ip link set dev X down`); the routes the kernel deletes with it are saved first and replayed on up |
//! | `cut` / `uncut` | silent: nft `netdev` ingress+egress `drop` on both ends; no carrier change, no ICMP |
//! | `plane-down` / `plane-up` | a silent cut (or, with `--signal`, admin-down) of every T0–T1 link of a plane |
//! | `drop` / `undrop` | nft `numgen random` drop at the ingress of one or both ends |
//! | `rate` / `unrate` | tbf on one end's egress |
//! | `flap` | toggles a silent cut in the foreground |
//! | `trim on` / `trim off` | HTB + a clsact egress BPF program that trims uSID UDP packets above a backlog |

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::netns::{self, run_in, run_in_with_input};
use super::plan::{Link, LinkEnd, Node, Topology};
use super::state::{self, Fault, Lock, State, Undo};
use super::{Error, Result};

/// The trimming program's source, compiled at run time.
pub const TRIM_BPF_SRC: &str = include_str!("../../bpf/trim.bpf.c");

/// Which direction(s) of a link a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Both directions.
    Both,
    /// From the first-named end to the second.
    AtoB,
    /// From the second-named end to the first.
    BtoA,
}

impl Dir {
    /// Parses `both`, `a-to-b` or `b-to-a`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "both" => Ok(Dir::Both),
            "a-to-b" => Ok(Dir::AtoB),
            "b-to-a" => Ok(Dir::BtoA),
            _ => Err(Error::arg(
                "--dir",
                format!("{s:?}; allowed: both, a-to-b, b-to-a"),
            )),
        }
    }
}

/// A link named on the command line, resolved against the fabric.
pub fn resolve(st: &State, plane: usize, link: &str) -> Result<Link> {
    let (a, b) = link.split_once(':').ok_or_else(|| {
        Error::arg(
            "--link",
            format!("{link:?}; write two ends separated by ':', e.g. t0-0:t1-0 or h0:t0-0"),
        )
    })?;
    st.topology
        .link(&st.prefix, plane, Node::parse(a)?, Node::parse(b)?)
}

/// The link's name with its ends in a fixed order, so `t1-0:t0-0` and `t0-0:t1-0` are the same link.
fn key(link: &Link) -> String {
    let mut v: Vec<&str> = link.name.split(':').collect();
    v.sort_unstable();
    v.join(":")
}

/// Picks one end: `a` (first named, the default) or `b`.
pub fn pick_end(link: &Link, end: &str) -> Result<LinkEnd> {
    match end {
        "a" => Ok(link.ends[0].clone()),
        "b" => Ok(link.ends[1].clone()),
        _ => Err(Error::arg(
            "--end",
            format!("{end:?}; allowed: a (first-named end), b"),
        )),
    }
}

/// Locks, loads, runs `f`, saves.
fn with_state<T>(prefix: &str, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
    let _lock = Lock::take(prefix)?;
    let mut st = State::need(prefix)?;
    let r = f(&mut st);
    st.save()?;
    r
}

fn find(st: &State, kind: &str, plane: usize, link: &str) -> Option<usize> {
    st.faults
        .iter()
        .position(|f| f.kind == kind && f.plane == plane && f.link == link)
}

fn ensure_absent(st: &State, kind: &str, plane: usize, link: &str) -> Result<()> {
    match find(st, kind, plane, link) {
        Some(_) => Err(Error::msg(format!(
            "plane {plane} link {link} already has a {kind} fault"
        ))),
        None => Ok(()),
    }
}

fn take(st: &mut State, kind: &str, plane: usize, link: &str) -> Result<Fault> {
    match find(st, kind, plane, link) {
        Some(i) => Ok(st.faults.remove(i)),
        None => {
            let active: Vec<String> = st
                .faults
                .iter()
                .map(|f| format!("{} p{} {}", f.kind, f.plane, f.link))
                .collect();
            Err(Error::msg(format!(
                "no {kind} fault on plane {plane} link {link}; active faults: [{}]",
                active.join(", ")
            )))
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch, for lining faults up with other tools' timelines.
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// nft table names: identifiers without '-'.
fn table_name(tag: &str, dev: &str) -> String {
    format!("mrc{tag}_{}", dev.replace('-', "_"))
}

/// A silent cut of one device: drop everything in and out.
fn nft_cut(end: &LinkEnd, table: &str) -> Result<Undo> {
    nft_cut_all(&[(end, table.to_string())], None).map(|mut u| u.remove(0))
}

/// Silent cuts of several devices at once: one `nft` transaction per namespace, all started before any is waited
/// for, so the cuts land together (one transaction is atomic) rather than one process start apart. On failure,
/// the cuts that did land are undone.
/// With `at` (unix seconds), the rules drop only from that second on (`meta time`, compared with each packet's
/// clock): the cut then lands at that instant exactly, however long `nft` takes to start.
fn nft_cut_all(ends: &[(&LinkEnd, String)], at: Option<u64>) -> Result<Vec<Undo>> {
    let when = at.map_or(String::new(), |t| format!("meta time >= {t} "));
    // Namespaces in first-seen order, each with its tables.
    let mut by_ns: Vec<(&str, String, Vec<Undo>)> = Vec::new();
    for (end, table) in ends {
        let rules = format!(
            "table netdev {table} {{\n chain in {{ type filter hook ingress device \"{d}\" priority -500; {when}counter drop; }}\n \
             chain out {{ type filter hook egress device \"{d}\" priority -500; {when}counter drop; }}\n}}\n",
            d = end.dev
        );
        let u = Undo::NftTable {
            ns: end.ns.clone(),
            family: "netdev".into(),
            table: table.clone(),
        };
        match by_ns.iter_mut().find(|(ns, ..)| *ns == end.ns) {
            Some((_, r, us)) => {
                r.push_str(&rules);
                us.push(u);
            }
            None => by_ns.push((&end.ns, rules, vec![u])),
        }
    }
    let started: Vec<_> = by_ns
        .into_iter()
        .map(|(ns, rules, us)| {
            (
                us,
                netns::spawn_in_with_input(ns, "nft", &["-f", "-"], &rules),
            )
        })
        .collect();
    let mut done = Vec::new();
    let mut first_err = None;
    for (us, s) in started {
        match s.and_then(|(what, child)| netns::finish(&what, child)) {
            Ok(_) => done.extend(us),
            Err(e) => {
                first_err.get_or_insert(nft_hint(e));
            }
        }
    }
    match first_err {
        None => Ok(done),
        Some(e) => {
            for u in &done {
                let _ = undo(u);
            }
            Err(e)
        }
    }
}

fn nft_hint(e: Error) -> Error {
    if e.message.contains("cannot run") {
        Error::msg(format!(
            "{}; install nftables (apt-get install nftables)",
            e.message
        ))
    } else {
        e
    }
}

/// Undoes one thing; errors about things already gone are ignored.
pub fn undo(u: &Undo) -> Result<()> {
    match u {
        Undo::NftTable { ns, family, table } => {
            if netns::exists(ns) {
                let _ = run_in(ns, "nft", &["delete", "table", family, table]);
            }
        }
        Undo::Qdisc { end, parent } => {
            if netns::exists(&end.ns) {
                let _ = run_in(&end.ns, "tc", &["qdisc", "del", "dev", &end.dev, parent]);
            }
        }
        Undo::LinkDown { end, routes } => {
            netns::batch(Some(&end.ns), &[format!("link set dev {} up", end.dev)])?;
            if !routes.is_empty() {
                // -force: a route whose other next hop is down fails; the rest still go in.
                let c = netns::spawn_batch(Some(&end.ns), routes, true)?;
                let _ = c.wait_with_output();
            }
        }
    }
    Ok(())
}

fn undo_all(f: &Fault) -> Result<()> {
    let mut first = None;
    for u in f.undo.iter().rev() {
        if let Err(e) = undo(u) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Admin-downs `end`, returning the record with the routes to restore: what `ip route show dev` lists now, plus
/// the plan's own routes through that device (covers multipath routes, which `show dev` does not list).
fn down_end(topo: &Topology, prefix: &str, end: &LinkEnd) -> Result<Undo> {
    let out = run_in(
        &end.ns,
        "ip",
        &["-o", "-6", "route", "show", "dev", &end.dev],
    )?;
    let mut routes: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("proto kernel") && !l.trim().is_empty())
        .map(|l| {
            format!(
                "route replace {} dev {}",
                l.replace('\\', " ").trim(),
                end.dev
            )
        })
        .collect();
    let plan = topo.plan(prefix);
    if let Some(i) = plan.namespaces.iter().position(|(n, _)| *n == end.ns) {
        let needle = format!(" dev {}", end.dev);
        for l in &plan.batches[i][2] {
            if l.split(" nexthop")
                .any(|part| part.ends_with(&needle) || part.contains(&format!("{needle} ")))
            {
                routes.push(l.replacen("route add", "route replace", 1));
            }
        }
    }
    netns::batch(Some(&end.ns), &[format!("link set dev {} down", end.dev)])?;
    Ok(Undo::LinkDown {
        end: end.clone(),
        routes,
    })
}

/// `link-down`: admin-down one end of a link.
pub fn link_down(prefix: &str, plane: usize, link: &str, end: &str) -> Result<String> {
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "link-down", plane, &k)?;
        let e = pick_end(&l, end)?;
        let u = down_end(&st.topology, prefix, &e)?;
        st.faults.push(Fault {
            kind: "link-down".into(),
            plane,
            link: k.clone(),
            detail: format!("admin down {e}"),
            pid: None,
            undo: vec![u],
        });
        Ok(format!("plane {plane} link {k}: {e} admin down"))
    })
}

/// Undoes a fault of `kind` on a link.
pub fn clear(prefix: &str, kind: &str, plane: usize, link: &str) -> Result<String> {
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        let f = take(st, kind, plane, &k)?;
        undo_all(&f)?;
        Ok(format!("plane {plane} link {k}: {kind} removed"))
    })
}

/// `cut`: silent cut of a link (nft drop in and out on both ends).
pub fn cut(prefix: &str, plane: usize, link: &str) -> Result<String> {
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "cut", plane, &k)?;
        let ends: Vec<_> = l
            .ends
            .iter()
            .map(|e| (e, table_name("cut", &e.dev)))
            .collect();
        let start = unix_ms();
        let undo = nft_cut_all(&ends, None)?;
        let done = unix_ms();
        st.faults.push(Fault {
            kind: "cut".into(),
            plane,
            link: k.clone(),
            detail: "silent".into(),
            pid: None,
            undo,
        });
        Ok(format!(
            "plane {plane} link {k}: cut (silent) between unix ms {start} and {done}"
        ))
    })
}

/// When a silent `plane-down` lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutTime {
    /// As soon as `nft` commits (between the two stamps it prints, a few ms apart).
    Now,
    /// At the next whole second at least 300 ms away, to the nanosecond (`meta time`); the command returns
    /// before it and says when.
    NextSecond,
}

/// `plane-down`: cut (or admin-down with `signal`) every T0–T1 link of a plane.
pub fn plane_down(prefix: &str, plane: usize, signal: bool, when: CutTime) -> Result<String> {
    with_state(prefix, |st| {
        let topo = st.topology;
        if plane >= topo.planes {
            return Err(Error::arg(
                "plane",
                format!("{plane} does not exist; allowed 0..={}", topo.planes - 1),
            ));
        }
        ensure_absent(st, "plane-down", plane, "*")?;
        let mut undo = Vec::new();
        let mut res = Ok(());
        let mut links = Vec::new();
        for i in 0..topo.t0s {
            for j in 0..topo.t1s {
                links.push(topo.link(prefix, plane, Node::T0(i), Node::T1(j))?);
            }
        }
        if signal && when == CutTime::NextSecond {
            return Err(Error::arg(
                "at-second",
                "only a silent cut can be scheduled; drop --signal or --at-second",
            ));
        }
        let at = (when == CutTime::NextSecond).then(|| (unix_ms() + 300).div_ceil(1000) as u64);
        let start = unix_ms();
        if signal {
            for l in &links {
                if let Err(e) = down_end(&topo, prefix, &l.ends[0]).map(|u| undo.push(u)) {
                    res = Err(e);
                    break;
                }
            }
        } else {
            // Dropping both ways at the T1 end silences a link as well as cutting both ends, and a T1's links
            // then go in one nft transaction: the plane fails as one event.
            let ends: Vec<_> = links
                .iter()
                .map(|l| (&l.ends[1], table_name("plane", &l.ends[1].dev)))
                .collect();
            match nft_cut_all(&ends, at) {
                Ok(u) => undo = u,
                Err(e) => res = Err(e),
            }
        }
        let f = Fault {
            kind: "plane-down".into(),
            plane,
            link: "*".into(),
            detail: if signal {
                "admin down T0 ends"
            } else {
                "silent cut"
            }
            .into(),
            pid: None,
            undo,
        };
        if let Err(e) = res {
            let _ = undo_all(&f);
            return Err(e);
        }
        // The cut landed between the two stamps (nft started, nft committed), or at the scheduled second exactly:
        // scripts that time the recovery read them.
        let done = unix_ms();
        let (start, done) = match at {
            Some(t) => (u128::from(t) * 1000, u128::from(t) * 1000),
            None => (start, done),
        };
        st.faults.push(f);
        Ok(format!(
            "plane {plane}: down ({} T0-T1 links) between unix ms {start} and {done}",
            topo.t0s * topo.t1s
        ))
    })
}

/// `plane-up`.
pub fn plane_up(prefix: &str, plane: usize) -> Result<String> {
    with_state(prefix, |st| {
        let f = take(st, "plane-down", plane, "*")?;
        undo_all(&f)?;
        Ok(format!("plane {plane}: up"))
    })
}

/// `drop`: random drop of `percent` % at the ingress of the receiving end(s).
pub fn drop(prefix: &str, plane: usize, link: &str, percent: f64, dir: Dir) -> Result<String> {
    if !(0.0..=100.0).contains(&percent) {
        return Err(Error::arg(
            "--percent",
            format!("{percent}; allowed 0..=100 (0.01 steps)"),
        ));
    }
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "drop", plane, &k)?;
        let n = (percent * 100.0).round() as u32;
        // Traffic a->b is received at b's ingress.
        let receivers: Vec<&LinkEnd> = match dir {
            Dir::Both => l.ends.iter().collect(),
            Dir::AtoB => vec![&l.ends[1]],
            Dir::BtoA => vec![&l.ends[0]],
        };
        let mut undo = Vec::new();
        for e in receivers {
            let table = table_name("drop", &e.dev);
            let rules = format!(
                "table netdev {table} {{\n chain in {{ type filter hook ingress device \"{}\" priority -400; \
                 meta protocol ip6 numgen random mod 10000 < {n} counter drop; counter; }}\n}}\n",
                e.dev
            );
            match run_in_with_input(&e.ns, "nft", &["-f", "-"], &rules) {
                Ok(_) => undo.push(Undo::NftTable {
                    ns: e.ns.clone(),
                    family: "netdev".into(),
                    table,
                }),
                Err(err) => {
                    undo.iter().for_each(drop_undo);
                    return Err(nft_hint(err));
                }
            }
        }
        let detail = format!("{percent}% random drop, {dir:?}");
        st.faults.push(Fault {
            kind: "drop".into(),
            plane,
            link: k.clone(),
            detail: detail.clone(),
            pid: None,
            undo,
        });
        Ok(format!("plane {plane} link {k}: {detail}"))
    })
}

fn drop_undo(u: &Undo) {
    let _ = undo(u);
}

/// `rate`: tbf on one end's egress.
pub fn rate(
    prefix: &str,
    plane: usize,
    link: &str,
    end: &str,
    mbit: u64,
    burst_kb: u64,
) -> Result<String> {
    if mbit == 0 {
        return Err(Error::arg("--mbit", "0; allowed 1.. (Mbit/s)"));
    }
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "rate", plane, &k)?;
        let e = pick_end(&l, end)?;
        let burst = burst_kb.max(4 * st.topology.mtu as u64 / 1000 + 1);
        run_in(
            &e.ns,
            "tc",
            &[
                "qdisc",
                "replace",
                "dev",
                &e.dev,
                "root",
                "tbf",
                "rate",
                &format!("{mbit}mbit"),
                "burst",
                &format!("{burst}kb"),
                "latency",
                "5ms",
            ],
        )?;
        let detail = format!("tbf {mbit} Mbit/s burst {burst} kB on {e} egress");
        st.faults.push(Fault {
            kind: "rate".into(),
            plane,
            link: k.clone(),
            detail: detail.clone(),
            pid: None,
            undo: vec![Undo::Qdisc {
                end: e,
                parent: "root".into(),
            }],
        });
        Ok(format!("plane {plane} link {k}: {detail}"))
    })
}

/// `flap`: toggles a silent cut at `hz` (cut for `duty` of each period) until `for_secs` elapse or a signal
/// arrives; leaves the link up. Returns the number of cuts.
pub fn flap(
    prefix: &str,
    plane: usize,
    link: &str,
    hz: f64,
    duty: f64,
    for_secs: Option<f64>,
) -> Result<String> {
    if !(hz > 0.0 && hz <= 100.0) {
        return Err(Error::arg("--hz", format!("{hz}; allowed (0, 100]")));
    }
    if !(duty > 0.0 && duty < 1.0) {
        return Err(Error::arg(
            "--duty",
            format!("{duty}; allowed (0, 1): the fraction of each period cut"),
        ));
    }
    let (l, k) = with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "flap", plane, &k)?;
        let undo = l
            .ends
            .iter()
            .map(|e| Undo::NftTable {
                ns: e.ns.clone(),
                family: "netdev".into(),
                table: table_name("flap", &e.dev),
            })
            .collect();
        st.faults.push(Fault {
            kind: "flap".into(),
            plane,
            link: k.clone(),
            detail: format!("{hz} Hz duty {duty}"),
            pid: Some(std::process::id()),
            undo,
        });
        Ok((l, k))
    })?;
    crate::stop::install();
    let period = Duration::from_secs_f64(1.0 / hz);
    let cut_for = period.mul_f64(duty);
    let start = Instant::now();
    let deadline = for_secs.map(|s| start + Duration::from_secs_f64(s));
    let done = || crate::stop::requested() || deadline.is_some_and(|d| Instant::now() >= d);
    let sleep_until = |t: Instant| {
        while !done() {
            let now = Instant::now();
            if now >= t {
                break;
            }
            std::thread::sleep((t - now).min(Duration::from_millis(20)));
        }
    };
    let mut cuts = 0u64;
    let mut err = None;
    let mut next = start;
    while !done() {
        for e in &l.ends {
            if let Err(x) = nft_cut(e, &table_name("flap", &e.dev)) {
                err = Some(x);
            }
        }
        if err.is_some() {
            break;
        }
        cuts += 1;
        sleep_until(next + cut_for);
        for e in &l.ends {
            let _ = run_in(
                &e.ns,
                "nft",
                &["delete", "table", "netdev", &table_name("flap", &e.dev)],
            );
        }
        next += period;
        sleep_until(next);
    }
    let _ = with_state(prefix, |st| {
        if let Some(i) = find(st, "flap", plane, &k) {
            let f = st.faults.remove(i);
            let _ = undo_all(&f);
        }
        Ok(())
    });
    match err {
        Some(e) => Err(e),
        None => Ok(format!(
            "plane {plane} link {k}: flapped {cuts} times in {:.1} s; link left up",
            start.elapsed().as_secs_f64()
        )),
    }
}

fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles `bpf/trim.bpf.c` for a threshold and a kept payload size; returns the object's path.
pub fn build_trim(prefix: &str, threshold: u32, keep: u32) -> Result<PathBuf> {
    if !have("clang") || !have("bpftool") {
        return Err(Error::msg(
            "trim needs clang and bpftool: apt-get install clang llvm bpftool libbpf-dev"
                .to_string(),
        ));
    }
    let dir = state::dir(prefix).join("bpf");
    std::fs::create_dir_all(&dir).map_err(|e| Error::msg(format!("{}: {e}", dir.display())))?;
    let vmlinux = dir.join("vmlinux.h");
    if !vmlinux.exists() {
        let out = Command::new("bpftool")
            .args([
                "btf",
                "dump",
                "file",
                "/sys/kernel/btf/vmlinux",
                "format",
                "c",
            ])
            .output()
            .map_err(|e| Error::msg(format!("bpftool: {e}")))?;
        if !out.status.success() {
            return Err(Error::msg(format!(
                "bpftool btf dump (needs kernel BTF, /sys/kernel/btf/vmlinux): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        std::fs::write(&vmlinux, out.stdout)
            .map_err(|e| Error::msg(format!("{}: {e}", vmlinux.display())))?;
    }
    let src = dir.join("trim.bpf.c");
    std::fs::write(&src, TRIM_BPF_SRC)
        .map_err(|e| Error::msg(format!("{}: {e}", src.display())))?;
    let obj = dir.join(format!("trim-{threshold}-{keep}.o"));
    let out = Command::new("clang")
        .args(["-target", "bpf", "-O2", "-g"])
        .arg(format!("-DTRIM_THRESH={threshold}"))
        .arg(format!("-DTRIM_KEEP={keep}"))
        .arg(format!("-I{}", dir.display()))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|e| Error::msg(format!("clang: {e}")))?;
    if !out.status.success() {
        return Err(Error::msg(format!(
            "clang trim.bpf.c: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(obj)
}

/// `trim on`: HTB at `mbit` on one end's egress (class 1:2 prio 0 for trimmed headers, 1:10 for data) plus the
/// trimming program at clsact egress.
pub fn trim_on(
    prefix: &str,
    plane: usize,
    link: &str,
    end: &str,
    threshold: u32,
    mbit: u64,
    keep: u32,
) -> Result<String> {
    if mbit == 0 {
        return Err(Error::arg("--mbit", "0; allowed 1.. (Mbit/s)"));
    }
    if threshold == 0 || threshold > 10_000 {
        return Err(Error::arg(
            "--threshold",
            format!("{threshold}; allowed 1..=10000 packets"),
        ));
    }
    if !(8..=1024).contains(&keep) {
        return Err(Error::arg(
            "--keep",
            format!("{keep}; allowed 8..=1024 bytes of UDP payload"),
        ));
    }
    let obj = build_trim(prefix, threshold, keep)?;
    with_state(prefix, |st| {
        let l = resolve(st, plane, link)?;
        let k = key(&l);
        ensure_absent(st, "trim", plane, &k)?;
        let e = pick_end(&l, end)?;
        let d = &e.dev;
        let r = format!("{mbit}mbit");
        let script = format!(
            "qdisc replace dev {d} root handle 1: htb default 10\n\
             class add dev {d} parent 1: classid 1:1 htb rate {r} ceil {r} quantum 60000\n\
             class add dev {d} parent 1:1 classid 1:2 htb rate {r} ceil {r} prio 0 quantum 60000\n\
             class add dev {d} parent 1:1 classid 1:10 htb rate {r} ceil {r} prio 1 quantum 60000\n\
             qdisc add dev {d} parent 1:2 handle 2: pfifo limit 1000\n\
             qdisc add dev {d} parent 1:10 handle 10: pfifo limit 200\n\
             qdisc replace dev {d} clsact\n\
             filter add dev {d} egress bpf da obj {} sec tc\n",
            obj.display()
        );
        let undo = vec![
            Undo::Qdisc {
                end: e.clone(),
                parent: "root".into(),
            },
            Undo::Qdisc {
                end: e.clone(),
                parent: "clsact".into(),
            },
        ];
        if let Err(x) = run_in_with_input(&e.ns, "tc", &["-batch", "-"], &script) {
            undo.iter().for_each(drop_undo);
            return Err(x);
        }
        let detail =
            format!("HTB {mbit} Mbit/s + trim above {threshold} pkts to {keep} B on {e} egress");
        st.faults.push(Fault {
            kind: "trim".into(),
            plane,
            link: k.clone(),
            detail: detail.clone(),
            pid: None,
            undo,
        });
        Ok(format!("plane {plane} link {k}: {detail}"))
    })
}
