use mrc::testing::{Net, NetConfig, PlaneConfig};
use mrc::*;

#[test]
fn one_write() {
    let mut net = Net::new(NetConfig::uniform(8, PlaneConfig::default(), 1));
    let a = net.add_node(Caps::ALL);
    let b = net.add_node(Caps::ALL);
    let (qa, _qb) = net.connect(a, b, &QpConfig::default());
    let len = 1 << 20;
    let (src, ks) = net.alloc_mr(a, len, Access::NONE);
    let (dst, kd) = net.alloc_mr(b, len, Access::REMOTE_WRITE);
    net.nodes[a].mem.fill_pattern(src, len as usize, 7);
    let sge = [Sge {
        addr: src,
        len: len as u32,
        lkey: ks.lkey,
    }];
    let now = net.now();
    net.nodes[a]
        .ep
        .post_send(
            qa,
            &SendWr {
                wr_id: 1,
                op: SendOp::Write {
                    remote_addr: dst,
                    rkey: kd.rkey,
                },
                sges: &sge,
                signaled: true,
                solicited: false,
            },
            now,
        )
        .unwrap();
    let cq = net.nodes[a].cq;
    let mut wc = [Completion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
        qpn: 0,
    }; 4];
    let mut got = 0;
    let ok = net.run_until(Instant::from_nanos(50_000_000), |n| {
        got += n.nodes[a].ep.poll_cq(cq, &mut wc);
        got > 0
    });
    println!("t={:?} stats={:?}", net.now(), net.nodes[a].ep.qp_stats(qa));
    println!("counters={:?}", net.counters[0]);
    assert!(ok);
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!(
        net.nodes[a].mem.slice(src, len as usize),
        net.nodes[b].mem.slice(dst, len as usize)
    );
}
