//! The 128-byte handle `listen` writes and `connect` reads (spec: NCCL-CONN-2). NCCL calls `connect` again
//! and again with the same handle until it returns a comm, so the connecting state lives in the handle too:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `MRCN` |
//! | 4 | handle version (1) |
//! | 5 | state: 0 as `listen` wrote it, 1 while `connect` is in progress |
//! | 6..8 | length of the host's bootstrap blob (little-endian) |
//! | 8..16 | key of the pending connection (state 1) |
//! | 16..24 | reserved, zero |
//! | 24..128 | the host's bootstrap blob (how to reach the listener) |

use crate::abi::NET_HANDLE_MAXSIZE;
use crate::ffi::Error;

const MAGIC: [u8; 4] = *b"MRCN";
const VERSION: u8 = 1;
const BLOB_AT: usize = 24;
/// Room for the host's bootstrap blob.
pub(crate) const BLOB_MAX: usize = NET_HANDLE_MAXSIZE - BLOB_AT;

/// Where a handle's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// As `listen` wrote it: `connect` has not started.
    Fresh,
    /// `connect` started the connection filed under this key.
    Connecting(u64),
}

/// Writes a fresh handle carrying `blob`.
pub(crate) fn write_listen(h: &mut [u8; NET_HANDLE_MAXSIZE], blob: &[u8]) -> Result<(), Error> {
    if blob.len() > BLOB_MAX {
        return Err(Error::internal(format!(
            "the host's bootstrap blob is {} bytes; a handle has room for {BLOB_MAX}",
            blob.len()
        )));
    }
    h.fill(0);
    h[0..4].copy_from_slice(&MAGIC);
    h[4] = VERSION;
    h[6..8].copy_from_slice(&(blob.len() as u16).to_le_bytes());
    h[BLOB_AT..BLOB_AT + blob.len()].copy_from_slice(blob);
    Ok(())
}

/// Reads a handle: its state and the blob.
pub(crate) fn parse(h: &[u8; NET_HANDLE_MAXSIZE]) -> Result<(State, &[u8]), Error> {
    if h[0..4] != MAGIC {
        return Err(Error::invalid(
            "the handle was not written by this plugin's listen",
        ));
    }
    if h[4] != VERSION {
        return Err(Error::invalid(format!(
            "handle version {} (this library writes {VERSION}): use the same libnccl-net-mrc.so on every node",
            h[4]
        )));
    }
    let len = usize::from(u16::from_le_bytes([h[6], h[7]]));
    if len > BLOB_MAX {
        return Err(Error::invalid(format!("handle claims a {len}-byte blob")));
    }
    let state = match h[5] {
        0 => State::Fresh,
        1 => State::Connecting(u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"))),
        s => return Err(Error::invalid(format!("handle in unknown state {s}"))),
    };
    Ok((state, &h[BLOB_AT..BLOB_AT + len]))
}

/// Records in the handle that `connect` is in progress under `key`.
pub(crate) fn set_connecting(h: &mut [u8; NET_HANDLE_MAXSIZE], key: u64) {
    h[5] = 1;
    h[8..16].copy_from_slice(&key.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let mut h = [0xAAu8; NET_HANDLE_MAXSIZE];
        write_listen(&mut h, &[1, 2, 3]).unwrap();
        assert_eq!(parse(&h).unwrap(), (State::Fresh, &[1u8, 2, 3][..]));
        set_connecting(&mut h, 0x1122_3344_5566_7788);
        assert_eq!(
            parse(&h).unwrap().0,
            State::Connecting(0x1122_3344_5566_7788)
        );
        assert_eq!(parse(&h).unwrap().1, &[1, 2, 3]);
        assert!(write_listen(&mut h, &[0; BLOB_MAX + 1]).is_err());
        write_listen(&mut h, &[0; BLOB_MAX]).unwrap();
        let mut bad = h;
        bad[0] = b'X';
        assert!(parse(&bad).is_err());
        bad = h;
        bad[6] = 200;
        assert!(parse(&bad).is_err());
        bad = h;
        bad[5] = 7;
        assert!(parse(&bad).is_err());
    }
}
