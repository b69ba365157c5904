//! Golden vectors: every file in `spec/vectors/` parses to the fields it lists and re-emits byte for byte.
//! Format: `spec/vectors/README.md`; the files come from `cargo run -p mrc --example gen_vectors`.

use std::path::Path;
use std::process::Command;

use mrc::testing::vectors::{Vector, read_dir};
use mrc::wire::*;

const MIN_VECTORS: usize = 15;

fn vectors() -> Vec<Vector> {
    read_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors"))
}

fn owned(fields: Vec<(&'static str, String)>) -> Vec<(String, String)> {
    fields
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn check(v: &Vector) {
    let what = v.path.display();
    assert_eq!(
        v.path.file_stem().unwrap().to_str().unwrap(),
        v.name,
        "{what}: name"
    );
    assert!(!v.bytes.is_empty(), "{what}: no hex");
    assert!(!v.fields.is_empty(), "{what}: no fields");
    let opts = ParseOptions {
        verify_icrc: !v.trimmed,
        trimmed: v.trimmed,
    };
    if v.frame {
        let f = Frame::parse(&v.bytes, opts).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(owned(f.describe()), v.fields, "{what}: fields");
        let mut out = vec![0u8; f.buffer_len()];
        f.emit(&mut out).unwrap();
        assert_eq!(out, v.bytes, "{what}: re-emitted frame differs");
        return;
    }
    let (p, tag) = Packet::parse_auth(&v.bytes, opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(owned(p.describe()), v.fields, "{what}: fields");
    assert_eq!(tag.is_some(), v.auth.is_some(), "{what}: AUTH tag (BTH.AT)");
    if let (Some(t), Some(k)) = (tag, v.auth) {
        // spec: WIRE-AUTH-1 (the tag of the headers under the key), re-emitted byte for byte.
        let key = AuthKey::new(k);
        assert!(
            t.proves(&key, &v.bytes),
            "{what}: the tag does not prove auth_key"
        );
        let mut out = vec![0u8; p.buffer_len() + AUTH_LEN];
        let h = p.emit_header(&mut out).unwrap();
        let h = key.seal_headers(&mut out, h).unwrap();
        out[h..h + p.payload().len()].copy_from_slice(p.payload());
        let n = seal(&mut out, h + p.payload().len()).unwrap();
        assert_eq!(out[..n], v.bytes, "{what}: re-emitted packet differs");
        return;
    }
    if v.trimmed {
        // Only the headers survived trimming; they re-emit byte for byte.
        let mut out = vec![0u8; p.header_len()];
        assert_eq!(p.emit_header(&mut out), Ok(out.len()));
        assert_eq!(
            out,
            v.bytes[..out.len()],
            "{what}: re-emitted headers differ"
        );
    } else {
        let mut out = vec![0u8; p.buffer_len()];
        p.emit(&mut out).unwrap();
        assert_eq!(out, v.bytes, "{what}: re-emitted packet differs");
    }
}

#[test]
fn golden_vectors_parse_and_reemit() {
    let all = vectors();
    assert!(
        all.len() >= MIN_VECTORS,
        "only {} vectors in spec/vectors, want at least {MIN_VECTORS}",
        all.len()
    );
    for v in &all {
        check(v);
    }
}

#[test]
fn vectors_cover_every_opcode_family_frames_and_trimming() {
    let all = vectors();
    let opcode_of = |v: &Vector| {
        v.fields
            .iter()
            .find(|(k, _)| k == "opcode")
            .map(|(_, val)| Opcode::from_name(val).unwrap())
            .unwrap()
    };
    let ops: Vec<Opcode> = all.iter().map(opcode_of).collect();
    for want in [
        Opcode::WriteFirst,
        Opcode::WriteMiddle,
        Opcode::WriteLast,
        Opcode::WriteLastImm,
        Opcode::WriteOnly,
        Opcode::WriteOnlyImm,
        Opcode::SendOnly,
        Opcode::SendLastImm,
        Opcode::ReadRequest,
        Opcode::ReadResponseOnly,
        Opcode::Sack,
        Opcode::Nack,
        Opcode::Probe,
        Opcode::Ack,
        Opcode::EpRequest,
        Opcode::EpResponse,
    ] {
        assert!(ops.contains(&want), "no vector for {want}");
    }
    assert!(all.iter().any(|v| v.frame), "no whole-frame vector");
    assert!(all.iter().any(|v| v.trimmed), "no trimmed vector");
}

/// An independent encoder, `spec/vectors/encode.py` (Python, written from `spec/wire.md`: it reads the opcode
/// table, the header list of each opcode and the NACK reasons, SACK marks and endpoint ops from the spec, and
/// shares no code with `libmrc`), builds every vector from its `field` lines and must produce the vector's
/// bytes. The golden test above only proves that the code reads back what it wrote; this one checks the
/// vectors against the spec.
#[test]
fn an_independent_encoder_from_the_spec_builds_every_vector() {
    let test = "an_independent_encoder_from_the_spec_builds_every_vector";
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec");
    let o = match Command::new("python3")
        .arg(spec.join("vectors/encode.py"))
        .arg(&spec)
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            mrc::testing::skip(test, "needs python3 (apt-get install python3)");
            return;
        }
        Err(e) => panic!("python3: {e}"),
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "encode.py disagrees:\n{out}\n{err}");
    let all = vectors();
    assert!(
        out.lines().last() == Some(&format!("ok {}", all.len())),
        "encode.py did not check all {} vectors:\n{out}",
        all.len()
    );
    // The data, acknowledgement and NACK families at least.
    for op in [
        "WRITE_FIRST",
        "WRITE_ONLY_IMM",
        "SEND_ONLY",
        "SACK",
        "ACK",
        "NACK",
    ] {
        assert!(
            out.lines().any(|l| l.contains(&format!(": {op} "))),
            "no {op} vector encoded:\n{out}"
        );
    }
}
