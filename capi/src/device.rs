//! The MRC devices of the process: one per verbs device that an MRC context was opened on, shared by
//! every context on it, holding what a real NIC keeps device-wide: the controller's profiles and port states,
//! and the QP numbers.
//!
//! Profiles are per device *in this process*: a controller and applications in one process share them. A
//! node-wide registry (controller in another process) needs the host layer's daemon and is not done yet.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abi::*;
use crate::ctl::State;
use mrc_verbs_shim::api::DeviceInfo;

/// What libmrc grants, whatever the application asks (the software transport's limits).
pub(crate) mod limits {
    /// Largest `max_wimm` / `max_wimm_dest`.
    pub(crate) const MAX_WIMM: u16 = 4096;
    /// Largest MPR, in units of 128 PSNs (8192 packets in flight, the engine's largest window).
    pub(crate) const MAX_MPR: u8 = 64;
    /// QP hints per context.
    pub(crate) const MAX_QP_HINT: u32 = 1024;
    /// CQ entries.
    pub(crate) const MAX_CQE: u32 = 4 * 1024 * 1024;
    /// Work requests per queue.
    pub(crate) const MAX_QP_WR: u32 = 16 * 1024;
    /// Scatter/gather entries per work request.
    pub(crate) const MAX_SGE: u32 = 16;
    /// Inline data per work request.
    pub(crate) const MAX_INLINE: u32 = 256;
    /// EV format profiles configured at once.
    pub(crate) const EV_MAX_FMT_PROFILES: u32 = 16;
    /// EV profiles configured at once.
    pub(crate) const EV_MAX_PROFILES: u32 = 64;
    /// EVs over all profiles.
    pub(crate) const EV_MAX_COUNT: u32 = 64 * 1024;
    /// EVs in one profile.
    pub(crate) const EV_MAX_COUNT_PROFILE: u32 = 4096;
    /// Fields in an EV format profile or an EV profile.
    pub(crate) const EV_MAX_FIELDS: usize = 16;
    /// CC profiles configured at once.
    pub(crate) const CC_MAX_PROFILES: u32 = 64;
    /// Largest ACK timeout exponent (1.024 µs × 2^24 ≈ 17 s).
    pub(crate) const MAX_TIMEOUT: u8 = 24;
    /// Linear retries.
    pub(crate) const MAX_LINEAR_RETRY: u8 = 7;
    /// Exponential retries (25: without end).
    pub(crate) const MAX_EXP_RETRY: u8 = 25;
}

/// One MRC device of the process.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) info: DeviceInfo,
    ctl: Mutex<State>,
    /// The host's count of EV events it dropped, as last seen by an event thread (`events.rs`): what it adds
    /// is lost to every EV-event CQ of the device.
    pub(crate) host_ev_drops: std::sync::atomic::AtomicU64,
}

impl Device {
    /// The controller state (profiles, ports).
    pub(crate) fn ctl(&self) -> MutexGuard<'_, State> {
        // Every update validates before it writes, so a panic cannot leave a half-applied change.
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// EV format modes the device carries.
    pub(crate) fn fmt_modes(&self) -> u32 {
        fmt_of(self.info.usid).0
    }

    /// Significant bits of an EV value.
    pub(crate) fn ev_max_width(&self) -> u32 {
        fmt_of(self.info.usid).1
    }

    /// Controller ports are the MRC planes, numbered from 1.
    pub(crate) fn port_mask(&self) -> u32 {
        let planes = self.info.planes.min(31);
        ((1u32 << planes) - 1) << 1
    }

    /// Whether `port` (1-based) is one of the device's planes.
    pub(crate) fn has_port(&self, port: u32) -> bool {
        port >= 1 && port <= self.info.planes.min(31)
    }

    /// `struct mrc_device_attr`.
    pub(crate) fn attr(&self) -> mrc_device_attr {
        mrc_device_attr {
            mrc_protocol_version: MRC_PROTOCOL_VERSION_1,
            wimm_attr: mrc_device_attr_wimm_attr {
                max_wimm: limits::MAX_WIMM,
                max_wimm_dest: limits::MAX_WIMM,
            },
            mpr_attr: mrc_device_attr_mpr_attr {
                max_mpr: limits::MAX_MPR,
                mpr_resolution: 1,
            },
            qp_attr: mrc_device_attr_qp_attr {
                max_qp_hint: limits::MAX_QP_HINT,
            },
            cap: MRC_DEVICE_CAP_TRIM_NACK,
        }
    }
}

/// The EV format modes and width of a device: SRv6 uSIDs (destination and SRH segment, 256 bits) on a uSID
/// fabric, the 16-bit UDP source port otherwise.
fn fmt_of(usid: bool) -> (u32, u32) {
    if usid {
        (MRC_CTL_EV_FMT_MODE_SRV6, 256)
    } else {
        (MRC_CTL_EV_FMT_MODE_UDP, 16)
    }
}

static DEVICES: Mutex<BTreeMap<u32, Arc<Device>>> = Mutex::new(BTreeMap::new());

/// The process's device `index`, if an MRC context was opened on it.
pub(crate) fn find(index: u32) -> Option<Arc<Device>> {
    DEVICES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&index)
        .cloned()
}

/// The process's device for a verbs device, created at first use.
pub(crate) fn get(info: DeviceInfo) -> Arc<Device> {
    let mut d = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    d.entry(info.device_index)
        .or_insert_with(|| {
            let (modes, width) = fmt_of(info.usid);
            Arc::new(Device {
                info,
                ctl: Mutex::new(State::new(info.planes, modes, width)),
                host_ev_drops: std::sync::atomic::AtomicU64::new(0),
            })
        })
        .clone()
}
