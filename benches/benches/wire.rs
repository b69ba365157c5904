//! Header parse and emit, and the ICRC, on the packets the data path handles most: a WRITE_MIDDLE with TSETH
//! and a 4 KiB payload, and a SACK.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mrc::wire::{
    self, Body, Bth, DEFAULT_PKEY, Data, Meth, Opcode, Packet, ParseOptions, Reth, Sack, SackMark,
};

const PAYLOAD: usize = 4096;

fn data_packet(payload: &[u8]) -> Packet<'_> {
    Packet {
        bth: Bth {
            opcode: Opcode::WriteMiddle,
            se: false,
            rtx: false,
            pkey: DEFAULT_PKEY,
            dest_qp: 0x10,
            ack_req: false,
            psn: 0x00AB_1234,
        },
        body: Body::Data(Data {
            meth: Meth {
                ev: 0x0000_1235,
                msn: 7,
                rqmsn: 0,
            },
            ts: Some(0x1234_5678),
            reth: Reth {
                va: 0x1000_0000 + 3 * PAYLOAD as u64,
                rkey: 0x100,
                dma_len: 1 << 20,
            },
            imm: None,
            payload,
        }),
    }
}

fn sack_packet() -> Packet<'static> {
    Packet {
        bth: Bth::new(Opcode::Sack, 0x10),
        body: Body::Sack(Sack {
            mark: SackMark::None,
            probe_reply: false,
            mpr: 8,
            ev: 0x0000_1235,
            cack_psn: 0x00AB_1230,
            sack_base: 0x00AB_1232,
            bitmap: 0b1011,
            ts_echo: Some(0x1234_5678),
            cwnd_pen: 0,
            ooo_count: 3,
        }),
    }
}

fn bench_wire(c: &mut Criterion) {
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 7) as u8).collect();
    let pkt = data_packet(&payload);
    let mut data = vec![0u8; pkt.buffer_len()];
    let n = pkt.emit(&mut data).expect("emit");
    assert_eq!(n, data.len());
    let sack = sack_packet();
    let mut sack_bytes = vec![0u8; sack.buffer_len()];
    sack.emit(&mut sack_bytes).expect("emit");
    let no_icrc = ParseOptions {
        verify_icrc: false,
        trimmed: false,
    };
    let with_icrc = ParseOptions {
        verify_icrc: true,
        trimmed: false,
    };
    assert_eq!(Packet::parse(&data, with_icrc), Ok(pkt));
    assert_eq!(Packet::parse(&sack_bytes, with_icrc), Ok(sack));

    let mut g = c.benchmark_group("wire");
    g.bench_function("parse_data_4k", |b| {
        b.iter(|| Packet::parse(black_box(&data), black_box(no_icrc)))
    });
    g.bench_function("parse_data_4k_verify_icrc", |b| {
        b.iter(|| Packet::parse(black_box(&data), black_box(with_icrc)))
    });
    let mut buf = vec![0u8; data.len()];
    g.bench_function("emit_header_data", |b| {
        b.iter(|| black_box(&pkt).emit_header(black_box(&mut buf)))
    });
    g.bench_function("parse_sack", |b| {
        b.iter(|| Packet::parse(black_box(&sack_bytes), black_box(no_icrc)))
    });
    g.bench_function("emit_header_sack", |b| {
        b.iter(|| black_box(&sack).emit_header(black_box(&mut buf)))
    });
    g.throughput(Throughput::BytesDecimal(PAYLOAD as u64));
    g.bench_function("icrc_4k", |b| b.iter(|| wire::icrc(black_box(&payload))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    targets = bench_wire
}
criterion_main!(benches);
