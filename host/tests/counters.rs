//! Live counters over loopback sockets: after a WRITE across two planes the snapshot's QP, plane and EV
//! counters add up to what moved; the JSON document and the Prometheus endpoint say the same; a plane taken
//! down shows as down; `MRC_METRICS` starts the endpoint for a host that asked for nothing.
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use mrc_host::{Host, HostConfig, ProgressMode};
use serde_json::Value;

mod common;

use common::{link, write_and_check};

fn host(metrics: Option<SocketAddr>) -> Host {
    let mut cfg = HostConfig::loopback(2);
    cfg.progress = ProgressMode::Manual;
    cfg.profile.mtu = 4096;
    cfg.metrics = metrics;
    Host::start(cfg).expect("loopback sockets")
}

/// Writes `len` bytes from `a` to `b` on the first QP of a new link; returns the QPNs (a's, b's).
fn write(a: &Host, b: &Host, len: usize) -> (u32, u32) {
    let (la, lb) = link(a, b, 1);
    write_and_check(a, b, &la.qps()[0], la.send_cq(), len);
    let qpns = (la.qps()[0].qpn(), lb.qps()[0].qpn());
    std::mem::forget((la, lb)); // keep the QPs for the snapshot
    qpns
}

fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

fn value(values: &[(&'static str, u64)], name: &str) -> u64 {
    values.iter().find(|(k, _)| *k == name).unwrap().1
}

/// The sample of `metric` whose label set contains `labels`, from Prometheus text.
fn sample(text: &str, metric: &str, labels: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{metric}{{")) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn snapshot_json_and_prometheus_agree_with_what_moved() {
    let a = host(Some("127.0.0.1:0".parse().unwrap()));
    let b = host(None);
    let len = 256 << 10;
    let (qa, qb) = write(&a, &b, len);
    let (ca, cb) = (a.counters(), b.counters());
    let qp = ca.qps.iter().find(|q| q.qpn == qa).expect("a's QP");
    let rq = cb.qps.iter().find(|q| q.qpn == qb).expect("b's QP");
    assert_eq!(value(&rq.values, "rx_data_bytes"), len as u64);
    let tx = value(&qp.values, "tx_data_bytes");
    let retx = value(&qp.values, "tx_retransmits");
    assert!(tx >= len as u64);
    // Per plane and per EV, the QP's packets are all accounted for, and both planes carried some.
    let plane_bytes: Vec<u64> = qp.planes.iter().map(|p| value(p, "tx_bytes")).collect();
    assert_eq!(plane_bytes.iter().sum::<u64>(), tx);
    assert!(plane_bytes.iter().all(|&b| b > 0), "{plane_bytes:?}");
    let ev_sent: u64 = qp.evs.iter().map(|e| value(&e.values, "sent")).sum();
    assert!(ev_sent >= value(&qp.values, "tx_data_packets"));
    assert_eq!(ca.planes.len(), 2);
    assert_eq!(value(&ca.planes[0], "tx_bytes"), plane_bytes[0]);
    assert_eq!(ca.ports_up, [true, true]);
    assert_eq!(
        value(&ca.datapath, "tx_datagrams"),
        a.stats().datapath.tx_datagrams
    );

    let doc: Value = serde_json::from_str(&ca.to_json()).unwrap();
    assert_eq!(doc["version"], 1);
    let jq = doc["qps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["qpn"] == qa)
        .unwrap();
    assert_eq!(jq["counters"]["tx_data_bytes"], tx);
    assert_eq!(jq["counters"]["tx_retransmits"], retx);
    assert_eq!(jq["planes"][1]["tx_bytes"], plane_bytes[1]);
    assert_eq!(jq["evs"].as_array().unwrap().len(), qp.evs.len());

    // The endpoint serves the same numbers (nothing moved since), and a plane taken down shows.
    let addr = a.counters_endpoint().expect("endpoint started");
    let (head, text) = get(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let qpn = format!("qpn=\"{qa:#08x}\"");
    assert_eq!(sample(&text, "mrc_qp_tx_data_bytes_total", &qpn), Some(tx));
    assert_eq!(
        sample(
            &text,
            "mrc_qp_plane_tx_bytes_total",
            &format!("{qpn},plane=\"1\"")
        ),
        Some(plane_bytes[1])
    );
    assert!(text.contains("# TYPE mrc_qp_tx_data_bytes_total counter"));
    a.set_port(1, false).unwrap();
    let (_, text) = get(addr, "/metrics");
    assert_eq!(sample(&text, "mrc_port_up", "plane=\"1\""), Some(0));
    assert_eq!(sample(&text, "mrc_port_up", "plane=\"0\""), Some(1));
    let (head, body) = get(addr, "/counters.json");
    assert!(head.contains("application/json"));
    let served: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(served["ports_up"], serde_json::json!([true, false]));
    let (head, _) = get(addr, "/nothing");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
}

/// The endpoint is off unless asked for, and `MRC_METRICS` asks for it: this test runs itself again with it set.
#[test]
fn the_environment_starts_the_endpoint() {
    if std::env::var_os("MRC_METRICS_TEST_CHILD").is_some() {
        let (a, b) = (host(None), host(None));
        let (ea, eb) = (
            a.counters_endpoint().unwrap(),
            b.counters_endpoint().unwrap(),
        );
        assert_eq!(
            eb.port(),
            ea.port() + 1,
            "the second host takes the next free port"
        );
        let (head, _) = get(ea, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"));
        return;
    }
    assert_eq!(host(None).counters_endpoint(), None, "off by default");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_environment_starts_the_endpoint",
            "--nocapture",
        ])
        .env("MRC_METRICS_TEST_CHILD", "1")
        .env("MRC_METRICS", format!("127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
