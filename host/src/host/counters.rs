//! A host's counters: the snapshot ([`Host::counters`]) and the HTTP endpoint serving it
//! ([`crate::counters`] formats and serves; this file reads the host).

use std::net::SocketAddr;
use std::sync::Weak;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::counters::{
    Counters, CountersServer, EvCounters, QpCounters, Source, Values, cc_values, ev_values,
    host_values, plane_values, qp_values, serve_from, serve_on,
};
use crate::error::HostError;
use crate::plane::PlaneIo;

use super::state::{Handle, Host};

impl<P: PlaneIo> Host<P> {
    /// A snapshot of every counter: the host's, each plane's, each QP's with its planes and EVs.
    pub fn counters(&self) -> Counters {
        let stats = self.stats();
        let (datapath, engine) = host_values(&stats);
        let planes = self.local().planes.len();
        let (ports, qps) = self.with_datapath(|dp, _, _| {
            let ep = dp.endpoint_ref();
            let qps: Vec<QpCounters> = ep
                .qpns()
                .into_iter()
                .filter_map(|qpn| {
                    let (srtt, cwnd, inflight) = ep.qp_transport(qpn)?;
                    Some(QpCounters {
                        qpn,
                        state: ep.qp_state(qpn)?,
                        srtt_ns: u64::try_from(srtt.as_nanos()).unwrap_or(u64::MAX),
                        cwnd_bytes: cwnd,
                        inflight_bytes: inflight,
                        values: qp_values(&ep.qp_stats(qpn)?),
                        cc: ep
                            .qp_cc_counters(qpn)
                            .map_or_else(Vec::new, |c| cc_values(&c)),
                        planes: (0..planes)
                            .map(|p| {
                                ep.plane_stats(qpn, p)
                                    .map_or_else(Vec::new, |s| plane_values(&s))
                            })
                            .collect(),
                        evs: ep
                            .ev_infos(qpn)
                            .into_iter()
                            .map(|e| EvCounters {
                                ev: e.ev,
                                plane: e.plane,
                                state: e.state,
                                active: e.active,
                                values: ev_values(&e.stats),
                            })
                            .collect(),
                    })
                })
                .collect();
            (ep.ports_up(), qps)
        });
        let mut totals: Vec<Values> = Vec::with_capacity(planes);
        for p in 0..planes {
            let mut sum = plane_values(&mrc::PlaneStats::default());
            for q in &qps {
                for (slot, (_, v)) in sum.iter_mut().zip(q.planes.get(p).into_iter().flatten()) {
                    slot.1 += v;
                }
            }
            totals.push(sum);
        }
        Counters {
            time_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            ports_up: (0..planes).map(|p| ports & (1 << p) != 0).collect(),
            datapath,
            engine,
            planes: totals,
            qps,
        }
    }
}

impl<P: PlaneIo> Host<P> {
    /// Where the endpoint started with the host ([`HostConfig::metrics`](crate::HostConfig::metrics) or
    /// `MRC_METRICS`) listens, if one did.
    pub fn counters_endpoint(&self) -> Option<SocketAddr> {
        self.handle()
            .counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(CountersServer::local_addr)
    }

    /// Serves [`counters`](Self::counters) over HTTP on `addr` from a thread of its own: `GET /metrics` in the
    /// Prometheus text format, `GET /counters.json` as JSON. One client at a time; the thread ends when the
    /// returned server is dropped or the host is gone.
    pub fn serve_counters(&self, addr: SocketAddr) -> Result<CountersServer, HostError> {
        serve_on(addr, WeakHost(self.downgrade()))
    }

    /// [`serve_counters`](Self::serve_counters) on the first free port from `addr`'s (port 0: any).
    pub(crate) fn serve_counters_from(
        &self,
        addr: SocketAddr,
    ) -> Result<CountersServer, HostError> {
        serve_from(addr, WeakHost(self.downgrade()))
    }
}

/// The endpoint's view of the host: it must not keep the host alive.
struct WeakHost<P: PlaneIo>(Weak<Handle<P>>);

impl<P: PlaneIo> Clone for WeakHost<P> {
    fn clone(&self) -> Self {
        WeakHost(Weak::clone(&self.0))
    }
}

impl<P: PlaneIo> Source for WeakHost<P> {
    fn snapshot(&self) -> Option<Counters> {
        self.0.upgrade().map(|h| Host::from_handle(h).counters())
    }

    fn gone(&self) -> bool {
        self.0.strong_count() == 0
    }
}
