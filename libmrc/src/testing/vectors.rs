//! The golden wire vectors of `spec/vectors/` (format: `spec/vectors/README.md`), read for the tests that check
//! them: the engine's parser (`libmrc/tests/wire_vectors.rs`) and the Wireshark dissector
//! (`tools/tests/wireshark.rs`).

use std::path::{Path, PathBuf};

/// One `*.vec` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its `name` line.
    pub name: String,
    /// The hex is a whole IPv6 frame (else a UDP payload).
    pub frame: bool,
    /// The packet was trimmed by a switch.
    pub trimmed: bool,
    /// The key of the AUTH tag the packet carries (`auth_key`, spec WIRE-AUTH-1), if it has one.
    pub auth: Option<[u8; 16]>,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The `field` lines, in order: (name, value).
    pub fields: Vec<(String, String)>,
}

impl Vector {
    /// The value of field `name`, if listed.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn parse_bool(path: &Path, v: &str) -> bool {
    match v {
        "true" => true,
        "false" => false,
        _ => panic!("{}: not a boolean: {v:?}", path.display()),
    }
}

/// Reads one vector file; panics (naming the file and line) on anything malformed.
pub fn read_vector(path: &Path) -> Vector {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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
        let line = raw.split('#').next().unwrap_or("").trim();
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

/// Every `*.vec` file of `dir`, sorted by name.
pub fn read_dir(dir: &Path) -> Vec<Vector> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "vec"))
        .collect();
    paths.sort();
    paths.iter().map(|p| read_vector(p)).collect()
}
