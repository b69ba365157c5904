//! Every exported table, loaded from the built library as NCCL loads it: the name `NCCL_NET` selects, init
//! (per communicator from v11), devices and properties as each version lays them out, logging through the
//! logger NCCL passes, finalize, and error codes (never a crash) for bad arguments.

use std::ffi::c_int;

use mrc_nccl_harness::{Code, Plugin, Ptr, Version, locate, log};

fn load(v: Version) -> Plugin {
    let lib = locate::plugin_near(&std::env::current_exe().unwrap()).unwrap();
    Plugin::load(&lib, v).unwrap_or_else(|e| panic!("{e}"))
}

const INVALID_ARGUMENT: Code = Code(4);
const INVALID_USAGE: Code = Code(5);

#[test]
fn every_version_is_exported_under_one_name_with_its_properties() {
    for v in Version::ALL {
        let p = load(v);
        assert_eq!(p.name(), "MRC", "v{}", v.number());
        let ctx = p.init(0x1000 + u64::from(v.number())).unwrap();
        assert_eq!(
            ctx.0.is_null(),
            v < Version::V11,
            "v{}: a context exactly from v11",
            v.number()
        );
        assert_eq!(p.devices().unwrap(), 1);
        let props = p.properties(0).unwrap();
        assert_eq!(props.name, "mrc0");
        assert!(props.pci_path_null, "a virtual NIC has no PCI path");
        assert_eq!(props.ptr_support, 1, "NCCL_PTR_HOST only");
        assert_eq!(props.reg_is_global, 0);
        assert_eq!(props.max_recvs, 8);
        assert_eq!(props.max_comms, 65_536);
        assert_eq!(props.device_type, 0, "NCCL_NET_DEVICE_HOST");
        assert!(props.speed > 0);
        if v >= Version::V9 {
            assert_eq!(props.force_flush, Some(0));
            assert_eq!(props.vdevs, Some(vec![0]));
            assert_eq!(props.max_p2p_bytes, Some(1 << 30));
            assert_eq!(props.max_coll_bytes, Some(1 << 29));
        } else {
            assert_eq!(props.max_p2p_bytes, None);
        }
        assert_eq!(props.max_multi_request, (v >= Version::V11).then_some(1));
        assert_eq!(props.rail_plane, (v >= Version::V12).then_some((-1, -1)));
        p.finalize(ctx).unwrap();
    }
    let info = log::lines();
    assert!(
        info.iter()
            .any(|l| l.level == 3 && l.text.starts_with("NET/MRC : MRC plugin")),
        "init logs through NCCL's logger: {info:?}"
    );
}

#[test]
fn v11_contexts_are_per_communicator() {
    for v in [Version::V11, Version::V12] {
        let p = load(v);
        let a = p.init(1).unwrap();
        let b = p.init(2).unwrap();
        assert_ne!(a, b);
        p.finalize(b).unwrap();
        p.finalize(a).unwrap();
        assert_eq!(p.finalize(Ptr::NULL), Err(INVALID_ARGUMENT));
        // A context that is not one of the plugin's is refused, not dereferenced blindly.
        let mut junk = [0u64; 8];
        assert_eq!(
            p.finalize(Ptr(junk.as_mut_ptr().cast())),
            Err(INVALID_ARGUMENT)
        );
        let mut h = [0u8; 128];
        assert_eq!(
            p.listen(Ptr(junk.as_mut_ptr().cast()), 0, &mut h),
            Err(INVALID_ARGUMENT)
        );
    }
}

#[test]
fn bad_arguments_get_error_codes_and_a_warning() {
    for v in Version::ALL {
        let p = load(v);
        let ctx = p.init(7).unwrap();
        assert_eq!(p.properties(1), Err(INVALID_ARGUMENT), "no device 1");
        // A handle this plugin did not write.
        let mut h = [0x5Au8; 128];
        assert_eq!(p.connect(ctx, 0, &mut h), Err(INVALID_ARGUMENT));
        let mut h = [0u8; 128];
        assert_eq!(p.connect(ctx, 0, &mut h), Err(INVALID_ARGUMENT));
        // NULLs and pointers of the wrong kind, for every object NCCL hands back.
        let mut junk = [0u64; 16];
        let j = Ptr(junk.as_mut_ptr().cast());
        assert_eq!(p.accept(Ptr::NULL), Err(INVALID_ARGUMENT));
        assert_eq!(p.accept(j), Err(INVALID_ARGUMENT));
        let mut buf = [0u8; 64];
        assert_eq!(
            p.reg_mr(Ptr::NULL, buf.as_mut_ptr(), 64).err(),
            Some(INVALID_ARGUMENT)
        );
        assert_eq!(
            p.reg_mr(j, buf.as_mut_ptr(), 64).err(),
            Some(INVALID_ARGUMENT)
        );
        assert_eq!(
            p.reg_mr_dma_buf(j, buf.as_mut_ptr(), 64).err(),
            Some(INVALID_USAGE)
        );
        assert_eq!(p.dereg_mr(j, j), Err(INVALID_ARGUMENT));
        assert_eq!(
            p.isend(j, buf.as_mut_ptr(), 8, 0, j).err(),
            Some(INVALID_ARGUMENT)
        );
        assert_eq!(
            p.irecv(j, &[(buf.as_mut_ptr(), 8, 0, j)], false).err(),
            Some(INVALID_ARGUMENT)
        );
        assert_eq!(
            p.iflush(j, buf.as_mut_ptr(), 8, j).err(),
            Some(INVALID_ARGUMENT)
        );
        let mut sizes = [0 as c_int; 1];
        assert_eq!(p.test(Ptr::NULL, &mut sizes), Err(INVALID_ARGUMENT));
        assert_eq!(p.test(j, &mut sizes), Err(INVALID_ARGUMENT));
        assert_eq!(p.close_send(j), Err(INVALID_ARGUMENT));
        assert_eq!(p.close_recv(Ptr::NULL), Err(INVALID_ARGUMENT));
        assert_eq!(p.close_listen(j), Err(INVALID_ARGUMENT));
        p.finalize(ctx).unwrap();
    }
    let warns: Vec<_> = log::lines().into_iter().filter(|l| l.level == 2).collect();
    assert!(
        warns
            .iter()
            .any(|l| l.text.contains("getProperties: device 1 does not exist")),
        "each refusal is logged with the entry point's name: {warns:?}"
    );
    assert!(
        warns.iter().all(|l| l.flags == 16),
        "warnings go to NCCL_NET"
    );
}
