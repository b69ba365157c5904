//! The host's registration calls: application memory lent to the datapath, host-owned buffers.

#![allow(
    unsafe_code,
    reason = "registration lends raw application memory to the datapath"
)]

use mrc::Access;
use mrc::mem::Pd;

use crate::error::HostError;
use crate::memory::HostMemory;
use crate::plane::PlaneIo;

use super::info::Mr;
use super::state::Host;

impl<P: PlaneIo> Host<P> {
    /// Registers `len` bytes of application memory at `addr` in `pd` with `access`.
    ///
    /// # Safety `addr..addr + len` must stay valid for reads and writes, and must not be freed, until
    /// [`Host::dereg_mr`](crate::Host::dereg_mr) of the returned region returns. The transport reads it while sending
    /// and writes into it (placement) from the progress thread at any time while it is registered with write rights,
    /// as a NIC does.
    pub unsafe fn reg_mr(
        &self,
        pd: Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr, HostError> {
        let a = addr as u64;
        if addr.is_null() || a.checked_add(len as u64).is_none() {
            return Err(HostError::Invalid(format!(
                "region {a:#x}+{len}: null or wrapping"
            )));
        }
        self.with_datapath(|dp, mrs, max| {
            if *mrs >= max {
                return Err(HostError::Full("the registration table"));
            }
            // The engine's checks (domain, rights) come first; only a region it accepted is lent below.
            let keys = dp
                .endpoint()
                .reg_mr(pd, a, len as u64, access)
                .map_err(|e| HostError::Invalid(format!("registration refused: {e}")))?;
            // SAFETY: the caller of `reg_mr` promised the range stays valid until `dereg_mr`, which forgets it
            // before returning; the engine writes into it only through `HostMemory`, which checks bounds.
            unsafe { dp.mem.lend(a, len as u64) };
            *mrs += 1;
            Ok(Mr {
                lkey: keys.lkey,
                rkey: keys.rkey,
                addr: a,
                len,
                owned: false,
            })
        })
    }

    /// Host-owned memory: `len` zeroed bytes registered in `pd` with `access` (tests, benchmarks, mrc-perf).
    /// Read and write it with [`read_buffer`](Self::read_buffer) and [`write_buffer`](Self::write_buffer);
    /// [`dereg_mr`](Self::dereg_mr) frees it.
    pub fn alloc_buffer(&self, pd: Pd, len: usize, access: Access) -> Result<Mr, HostError> {
        self.with_datapath(|dp, mrs, max| {
            if *mrs >= max {
                return Err(HostError::Full("the registration table"));
            }
            let (addr, keys) = dp.alloc_mr(pd, len, access)?;
            *mrs += 1;
            Ok(Mr {
                lkey: keys.lkey,
                rkey: keys.rkey,
                addr,
                len,
                owned: true,
            })
        })
    }

    /// Copies `out.len()` bytes at `offset` of host-owned region `mr` into `out`.
    pub fn read_buffer(&self, mr: &Mr, offset: usize, out: &mut [u8]) -> Result<(), HostError> {
        self.with_datapath(|dp, _, _| {
            let b = owned_bytes(&mut dp.mem, mr)?;
            let r = offset
                .checked_add(out.len())
                .and_then(|end| b.get(offset..end))
                .ok_or_else(|| HostError::Invalid("outside the region".into()))?;
            out.copy_from_slice(r);
            Ok(())
        })
    }

    /// Copies `data` to `offset` of host-owned region `mr`.
    pub fn write_buffer(&self, mr: &Mr, offset: usize, data: &[u8]) -> Result<(), HostError> {
        self.with_datapath(|dp, _, _| {
            let b = owned_bytes(&mut dp.mem, mr)?;
            let r = offset
                .checked_add(data.len())
                .and_then(|end| b.get_mut(offset..end))
                .ok_or_else(|| HostError::Invalid("outside the region".into()))?;
            r.copy_from_slice(data);
            Ok(())
        })
    }

    /// Deregisters `mr` (freeing it if the host allocated it). Work still using its keys fails with an access
    /// error; nothing is read from or placed into the range after this returns.
    pub fn dereg_mr(&self, mr: &Mr) -> Result<(), HostError> {
        self.with_datapath(|dp, mrs, _| {
            dp.endpoint()
                .dereg_mr(mr.lkey)
                .map_err(|_| HostError::NoSuchObject("registration"))?;
            if mr.owned {
                dp.mem.forget(mr.addr);
            } else {
                dp.mem.forget_lent(mr.addr, mr.len as u64);
            }
            *mrs = mrs.saturating_sub(1);
            Ok(())
        })
    }
}

fn owned_bytes<'a>(mem: &'a mut HostMemory, mr: &Mr) -> Result<&'a mut [u8], HostError> {
    if !mr.owned {
        return Err(HostError::Invalid(
            "not host-owned memory: the application reads its own buffers".into(),
        ));
    }
    mem.bytes_mut(mr.addr)
        .ok_or(HostError::NoSuchObject("registration"))
}
