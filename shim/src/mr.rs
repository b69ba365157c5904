//! Memory regions: the application's buffers, registered with the host layer.
//!
//! The checks a kernel makes before pinning pages happen here (length, access-flag rules, the range being
//! mapped), so a bad registration fails at `ibv_reg_mr` rather than later inside the progress thread.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};

use crate::abi::*;
use crate::ffi::{Error, FFI};
use crate::host::HostMr;
use crate::pd::{Pd, pd};
use crate::registry::{self, Kind, Object};

/// A registered region.
#[repr(C)]
pub(crate) struct Mr {
    raw: UnsafeCell<ibv_mr>,
    pd: *const Pd,
    host: HostMr,
}

// SAFETY: the C struct is the first field.
unsafe impl Object for Mr {
    type Raw = ibv_mr;
    const KIND: Kind = Kind::Mr;
}

impl Mr {
    fn pd(&self) -> &Pd {
        // SAFETY: a PD with MRs cannot be freed (`Users`), so it outlives the MR.
        unsafe { &*self.pd }
    }
}

/// Access bits the shim implements; `REMOTE_ATOMIC` and `MW_BIND` are accepted (the verbs that would use
/// them are refused at post time), optional hints such as relaxed ordering are ignored.
const KNOWN_ACCESS: c_int = IBV_ACCESS_LOCAL_WRITE
    | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ
    | IBV_ACCESS_REMOTE_ATOMIC
    | IBV_ACCESS_MW_BIND
    | IBV_ACCESS_HUGETLB;

/// Verbs' rules for `access`, with the errno a provider returns.
pub(crate) fn check_access(access: c_int) -> Result<c_int, Error> {
    let access = access & !IBV_ACCESS_OPTIONAL_RANGE;
    if access & IBV_ACCESS_ON_DEMAND != 0 {
        return Err(Error::unsupported(
            "IBV_ACCESS_ON_DEMAND (on-demand paging) is not supported",
        ));
    }
    if access & IBV_ACCESS_ZERO_BASED != 0 {
        return Err(Error::unsupported("IBV_ACCESS_ZERO_BASED is not supported"));
    }
    if access & !KNOWN_ACCESS != 0 {
        return Err(Error::inval(format!(
            "unknown access flags {:#x}",
            access & !KNOWN_ACCESS
        )));
    }
    // Remote writes and atomics modify local memory, so verbs requires local write with them.
    if access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
        && access & IBV_ACCESS_LOCAL_WRITE == 0
    {
        return Err(Error::inval(
            "REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE",
        ));
    }
    Ok(access)
}

/// `EFAULT` unless every page of `[addr, addr + len)` is mapped, as the kernel's page pinning would report.
fn check_mapped(addr: u64, len: usize) -> Result<(), Error> {
    const PAGE: u64 = 4096;
    let end = addr
        .checked_add(len as u64)
        .ok_or_else(|| Error::inval("addr + length overflows"))?;
    let start = addr & !(PAGE - 1);
    let pages = (end - start).div_ceil(PAGE) as usize;
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reads the page tables for the range and writes `pages` bytes into `vec`.
    let r = unsafe {
        libc::mincore(
            start as *mut c_void,
            pages * PAGE as usize,
            vec.as_mut_ptr(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(Error::new(
            libc::EFAULT,
            format!("[{addr:#x}, +{len}) is not mapped memory of this process"),
        ))
    }
}

fn reg(
    pdp: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> Result<*mut ibv_mr, Error> {
    let p = pd(pdp, "pd")?;
    if length == 0 {
        return Err(Error::inval(
            "length is 0 (a memory region needs at least one byte)",
        ));
    }
    if addr.is_null() {
        return Err(Error::inval("addr is NULL"));
    }
    if iova != addr as u64 {
        return Err(Error::unsupported(format!(
            "iova {iova:#x} differs from addr {addr:p}; only iova == addr is supported"
        )));
    }
    let access = check_access(access)?;
    check_mapped(addr as u64, length)?;
    let host = p.ctx().host.reg_mr(p.host, addr as u64, length, access)?;
    p.users.add();
    Ok(registry::publish(Box::new(Mr {
        raw: UnsafeCell::new(ibv_mr {
            context: p.ctx().raw(),
            pd: p.raw(),
            addr,
            length,
            handle: host.lkey,
            lkey: host.lkey,
            rkey: host.rkey,
        }),
        pd: p,
        host,
    })))
}

/// Registers `[addr, addr + length)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    FFI.ptr("ibv_reg_mr", || reg(pd, addr, length, addr as u64, access))
}

/// `ibv_reg_mr_iova` (IBVERBS_1.7).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    FFI.ptr("ibv_reg_mr_iova", || reg(pd, addr, length, iova, access))
}

/// `ibv_reg_mr_iova2` (IBVERBS_1.8): what the `ibv_reg_mr` macro calls when `access` is not a compile-time
/// constant (perftest).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    FFI.ptr("ibv_reg_mr_iova2", || {
        reg(pd, addr, length, iova, access as c_int)
    })
}

/// Deregisters a region.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    FFI.errno_value("ibv_dereg_mr", || {
        // SAFETY: verbs callers do not use an MR while deregistering it.
        let m = unsafe { registry::destroy::<Mr>(mr, "mr", |_| Ok(())) }?;
        m.pd().ctx().host.dereg_mr(m.host);
        m.pd().users.sub();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rules() {
        assert_eq!(
            check_access(IBV_ACCESS_REMOTE_WRITE).unwrap_err().errno,
            libc::EINVAL
        );
        assert_eq!(
            check_access(IBV_ACCESS_ON_DEMAND).unwrap_err().errno,
            libc::EOPNOTSUPP
        );
        assert_eq!(check_access(1 << 12).unwrap_err().errno, libc::EINVAL);
        // Relaxed ordering (an optional hint) is ignored.
        let rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        assert_eq!(check_access(rw | 0x10_0000).unwrap(), rw);
    }

    #[test]
    fn unmapped_ranges_are_refused() {
        let buf = vec![0u8; 10_000];
        assert!(check_mapped(buf.as_ptr() as u64, buf.len()).is_ok());
        assert_eq!(check_mapped(0x10, 4096).unwrap_err().errno, libc::EFAULT);
        assert_eq!(
            check_mapped(u64::MAX - 10, 100).unwrap_err().errno,
            libc::EINVAL
        );
    }
}
