//! Every MRC header parser on arbitrary bytes, and the whole-packet parser under every option: nothing panics,
//! and whatever parses re-emits to bytes that parse to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc::wire::{
    Ack, Bth, Meth, Nack, Opcode, Packet, ParseOptions, Probe, Reth, Sack, icrc, peek_dest_qp, seal,
};

/// `parse(emit(x)) == x` for a header that parsed from `data`.
macro_rules! round_trip {
    ($ty:ty, $data:expr) => {
        if let Ok(h) = <$ty>::parse($data) {
            let mut buf = [0u8; 64];
            h.emit(&mut buf).expect("a parsed header fits 64 bytes");
            assert_eq!(
                <$ty>::parse(&buf).ok(),
                Some(h),
                "{} does not round-trip",
                stringify!($ty)
            );
        }
    };
}

fuzz_target!(|data: &[u8]| {
    let _ = peek_dest_qp(data);
    if let Ok((bth, ts)) = Bth::parse(data) {
        let mut buf = [0u8; 12];
        bth.emit(ts, &mut buf).expect("a BTH fits 12 bytes");
        assert_eq!(
            Bth::parse(&buf).ok(),
            Some((bth, ts)),
            "BTH does not round-trip"
        );
    }
    round_trip!(Meth, data);
    round_trip!(Reth, data);
    round_trip!(Sack, data);
    round_trip!(Nack, data);
    round_trip!(Probe, data);
    round_trip!(Ack, data);
    let _ = icrc(data);
    // Opcode names (the vectors' text form) and opcode bytes agree.
    if let Some(op) = std::str::from_utf8(data).ok().and_then(Opcode::from_name) {
        assert_eq!(Opcode::from_name(op.name()), Some(op));
    }
    if let Some(op) = data.first().and_then(|&b| Opcode::from_u8(b)) {
        assert_eq!(op.to_u8(), data[0]);
    }
    // A bounced datagram's quote: whatever parses is exactly its headers.
    if let Ok(p) = Packet::parse_prefix(data) {
        assert!(p.payload().is_empty());
        assert!(p.header_len() <= data.len());
    }
    for (verify_icrc, trimmed) in [(false, false), (true, false), (false, true), (true, true)] {
        let opts = ParseOptions {
            verify_icrc,
            trimmed,
        };
        let Ok(p) = Packet::parse(data, opts) else {
            continue;
        };
        let _ = p.describe();
        let _ = (p.payload(), p.ts_flag(), p.header_len());
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf).expect("buffer_len bytes hold the packet");
        assert_eq!(n, buf.len());
        let again = Packet::parse(
            &buf,
            ParseOptions {
                verify_icrc: true,
                trimmed: false,
            },
        )
        .expect("an emitted packet parses with its ICRC checked");
        assert_eq!(again, p, "packet does not round-trip");
        // Sealing twice gives the same trailer.
        let mut resealed = buf.clone();
        seal(&mut resealed, n - 4).expect("room for the ICRC");
        assert_eq!(resealed, buf);
    }
});
