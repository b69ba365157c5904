//! Golden vectors: every file in `spec/vectors/` parses to the fields it lists and re-emits byte for byte.
//! Format: `spec/vectors/README.md`; the files come from `cargo run -p mrc --example gen_vectors`.

use std::path::{Path, PathBuf};

use mrc::wire::*;

const MIN_VECTORS: usize = 15;

struct Vector {
    path: PathBuf,
    name: String,
    frame: bool,
    trimmed: bool,
    /// The key of the AUTH tag the packet carries (`auth_key`), if it has one.
    auth: Option<[u8; 16]>,
    bytes: Vec<u8>,
    fields: Vec<(String, String)>,
}

fn parse_bool(path: &Path, v: &str) -> bool {
    match v {
        "true" => true,
        "false" => false,
        _ => panic!("{}: not a boolean: {v:?}", path.display()),
    }
}

fn read_vector(path: &Path) -> Vector {
    let text = std::fs::read_to_string(path).unwrap();
    let mut v = Vector {
        path: path.to_owned(),
        name: String::new(),
        frame: false,
        trimmed: false,
        auth: None,
        bytes: Vec::new(),
        fields: Vec::new(),
    };
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}:{}: no `=`", path.display(), n + 1));
        let (key, value) = (key.trim(), value.trim());
        match key {
            "name" => v.name = value.to_string(),
            "frame" => v.frame = parse_bool(path, value),
            "trimmed" => v.trimmed = parse_bool(path, value),
            "auth_key" => {
                let digits: String = value.split_whitespace().collect();
                let mut k = [0u8; 16];
                for (i, b) in k.iter_mut().enumerate() {
                    *b = digits
                        .get(2 * i..2 * i + 2)
                        .and_then(|d| u8::from_str_radix(d, 16).ok())
                        .unwrap_or_else(|| {
                            panic!("{}:{}: auth_key is 16 hex bytes", path.display(), n + 1)
                        });
                }
                v.auth = Some(k);
            }
            "hex" => {
                let digits: String = value.split_whitespace().collect();
                assert!(
                    digits.len().is_multiple_of(2),
                    "{}:{}: odd hex",
                    path.display(),
                    n + 1
                );
                for i in (0..digits.len()).step_by(2) {
                    v.bytes.push(
                        u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or_else(|_| {
                            panic!("{}:{}: bad hex {digits:?}", path.display(), n + 1)
                        }),
                    );
                }
            }
            _ => match key.strip_prefix("field ") {
                Some(field) => v.fields.push((field.trim().to_string(), value.to_string())),
                None => panic!("{}:{}: unknown key {key:?}", path.display(), n + 1),
            },
        }
    }
    v
}

fn vectors() -> Vec<Vector> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vec"))
        .collect();
    paths.sort();
    paths.iter().map(|p| read_vector(p)).collect()
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
