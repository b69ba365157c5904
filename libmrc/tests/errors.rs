//! Every error a call returns carries the `errno` a C API built on the engine returns for it.

use mrc::error::errno;
use mrc::*;

#[test]
fn refusals_carry_the_errno_a_c_api_returns() {
    let mut ep = Endpoint::new(EndpointConfig::default()).unwrap();
    let pd = ep.alloc_pd();
    let cq = ep.create_cq(8);
    let now = Instant::ZERO;

    // Memory: a bad key, a foreign domain, a range that overflows, a missing right.
    assert_eq!(ep.dereg_mr(0xDEAD_BEEF).unwrap_err().errno(), errno::EINVAL);
    assert_eq!(
        ep.reg_mr(pd, u64::MAX - 1, 16, Access::LOCAL_WRITE)
            .unwrap_err()
            .errno(),
        errno::EFAULT
    );
    let keys = ep.reg_mr(pd, 0x1000, 64, Access::NONE).unwrap();

    // Handles that name nothing.
    let gone = ep.create_cq(1);
    ep.destroy_cq(gone).unwrap();
    assert_eq!(ep.destroy_cq(gone).unwrap_err().errno(), errno::EINVAL);

    // QP configuration and transitions.
    let mut init = QpInit::new(pd, cq);
    init.max_send_wr = 1;
    init.max_sge = 1;
    let mut bad = init.clone();
    bad.config.mtu = 1;
    assert_eq!(ep.create_qp(bad).unwrap_err().errno(), errno::EINVAL);
    let qpn = ep.create_qp(init).unwrap();
    let rts = Transition::Rts { sq_psn: 0 };
    assert_eq!(
        ep.modify_qp(qpn, rts.clone(), now).unwrap_err().errno(),
        errno::EINVAL
    );
    assert_eq!(
        ep.modify_qp(0xDEAD, rts, now).unwrap_err().errno(),
        errno::EINVAL
    );

    // Posting: bad state, too many elements, a missing local right, a full queue.
    let sge = Sge {
        addr: 0x1000,
        len: 8,
        lkey: keys.lkey,
    };
    let (one, two) = ([sge], [sge, sge]);
    assert_eq!(
        ep.post_send(qpn, &wr(&one), now).unwrap_err().errno(),
        errno::EINVAL
    );
    ep.modify_qp(
        qpn,
        Transition::Init {
            access: Access::NONE,
        },
        now,
    )
    .unwrap();
    let info = ep.conn_info(qpn, 0).unwrap();
    ep.connect_qp(qpn, PeerId(1), &info, 0, now).unwrap();
    assert_eq!(
        ep.post_send(qpn, &wr(&two), now).unwrap_err().errno(),
        errno::E2BIG
    );
    let read = SendWr {
        op: SendOp::Read {
            remote_addr: 0,
            rkey: 1,
        },
        ..wr(&one)
    };
    // READ needs LOCAL_WRITE on the destination buffer.
    assert_eq!(
        ep.post_send(qpn, &read, now).unwrap_err().errno(),
        errno::EACCES
    );
    ep.post_send(qpn, &wr(&one), now).unwrap();
    assert_eq!(
        ep.post_send(qpn, &wr(&one), now).unwrap_err().errno(),
        errno::ENOMEM
    );

    assert_eq!(NoSuchObject.errno(), errno::EINVAL);
    assert_eq!(ConfigError::new("f", "p").errno(), errno::EINVAL);
    assert_eq!(ConfigError::exhausted("f", "p").errno(), errno::ENOMEM);
    assert_eq!(
        ModifyError::Config(ConfigError::exhausted("f", "p")).errno(),
        errno::ENOMEM
    );
}

fn wr(sges: &[Sge]) -> SendWr<'_> {
    SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_addr: 0,
            rkey: 1,
        },
        sges,
        signaled: true,
        solicited: false,
    }
}
