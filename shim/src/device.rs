//! The virtual devices: one per configured MRC node, each with one RoCE-like port.
//!
//! The port is ACTIVE with an Ethernet link layer, so perftest and `ibv_rc_pingpong -g 0` address the peer by
//! GID and pass that GID back at RTR; GID 0 is the node's address (its plane-0 address). The vendor IDs are
//! ones perftest does not know, which makes it use the classic `ibv_post_send` path (no `ibv_wr_*`, no mlx5dv).

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

use crate::abi::*;
use crate::config::{self, DeviceConfig};
use crate::ffi::{self, Error, FFI};
use crate::log::log;

/// `vendor_id`: "MRC" in 24 bits, an OUI no provider uses.
pub(crate) const VENDOR_ID: u32 = 0x4d_5243;
/// `vendor_part_id`: not a ConnectX, BlueField, EFA, Chelsio or Intel part.
pub(crate) const VENDOR_PART_ID: u32 = 1;

/// What the shim accepts per object (checked at creation, as a provider does).
pub(crate) mod limits {
    /// Queue pairs per device.
    pub(crate) const MAX_QP: u32 = 16 * 1024;
    /// Work requests per send or receive queue.
    pub(crate) const MAX_QP_WR: u32 = 16 * 1024;
    /// Scatter/gather elements per work request.
    pub(crate) const MAX_SGE: u32 = 16;
    /// Entries per completion queue.
    pub(crate) const MAX_CQE: u32 = 4 * 1024 * 1024;
    /// Bytes of inline data per send work request.
    pub(crate) const MAX_INLINE: u32 = 256;
    /// Outstanding RDMA READs per QP (perftest copies this into `max_rd_atomic`; 0 would stop READs).
    pub(crate) const MAX_RD_ATOM: u8 = 16;
    /// Protection domains, memory regions and CQs per device.
    pub(crate) const MAX_OBJECTS: u32 = 1 << 20;
    /// Largest message (`ibv_port_attr.max_msg_sz`).
    pub(crate) const MAX_MSG: u32 = 1 << 30;
}

/// A device as the C side sees it, at a fixed address for the life of the process.
struct RawDevice(Box<UnsafeCell<ibv_device>>);

// SAFETY: the `ibv_device` is written once, before the list is published through the `OnceLock`, and only read
// afterwards (C callers get a `*mut` because the ABI says so, but libibverbs clients only read it).
unsafe impl Sync for RawDevice {}
// SAFETY: as above; the box is never moved out or freed.
unsafe impl Send for RawDevice {}

/// One virtual device.
pub(crate) struct Device {
    raw: RawDevice,
    pub(crate) index: usize,
    pub(crate) cfg: DeviceConfig,
    /// Node GUID in host order (`ibv_get_device_guid` returns it big-endian).
    pub(crate) guid: u64,
}

static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();

fn copy_str(dst: &mut [c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
}

/// FNV-1a over the device's identity: stable across runs, distinct per node.
fn guid_of(cfg: &DeviceConfig) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cfg
        .address()
        .octets()
        .iter()
        .chain(&cfg.port().to_be_bytes())
        .chain(cfg.name.as_bytes())
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // A locally administered EUI-64.
    (h & !(0xff << 56)) | (0x02 << 56)
}

impl Device {
    fn new(index: usize, cfg: DeviceConfig) -> Self {
        // SAFETY: `ibv_device` is plain data (pointers, integers, char arrays); all-zero is a valid value.
        let mut raw: ibv_device = unsafe { std::mem::zeroed() };
        raw.node_type = IBV_NODE_CA;
        raw.transport_type = IBV_TRANSPORT_IB;
        copy_str(&mut raw.name, &cfg.name);
        copy_str(&mut raw.dev_name, &format!("uverbs-{}", cfg.name));
        // No sysfs behind these: `ibv_read_sysfs_file` on them fails cleanly (ibv_devinfo's board_id).
        copy_str(
            &mut raw.dev_path,
            &format!("/nonexistent/mrc-verbs-shim/{}", cfg.name),
        );
        copy_str(
            &mut raw.ibdev_path,
            &format!("/nonexistent/mrc-verbs-shim/{}", cfg.name),
        );
        Self {
            raw: RawDevice(Box::new(UnsafeCell::new(raw))),
            index,
            guid: guid_of(&cfg),
            cfg,
        }
    }

    /// The C view.
    pub(crate) fn raw(&self) -> *mut ibv_device {
        self.raw.0.get()
    }

    /// `ibv_query_device`.
    pub(crate) fn attr(&self) -> ibv_device_attr {
        use limits::*;
        // SAFETY: plain data; all-zero is valid.
        let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
        copy_str(
            &mut a.fw_ver,
            concat!("mrc-verbs-shim ", env!("CARGO_PKG_VERSION")),
        );
        a.node_guid = self.guid.to_be();
        a.sys_image_guid = self.guid.to_be();
        a.max_mr_size = u64::MAX;
        a.page_size_cap = !0xfff;
        a.vendor_id = VENDOR_ID;
        a.vendor_part_id = VENDOR_PART_ID;
        a.max_qp = MAX_QP as c_int;
        a.max_qp_wr = MAX_QP_WR as c_int;
        // IBV_DEVICE_RC_RNR_NAK_GEN: early SENDs are NACKed and retried, not dropped.
        a.device_cap_flags = 1 << 12;
        a.max_sge = MAX_SGE as c_int;
        a.max_sge_rd = MAX_SGE as c_int;
        a.max_cq = MAX_OBJECTS as c_int;
        a.max_cqe = MAX_CQE as c_int;
        a.max_mr = MAX_OBJECTS as c_int;
        a.max_pd = MAX_OBJECTS as c_int;
        a.max_qp_rd_atom = c_int::from(MAX_RD_ATOM);
        a.max_res_rd_atom = (MAX_QP * u32::from(MAX_RD_ATOM)) as c_int;
        a.max_qp_init_rd_atom = c_int::from(MAX_RD_ATOM);
        a.atomic_cap = IBV_ATOMIC_NONE;
        a.max_pkeys = 1;
        a.local_ca_ack_delay = 16;
        a.phys_port_cnt = 1;
        a
    }

    /// `ibv_query_port` for port 1; `lid` is plane 0's UDP port (see `shim/README.md`, "Addressing").
    pub(crate) fn port_attr(&self, lid: u16) -> ibv_port_attr {
        ibv_port_attr {
            state: IBV_PORT_ACTIVE,
            max_mtu: IBV_MTU_4096,
            active_mtu: IBV_MTU_4096,
            gid_tbl_len: 1,
            port_cap_flags: IBV_PORT_IP_BASED_GIDS,
            max_msg_sz: limits::MAX_MSG,
            pkey_tbl_len: 1,
            lid,
            max_vl_num: 1,
            // 4X EDR: 100 Gbit/s, what ibv_devinfo and perftest print; the real rate is the planes'.
            active_width: 2,
            active_speed: 32,
            phys_state: IBV_PORT_PHYS_STATE_LINK_UP,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            ..ibv_port_attr::default()
        }
    }
}

/// The devices, read from the environment on first use.
pub(crate) fn devices() -> &'static [Device] {
    DEVICES.get_or_init(|| match config::from_env() {
        Ok(cfgs) => {
            for c in &cfgs {
                log!(Info, "device {}: {}", c.name, c.source);
            }
            cfgs.into_iter()
                .enumerate()
                .map(|(i, c)| Device::new(i, c))
                .collect()
        }
        Err(e) => {
            log!(Error, "{e}; no device is presented");
            Vec::new()
        }
    })
}

/// The device behind a `struct ibv_device *` this library handed out.
pub(crate) fn find(p: *mut ibv_device) -> Result<&'static Device, Error> {
    let p = ffi::non_null(p, "device")?;
    devices()
        .iter()
        .find(|d| d.raw() == p)
        .ok_or_else(|| Error::new(libc::ENODEV, "not a device of mrc-verbs-shim"))
}

/// Port numbers are 1-based and there is one port.
pub(crate) fn check_port(port: u32) -> Result<(), Error> {
    if port == 1 {
        Ok(())
    } else {
        Err(Error::inval(format!(
            "port {port} does not exist (the device has port 1)"
        )))
    }
}

// ---------------------------------------------------------------------------------------------------------
// Exported entry points
// ---------------------------------------------------------------------------------------------------------

/// Returns a NULL-terminated array of the devices; `num` (may be NULL) gets the count.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    FFI.ptr("ibv_get_device_list", || {
        let devs = devices();
        // calloc'd so `ibv_free_device_list` needs no length.
        // SAFETY: calloc with a non-zero count; the result is checked for NULL.
        let list = unsafe { libc::calloc(devs.len() + 1, size_of::<*mut ibv_device>()) }
            .cast::<*mut ibv_device>();
        if list.is_null() {
            return Err(Error::new(libc::ENOMEM, "out of memory"));
        }
        for (i, d) in devs.iter().enumerate() {
            // SAFETY: `list` has `devs.len() + 1` slots.
            unsafe { *list.add(i) = d.raw() };
        }
        if !num.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num = devs.len() as c_int };
        }
        Ok(list)
    })
}

/// Frees a list from [`ibv_get_device_list`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    FFI.void("ibv_free_device_list", || {
        // SAFETY: `list` came from `ibv_get_device_list` (calloc) or is NULL; free(NULL) is a no-op.
        unsafe { libc::free(list.cast()) };
        Ok(())
    })
}

/// The device's name (`mrc0`, …).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    FFI.ptr("ibv_get_device_name", || {
        let d = find(dev)?;
        // SAFETY: the device lives for the whole process; its name is NUL-terminated.
        Ok(unsafe { (*d.raw()).name.as_mut_ptr() })
    })
}

/// The node GUID, big-endian.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    FFI.value("ibv_get_device_guid", 0, || Ok(find(dev)?.guid.to_be()))
}

/// The device's index in the list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    FFI.count("ibv_get_device_index", || Ok(find(dev)?.index as c_int))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tuning;

    fn dev() -> Device {
        Device::new(
            0,
            DeviceConfig {
                name: "mrc0".into(),
                source: "test".into(),
                node: mrc_host::NodeConfig::loopback(2),
                tuning: Tuning::default(),
            },
        )
    }

    #[test]
    fn port_is_an_active_ethernet_port() {
        let d = dev();
        let p = d.port_attr(4791);
        assert_eq!(p.state, IBV_PORT_ACTIVE);
        assert_eq!(p.link_layer, IBV_LINK_LAYER_ETHERNET);
        assert_eq!(p.lid, 4791);
        let a = d.attr();
        assert_eq!(a.phys_port_cnt, 1);
        assert!(a.max_qp_rd_atom > 0, "perftest needs outstanding READs");
        // SAFETY: the name was written NUL-terminated by `copy_str`.
        let name = unsafe { std::ffi::CStr::from_ptr((*d.raw()).name.as_ptr()) };
        assert_eq!(name.to_str().unwrap(), "mrc0");
    }

    #[test]
    fn guids_differ_per_node_and_are_locally_administered() {
        let a = dev();
        let mut cfg = a.cfg.clone();
        cfg.name = "mrc1".into();
        let b = Device::new(1, cfg);
        assert_ne!(a.guid, b.guid);
        assert_eq!(a.guid >> 56, 0x02);
    }
}
