//! `--verify`: every message is checked where it landed, as it lands.
//!
//! Message n of QP q carries bytes of its own (a pattern of q, n and the offset), written into its source slot
//! (n mod slots) just before it is posted. When its send completes (RC: every byte is placed at the server),
//! the client READs the server's slot back into a check region and compares it with the source slot; only then
//! may message n + slots reuse the slot. So a message that is lost, misplaced, torn or overwritten by another
//! fails the run with its number, not merely a hash of whatever the slots hold at the end.

use mrc::{SendOp, Sge};
use mrc_host::{Host, Mr, Qp, SendRequest};

use super::oob::WireRegion;
use super::run::Failure;

/// wr_id bit that marks a check READ (data messages use their number as wr_id).
pub(super) const READ_TAG: u64 = 1 << 63;

/// The per-message checker of one client.
pub(super) struct Verifier {
    /// READ destinations: the same layout as the source region.
    check: Mr,
    slots: usize,
    max_size: u64,
    /// Per QP and slot, the message that occupies it (posted, not yet checked).
    busy: Vec<Vec<Option<u64>>>,
    /// Check READs in flight.
    reading: usize,
    /// Messages checked.
    pub(super) checked: u64,
    want: Vec<u8>,
    got: Vec<u8>,
}

/// Byte `i` of message `n` of QP `q`: differs per message, per QP and per position.
fn fill(q: usize, n: u64, out: &mut [u8]) {
    let seed = (n.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (q as u64) << 48;
    for (w, chunk) in out.chunks_mut(8).enumerate() {
        let mut x = seed ^ (w as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 29;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

impl Verifier {
    /// A checker for `qps` QPs of `slots` slots of `max_size` bytes; `check` is a region of the same size.
    pub(super) fn new(check: Mr, qps: usize, slots: usize, max_size: u64) -> Self {
        Self {
            check,
            slots,
            max_size,
            busy: vec![vec![None; slots]; qps],
            reading: 0,
            checked: 0,
            want: Vec::new(),
            got: Vec::new(),
        }
    }

    fn offset(&self, q: usize, n: u64) -> usize {
        (q * self.slots + (n % self.slots as u64) as usize) * self.max_size as usize
    }

    /// Whether message `n` of QP `q` may take its slot (the message before it there has been checked).
    pub(super) fn slot_free(&self, q: usize, n: u64) -> bool {
        self.busy[q][(n % self.slots as u64) as usize].is_none()
    }

    /// Writes message `n`'s bytes into its source slot and marks the slot taken; call before posting it.
    pub(super) fn prepare(
        &mut self,
        host: &Host,
        region: &Mr,
        q: usize,
        n: u64,
        size: u64,
    ) -> Result<(), Failure> {
        self.want.resize(size as usize, 0);
        fill(q, n, &mut self.want);
        host.write_buffer(region, self.offset(q, n), &self.want)?;
        self.busy[q][(n % self.slots as u64) as usize] = Some(n);
        Ok(())
    }

    /// Message `n` of QP `q` completed: READs the server's slot back.
    pub(super) fn sent(
        &mut self,
        qp: &Qp,
        remote: &WireRegion,
        q: usize,
        n: u64,
        size: u64,
    ) -> Result<(), Failure> {
        let off = self.offset(q, n) as u64;
        let sge = [Sge {
            addr: self.check.addr + off,
            len: size as u32,
            lkey: self.check.lkey,
        }];
        let wr = SendRequest {
            wr_id: READ_TAG | n,
            op: SendOp::Read {
                remote_addr: remote.addr + off,
                rkey: remote.rkey,
            },
            sges: &sge,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
        };
        qp.post_send(&wr)
            .map_err(|e| Failure::test(format!("post_send (verify READ): {e}")))?;
        self.reading += 1;
        Ok(())
    }

    /// The READ of message `n` of QP `q` completed: compares what the server holds with what was sent and
    /// frees the slot; an error names the message and the first wrong byte.
    pub(super) fn read_back(
        &mut self,
        host: &Host,
        q: usize,
        wr_id: u64,
        size: u64,
    ) -> Result<(), Failure> {
        let n = wr_id & !READ_TAG;
        let slot = (n % self.slots as u64) as usize;
        if self.busy[q][slot] != Some(n) {
            return Err(Failure::test(format!(
                "verification FAILED: a check READ for message {n} of QP {q}, whose slot holds {:?}",
                self.busy[q][slot]
            )));
        }
        self.reading -= 1;
        self.want.resize(size as usize, 0);
        fill(q, n, &mut self.want);
        self.got.resize(size as usize, 0);
        host.read_buffer(&self.check, self.offset(q, n), &mut self.got)?;
        if let Some(i) = self.want.iter().zip(&self.got).position(|(a, b)| a != b) {
            return Err(Failure::test(format!(
                "verification FAILED: message {n} of QP {q} ({size} B): byte {i} at the server is {:#04x}, \
                 sent {:#04x}",
                self.got[i], self.want[i]
            )));
        }
        self.busy[q][slot] = None;
        self.checked += 1;
        Ok(())
    }

    /// Whether every check READ has come back.
    pub(super) fn idle(&self) -> bool {
        self.reading == 0
    }
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn messages_differ_everywhere_that_matters() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        fill(0, 7, &mut a);
        fill(0, 8, &mut b);
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < 64);
        fill(1, 7, &mut b);
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < 64);
        let mut odd = vec![0u8; 13];
        fill(0, 7, &mut odd);
        assert_eq!(odd[..], a[..13]);
    }
}
