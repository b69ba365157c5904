//! Live counters: one snapshot of a host's per-QP, per-plane and per-EV counters
//! ([`Host::counters`](crate::Host::counters)), written as JSON ([`Counters::to_json`], the document host/README.md
//! "Counters" describes) or in the Prometheus text format ([`Counters::to_prometheus`]), and served over HTTP when
//! asked ([`Host::serve_counters`](crate::Host::serve_counters), or `MRC_METRICS=addr:port` for every front end):
//! `GET /metrics` (Prometheus) and `GET /counters.json`.
//!
//! Off by default and free when off: a snapshot is taken only when someone asks for one (under the engine lock, like
//! [`Host::stats`](crate::Host::stats)); the endpoint is one thread that holds no reference keeping the host alive.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mrc::{EvState, QpState};
use serde_json::{Map, Value, json};

use crate::{HostError, HostStats};

/// Named counter values of one object, in a fixed order.
pub type Values = Vec<(&'static str, u64)>;

/// `(name, value)` for each listed field of a counters struct.
macro_rules! values {
    ($s:expr; $($f:ident),* $(,)?) => {
        vec![$((stringify!($f), u64::from($s.$f))),*]
    };
}

/// One EV of one QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvCounters {
    /// The EV.
    pub ev: u32,
    /// Its plane.
    pub plane: u8,
    /// Its health.
    pub state: EvState,
    /// In its plane's active list (else backup, retired or denied).
    pub active: bool,
    /// sent, delivered, trims, ecn, losses, retired, restored, probes, last_rtt_ns.
    pub values: Values,
}

/// One QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpCounters {
    /// Its number.
    pub qpn: u32,
    /// Its state.
    pub state: QpState,
    /// Smoothed RTT (ns), congestion window and bytes in flight.
    pub srtt_ns: u64,
    /// Congestion window (bytes).
    pub cwnd_bytes: u64,
    /// Bytes in flight.
    pub inflight_bytes: u64,
    /// The engine's `QpStats`.
    pub values: Values,
    /// The congestion controller's counters.
    pub cc: Values,
    /// The engine's `PlaneStats`, one per plane.
    pub planes: Vec<Values>,
    /// Every EV.
    pub evs: Vec<EvCounters>,
}

/// A snapshot of a host's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// When it was taken (Unix time, ns).
    pub time_unix_ns: u64,
    /// Whether each plane's port is up.
    pub ports_up: Vec<bool>,
    /// The socket layer's counters (`DatapathStats`).
    pub datapath: Values,
    /// The engine's endpoint-wide counters (`EndpointStats`) and the host's own (events dropped, CQ overruns).
    pub engine: Values,
    /// Per plane, the sum over QPs of their plane counters.
    pub planes: Vec<Values>,
    /// Every QP, by number.
    pub qps: Vec<QpCounters>,
}

/// Version of the JSON document; bumped when a field changes meaning or goes away.
pub const JSON_VERSION: u32 = 1;

pub(crate) fn host_values(s: &HostStats) -> (Values, Values) {
    let d = s.datapath;
    let datapath = values!(d; tx_datagrams, tx_batches, tx_errors, tx_blocked, tx_offload_refused,
        rx_datagrams, rx_oversize, rx_trimmed, rx_unknown_source, unreachable, rx_host, rx_host_dropped, tx_host);
    let e = s.engine;
    let mut engine = values!(e; rx_datagrams, rx_truncated, rx_bad_version, rx_unknown_opcode, rx_bad_icrc,
        rx_malformed, rx_unknown_qp, rx_bad_pkey, rx_wrong_peer, rx_ep_requests, rx_bad_port_status,
        rx_ep_responses, tx_datagrams, events_dropped, bounces, bounces_ignored);
    engine.push(("host_events_dropped", s.events_dropped));
    engine.push(("cq_overruns", s.cq_overruns));
    (datapath, engine)
}

pub(crate) fn qp_values(s: &mrc::QpStats) -> Values {
    values!(s; tx_data_packets, tx_data_bytes, tx_retransmits, tx_probes, tx_sacks, tx_nacks, tx_acks,
        rx_data_packets, rx_data_bytes, rx_duplicates, rx_trimmed, rx_out_of_window, rx_access_errors,
        rx_no_resource, rx_invalid, rx_sacks, rx_bad_acks, rx_trim_nacks, rx_retry_nacks, rx_fatal_nacks,
        rx_unknown_nacks, rx_acks, rx_probes, rx_unexpected_read_responses, losses_rack, losses_rto,
        losses_plane, ecn_marks, retries, completions, error_completions, ev_retirements, ev_restorations)
}

pub(crate) fn plane_values(s: &mrc::PlaneStats) -> Values {
    values!(s; tx_packets, tx_bytes, retransmits, trims, losses, ecn, plane_retirements)
}

pub(crate) fn ev_values(s: &mrc::EvStats) -> Values {
    values!(s; sent, delivered, trims, ecn, losses, retired, restored, probes, last_rtt_ns)
}

pub(crate) fn cc_values(s: &mrc::cc::CcCounters) -> Values {
    values!(s; proportional_increases, fair_increases, decreases, holds, quick_adapts, trims,
        last_hop_trims, losses)
}

fn object(values: &Values) -> Map<String, Value> {
    values
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::from(*v)))
        .collect()
}

fn with(mut m: Map<String, Value>, extra: Value) -> Value {
    if let Value::Object(e) = extra {
        // The identifying fields first, as a reader looks for them.
        let mut out = e;
        out.append(&mut m);
        return Value::Object(out);
    }
    Value::Object(m)
}

impl Counters {
    /// The JSON document (host/README.md "Counters").
    pub fn to_json(&self) -> String {
        let qps: Vec<Value> = self
            .qps
            .iter()
            .map(|q| {
                json!({
                    "qpn": q.qpn,
                    "state": format!("{:?}", q.state),
                    "srtt_ns": q.srtt_ns,
                    "cwnd_bytes": q.cwnd_bytes,
                    "inflight_bytes": q.inflight_bytes,
                    "counters": object(&q.values),
                    "cc": object(&q.cc),
                    "planes": q.planes.iter().enumerate()
                        .map(|(p, v)| with(object(v), json!({ "plane": p })))
                        .collect::<Vec<_>>(),
                    "evs": q.evs.iter()
                        .map(|e| with(object(&e.values), json!({
                            "ev": e.ev, "plane": e.plane, "state": format!("{:?}", e.state), "active": e.active,
                        })))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = json!({
            "version": JSON_VERSION,
            "time_unix_ns": self.time_unix_ns,
            "ports_up": self.ports_up,
            "datapath": object(&self.datapath),
            "engine": object(&self.engine),
            "planes": self.planes.iter().enumerate()
                .map(|(p, v)| with(object(v), json!({ "plane": p, "up": self.ports_up.get(p) })))
                .collect::<Vec<_>>(),
            "qps": qps,
        });
        doc.to_string()
    }

    /// The Prometheus text exposition format (version 0.0.4): counters as `mrc_<scope>_<name>_total`, with
    /// `qpn`, `plane` and `ev` labels (hex QPN and EV, as the dissector and the logs show them).
    pub fn to_prometheus(&self) -> String {
        let mut out = Prom::default();
        out.family("mrc_port_up", "gauge", "1 while the plane's port is up");
        for (p, up) in self.ports_up.iter().enumerate() {
            out.sample("mrc_port_up", &[("plane", p.to_string())], u64::from(*up));
        }
        out.counters("datapath", &[], &self.datapath);
        out.counters("engine", &[], &self.engine);
        for (p, v) in self.planes.iter().enumerate() {
            out.counters("plane", &[("plane", p.to_string())], v);
        }
        for q in &self.qps {
            let qpn = ("qpn", format!("{:#08x}", q.qpn));
            let state = ("state", format!("{:?}", q.state));
            out.family("mrc_qp_state", "gauge", "1 for the QP's current state");
            out.sample("mrc_qp_state", &[qpn.clone(), state], 1);
            for (name, v, help) in [
                ("mrc_qp_srtt_ns", q.srtt_ns, "smoothed RTT (ns)"),
                ("mrc_qp_cwnd_bytes", q.cwnd_bytes, "congestion window"),
                ("mrc_qp_inflight_bytes", q.inflight_bytes, "bytes in flight"),
            ] {
                out.family(name, "gauge", help);
                out.sample(name, std::slice::from_ref(&qpn), v);
            }
            out.counters("qp", std::slice::from_ref(&qpn), &q.values);
            out.counters("qp_cc", std::slice::from_ref(&qpn), &q.cc);
            for (p, v) in q.planes.iter().enumerate() {
                out.counters("qp_plane", &[qpn.clone(), ("plane", p.to_string())], v);
            }
            for e in &q.evs {
                let labels = [
                    qpn.clone(),
                    ("ev", format!("{:#010x}", e.ev)),
                    ("plane", e.plane.to_string()),
                ];
                out.family(
                    "mrc_ev_good",
                    "gauge",
                    "1 while the EV is usable (Good or Skip)",
                );
                let good = matches!(e.state, EvState::Good | EvState::Skip);
                out.sample("mrc_ev_good", &labels, u64::from(good));
                let (gauges, counters): (Values, Values) =
                    e.values.iter().partition(|(k, _)| *k == "last_rtt_ns");
                for (k, v) in gauges {
                    let name = format!("mrc_ev_{k}");
                    out.family(&name, "gauge", "last RTT measured on the EV (ns)");
                    out.sample(&name, &labels, v);
                }
                out.counters("ev", &labels, &counters);
            }
        }
        out.text
    }
}

/// Prometheus text, each family's HELP and TYPE once, before its first sample.
#[derive(Default)]
struct Prom {
    text: String,
    seen: std::collections::BTreeSet<String>,
}

impl Prom {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        if self.seen.insert(name.to_string()) {
            self.text
                .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, String)], v: u64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            self.text.push('{');
            self.text.push_str(&l.join(","));
            self.text.push('}');
        }
        self.text.push_str(&format!(" {v}\n"));
    }

    fn counters(&mut self, scope: &str, labels: &[(&str, String)], values: &Values) {
        for (k, v) in values {
            let name = format!("mrc_{scope}_{k}_total");
            self.family(&name, "counter", &format!("mrc-host {scope} counter {k}"));
            self.sample(&name, labels, *v);
        }
    }
}

/// The HTTP endpoint of [`Host::serve_counters`](crate::Host::serve_counters); dropping it stops the thread.
#[derive(Debug)]
pub struct CountersServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

// The endpoint's own thread may drop the last reference to the host while it answers, and with it this
// server: it must not wait for itself.
fn is_current(t: &std::thread::JoinHandle<()>) -> bool {
    t.thread().id() == std::thread::current().id()
}

impl CountersServer {
    /// The address it listens on (with the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for CountersServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take()
            && !is_current(&t)
        {
            let _ = t.join();
        }
    }
}

/// How long the endpoint waits between looks at a quiet listener, and for a slow client.
const POLL: Duration = Duration::from_millis(50);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request head read; the rest is ignored.
const MAX_REQUEST: usize = 4096;

/// What the endpoint serves: a host seen through a reference that does not keep it alive.
pub(crate) trait Source: Send + 'static {
    /// The counters now; `None` once the host is gone.
    fn snapshot(&self) -> Option<Counters>;
    /// Whether the host is gone (the endpoint's thread then ends).
    fn gone(&self) -> bool;
}

/// Serves `source` over HTTP on `addr` from a thread of its own ([`Host::serve_counters`]).
pub(crate) fn serve_on(addr: SocketAddr, source: impl Source) -> Result<CountersServer, HostError> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| HostError::Io(io::Error::new(e.kind(), format!("counters on {addr}: {e}"))))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("mrc-counters".into())
        .spawn(move || serve(&listener, &source, &flag))?;
    Ok(CountersServer {
        addr,
        stop,
        thread: Some(thread),
    })
}

/// [`serve_on`] on the first free port from `addr`'s (port 0: any).
pub(crate) fn serve_from<S: Source + Clone>(
    addr: SocketAddr,
    source: S,
) -> Result<CountersServer, HostError> {
    let mut a = addr;
    let mut last = None;
    for i in 0..PORTS_TRIED {
        if addr.port() != 0 {
            a.set_port(addr.port().saturating_add(i));
        }
        match serve_on(a, source.clone()) {
            Ok(s) => return Ok(s),
            Err(HostError::Io(e)) if e.kind() == io::ErrorKind::AddrInUse && addr.port() != 0 => {
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(HostError::Invalid(format!(
        "counters endpoint: no free port among {PORTS_TRIED} from {addr} ({})",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

fn serve(listener: &TcpListener, source: &impl Source, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => {
                if source.gone() {
                    return;
                }
                let _ = answer(stream, source);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if source.gone() {
                    return;
                }
                std::thread::sleep(POLL);
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn answer(mut stream: TcpStream, source: &impl Source) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4",
            snapshot(source)?.to_prometheus(),
        ),
        ("GET", "/counters.json") => ("200 OK", "application/json", snapshot(source)?.to_json()),
        ("GET", _) => (
            "404 Not Found",
            "text/plain",
            "try /metrics or /counters.json\n".to_string(),
        ),
        _ => ("405 Method Not Allowed", "text/plain", String::new()),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The host's counters, or an error that ends the answer once the host is gone.
fn snapshot(source: &impl Source) -> io::Result<Counters> {
    source
        .snapshot()
        .ok_or_else(|| io::Error::other("the host is gone"))
}

/// `MRC_METRICS` (`addr:port`, e.g. `127.0.0.1:9464` or `[::1]:9464`): where every host of the process serves
/// its counters unless its configuration says otherwise; unset or empty: nowhere.
pub(crate) fn metrics_from_env() -> Result<Option<SocketAddr>, HostError> {
    let Some(v) = std::env::var("MRC_METRICS")
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        return Ok(None);
    };
    v.trim().parse().map(Some).map_err(|_| {
        HostError::Invalid(format!(
            "MRC_METRICS={v}: give addr:port, e.g. 127.0.0.1:9464"
        ))
    })
}

/// Ports tried from the one asked for: several hosts (NCCL ranks on one node, two hosts in one process) each
/// take the first free one.
const PORTS_TRIED: u16 = 64;
