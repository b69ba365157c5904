//! The values a verbs front end accepts in an `ibv_qp_attr` for the attributes that say where a QP's traffic
//! goes: one port, one P_Key, one GID per device, peers named by GID, an `ibv_mtu`, a 24-bit QPN. The state
//! machine that rules on which attributes a step takes is `mrc_host::verbs::qp_state`; the values of the
//! attributes only one front end takes (the verbs timers in the shim, MRC's own in libmrc) stay with it.

use std::ffi::c_int;

use crate::boundary::Error;
use crate::verbs_abi::{
    IBV_MTU_256, IBV_MTU_4096, IBV_QP_AV, IBV_QP_DEST_QPN, IBV_QP_PATH_MTU, IBV_QP_PKEY_INDEX,
    IBV_QP_PORT, ibv_qp_attr,
};

/// Checks the port, P_Key index, address vector, path MTU and destination QPN of `attr`, each only where `mask`
/// sets it. `no_gid_hint` is added to the refusal of an address vector without a GID: how the front end's
/// programs give one.
pub fn check_addressing(attr: &ibv_qp_attr, mask: c_int, no_gid_hint: &str) -> Result<(), Error> {
    if mask & IBV_QP_PORT != 0 && attr.port_num != 1 {
        return Err(Error::inval(format!(
            "port_num {} is not 1 (the device has one port)",
            attr.port_num
        )));
    }
    if mask & IBV_QP_PKEY_INDEX != 0 && attr.pkey_index != 0 {
        return Err(Error::inval(format!(
            "pkey_index {} is not 0 (the port has one P_Key)",
            attr.pkey_index
        )));
    }
    if mask & IBV_QP_AV != 0 {
        let ah = &attr.ah_attr;
        if ah.is_global == 0 {
            return Err(Error::inval(format!(
                "ah_attr.is_global is 0: MRC peers are found by GID (grh.dgid = the peer's GID 0; dlid \
                 optional){no_gid_hint}"
            )));
        }
        if ah.grh.sgid_index != 0 {
            return Err(Error::inval(format!(
                "ah_attr.grh.sgid_index {} is not 0 (the device has one GID)",
                ah.grh.sgid_index
            )));
        }
        if ah.port_num > 1 {
            return Err(Error::inval(format!(
                "ah_attr.port_num {} is not 1",
                ah.port_num
            )));
        }
    }
    if mask & IBV_QP_PATH_MTU != 0 && !(IBV_MTU_256..=IBV_MTU_4096).contains(&attr.path_mtu) {
        return Err(Error::inval(format!(
            "path_mtu {} is not an ibv_mtu (IBV_MTU_256 ..= IBV_MTU_4096)",
            attr.path_mtu
        )));
    }
    if mask & IBV_QP_DEST_QPN != 0 && attr.dest_qp_num > 0xff_ffff {
        return Err(Error::inval(format!(
            "dest_qp_num {:#x} is above 0xffffff (QPNs have 24 bits)",
            attr.dest_qp_num
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtr() -> ibv_qp_attr {
        let mut a = ibv_qp_attr {
            port_num: 1,
            path_mtu: IBV_MTU_4096,
            dest_qp_num: 0xff_ffff,
            ..Default::default()
        };
        a.ah_attr.is_global = 1;
        a
    }

    /// Makes one field wrong.
    type Spoil = fn(&mut ibv_qp_attr);

    const ALL: c_int =
        IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN;

    #[test]
    fn each_wrong_value_is_named_and_only_masked_fields_are_read() {
        assert!(check_addressing(&rtr(), ALL, "").is_ok());
        let cases: [(Spoil, &str); 7] = [
            (|a| a.port_num = 2, "port_num 2 is not 1"),
            (|a| a.pkey_index = 1, "pkey_index 1 is not 0"),
            (|a| a.ah_attr.is_global = 0, "is_global is 0"),
            (|a| a.ah_attr.grh.sgid_index = 3, "sgid_index 3 is not 0"),
            (|a| a.ah_attr.port_num = 2, "ah_attr.port_num 2"),
            (|a| a.path_mtu = 6, "path_mtu 6 is not an ibv_mtu"),
            (|a| a.dest_qp_num = 1 << 24, "dest_qp_num 0x1000000"),
        ];
        for (spoil, why) in cases {
            let mut a = rtr();
            spoil(&mut a);
            let e = check_addressing(&a, ALL, " (pass -g 0)").unwrap_err();
            assert_eq!(e.errno, libc::EINVAL);
            assert!(e.why().contains(why), "{why:?} not in {:?}", e.why());
            assert!(
                check_addressing(&a, 0, "").is_ok(),
                "{why}: read without its bit"
            );
        }
        let mut a = rtr();
        a.ah_attr.is_global = 0;
        let e = check_addressing(&a, IBV_QP_AV, " (pass -g 0)").unwrap_err();
        assert!(e.why().ends_with("optional) (pass -g 0)"), "{}", e.why());
    }
}
