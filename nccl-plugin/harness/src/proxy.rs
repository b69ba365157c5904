//! NCCL's proxy pattern, replayed: the receiving rank listens and hands its handle over, the sending rank
//! calls `connect` and the receiving rank `accept` until each returns a comm (never blocking), both register
//! one host buffer, then keep up to `depth` requests outstanding (NCCL_STEPS is 8) — the receiver grouped
//! receives of `group` buffers with tags, the sender one send per buffer with that tag — retrying every
//! NULL request, testing requests in order, checking sizes and bytes, and finally closing.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::time::{Duration, Instant};

use nccl_net_mrc::abi::NET_HANDLE_MAXSIZE;

use crate::plugin::{Plugin, Ptr, Version};

/// What one run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Receive requests to complete.
    pub messages: usize,
    /// Bytes of each receive buffer.
    pub size: usize,
    /// Buffers per receive (grouped receive; 1..=maxRecvs); the sender sends one message per buffer.
    pub group: usize,
    /// Requests outstanding per comm (NCCL keeps up to NCCL_STEPS = 8).
    pub depth: usize,
    /// Sends smaller than their receive buffers (by an amount that varies per message).
    pub shrink: bool,
    /// Pass NCCL's optional-completion hint to `irecv` (v9+, single-buffer receives).
    pub hint: bool,
    /// Check every received byte.
    pub verify: bool,
    /// Give up after this long.
    pub timeout: Duration,
    /// The receiver prints `PROGRESS <done> <messages>` on stdout every this many completed receives (0: never),
    /// so a test can apply a fault once data is moving rather than after a guessed delay.
    pub progress: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            messages: 64,
            size: 64 * 1024,
            group: 1,
            depth: 8,
            shrink: false,
            hint: false,
            verify: true,
            timeout: Duration::from_secs(60),
            progress: 0,
        }
    }
}

/// NCCL's usage patterns, each a run over the same connection: (name, options). Every run verifies its bytes.
pub fn suite(v: Version) -> Vec<(&'static str, Options)> {
    let o = Options::default();
    let mut runs = vec![
        // NCCL_STEPS outstanding per comm, the proxy's steady state.
        ("steady", Options { ..o.clone() }),
        // Grouped receives (maxRecvs > 1): one request, four buffers told apart by tag, sends in tag order.
        (
            "grouped",
            Options {
                messages: 48,
                size: 32 * 1024,
                group: 4,
                shrink: true,
                ..o.clone()
            },
        ),
        // Receives larger than their sends: test reports what was sent.
        (
            "larger-receive",
            Options {
                messages: 16,
                size: 1 << 20,
                shrink: true,
                ..o.clone()
            },
        ),
        // Empty messages (NCCL sends them).
        (
            "empty",
            Options {
                messages: 16,
                size: 0,
                ..o.clone()
            },
        ),
        // NCCL_NET_MAX_REQUESTS outstanding: the whole 32-slot window, reused many times.
        (
            "window",
            Options {
                messages: 256,
                size: 4096,
                depth: 32,
                ..o.clone()
            },
        ),
    ];
    if v >= Version::V9 {
        // LL/LL128's optional completion.
        runs.push((
            "hint",
            Options {
                messages: 32,
                shrink: true,
                hint: true,
                ..o
            },
        ));
    }
    runs
}

/// What one side saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Requests completed (receives, or sends).
    pub requests: usize,
    /// Payload bytes moved.
    pub bytes: u64,
    /// From the first post to the last completion.
    pub elapsed: Duration,
    /// `isend`/`irecv` calls that returned a NULL request and were retried.
    pub null_retries: u64,
    /// Receives that completed with fewer bytes than the buffer held.
    pub short_receives: usize,
}

impl Report {
    /// Throughput in Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Bytes sent into buffer `m` of receive `k`.
pub fn send_size(o: &Options, k: usize, m: usize) -> usize {
    if o.shrink {
        o.size - (k * 7919 + m * 104_729) % (o.size / 2 + 1)
    } else {
        o.size
    }
}

/// The byte at offset `i` of message (`k`, `m`).
fn pattern(k: usize, m: usize, i: usize) -> u8 {
    let x = (k as u32).wrapping_mul(0x9E37_79B9) ^ (m as u32).wrapping_mul(0x85EB_CA6B);
    (x ^ (i as u32).wrapping_mul(31) ^ (i as u32 >> 8)) as u8
}

fn fill(buf: &mut [u8], k: usize, m: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(k, m, i);
    }
}

fn check(buf: &[u8], k: usize, m: usize) -> Result<(), String> {
    match buf
        .iter()
        .enumerate()
        .find(|&(i, &b)| b != pattern(k, m, i))
    {
        None => Ok(()),
        Some((i, &b)) => Err(format!(
            "message {k} buffer {m}: byte {i} is {b:#04x}, expected {:#04x}",
            pattern(k, m, i)
        )),
    }
}

fn err(what: &str) -> impl Fn(crate::Code) -> String + '_ {
    move |c| format!("{what}: {c}")
}

/// The receiving rank up to a connected comm: `listen`, hand the handle to `give`, `accept` until done.
pub fn accept(
    p: &Plugin,
    ctx: Ptr,
    give: impl FnOnce([u8; NET_HANDLE_MAXSIZE]),
    timeout: Duration,
) -> Result<(Ptr, Ptr), String> {
    let mut h = [0u8; NET_HANDLE_MAXSIZE];
    let l = p.listen(ctx, 0, &mut h).map_err(err("listen"))?;
    give(h);
    let start = Instant::now();
    loop {
        if let Some(r) = p.accept(l).map_err(err("accept"))? {
            return Ok((l, r));
        }
        if start.elapsed() > timeout {
            return Err(format!("accept: no connection within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The sending rank up to a connected comm: `connect` with the same handle until it returns one.
pub fn connect(
    p: &Plugin,
    ctx: Ptr,
    mut h: [u8; NET_HANDLE_MAXSIZE],
    timeout: Duration,
) -> Result<Ptr, String> {
    let start = Instant::now();
    loop {
        if let Some(s) = p.connect(ctx, 0, &mut h).map_err(err("connect"))? {
            return Ok(s);
        }
        if start.elapsed() > timeout {
            return Err(format!("connect: no connection within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The receiving rank's data phase on `comm`.
pub fn receive(p: &Plugin, comm: Ptr, o: &Options) -> Result<Report, String> {
    let slot = o.size * o.group;
    let mut buf = touched((slot * o.depth).max(1));
    let base = buf.as_mut_ptr();
    let mh = p.reg_mr(comm, base, buf.len()).map_err(err("regMr"))?;
    let hint = o.hint && o.group == 1 && p.version() >= Version::V9;
    let mut rep = Report::default();
    let mut reqs: VecDeque<(usize, Ptr)> = VecDeque::new();
    let (mut posted, mut done) = (0usize, 0usize);
    let start = Instant::now();
    while done < o.messages {
        if start.elapsed() > o.timeout {
            return Err(format!(
                "receive: {done} of {} done after {:?}",
                o.messages, o.timeout
            ));
        }
        if posted < o.messages && posted - done < o.depth {
            let at = (posted % o.depth) * slot;
            // SAFETY: `at + m * size + size <= buf.len()`; the plugin writes there only while the request lives.
            let bufs: Vec<_> = (0..o.group)
                .map(|m| (unsafe { base.add(at + m * o.size) }, o.size, m as c_int, mh))
                .collect();
            match p.irecv(comm, &bufs, hint).map_err(err("irecv"))? {
                Some(r) => {
                    reqs.push_back((posted, r));
                    posted += 1;
                    continue;
                }
                None => rep.null_retries += 1,
            }
        }
        let Some(&(k, r)) = reqs.front() else {
            idle();
            continue;
        };
        let mut sizes = [0 as c_int; 8];
        if !p.test(r, &mut sizes[..o.group]).map_err(err("test"))? {
            idle();
            continue;
        }
        reqs.pop_front();
        let at = (k % o.depth) * slot;
        for (m, &got) in sizes.iter().enumerate().take(o.group) {
            let want = send_size(o, k, m);
            let got = got as usize;
            if hint && got == o.size {
                // Optional completion (reported with the posted size, so also when the send filled the
                // buffer): NCCL's LL protocols find their data by its flags; the harness waits for the bytes
                // themselves.
                let t = Instant::now();
                while check(&buf_view(base, at + m * o.size, want), k, m).is_err() {
                    if t.elapsed() > o.timeout {
                        return Err(format!(
                            "message {k}: data never landed after an optional completion"
                        ));
                    }
                    std::hint::spin_loop();
                }
            } else if got != want {
                return Err(format!(
                    "message {k} buffer {m}: test reported {got} bytes, {want} were sent"
                ));
            }
            if want < o.size {
                rep.short_receives += 1;
            }
            if o.verify {
                check(&buf_view(base, at + m * o.size, want), k, m)?;
            }
            rep.bytes += want as u64;
        }
        done += 1;
        if o.progress > 0 && done % o.progress == 0 {
            use std::io::Write as _;
            println!("PROGRESS {done} {}", o.messages);
            let _ = std::io::stdout().flush();
        }
    }
    rep.elapsed = start.elapsed();
    rep.requests = done;
    let mut dummy = [0 as c_int; 1];
    if let Some(f) = p.iflush(comm, base, 1, mh).map_err(err("iflush"))? {
        let t = Instant::now();
        while !p.test(f, &mut dummy).map_err(err("test(iflush)"))? {
            if t.elapsed() > o.timeout {
                return Err(format!("iflush not done after {:?}", o.timeout));
            }
        }
    }
    p.dereg_mr(comm, mh).map_err(err("deregMr"))?;
    drop(buf);
    Ok(rep)
}

/// A round that moved nothing: give the CPU away, as NCCL's proxy thread does (`sched_yield` when idle), so
/// the transport's progress thread and the peer's proxy get it on small machines.
fn idle() {
    std::thread::yield_now();
}

/// A zeroed buffer whose pages are all mapped, so first-touch page faults stay out of the measured time.
fn touched(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for page in v.chunks_mut(4096) {
        // A write, not a read (the shared zero page would fault again at the first real write), and volatile
        // so it is not dropped as a store of the value already there.
        // SAFETY: `page[0]` is a valid, exclusively borrowed byte.
        unsafe { std::ptr::write_volatile(&mut page[0], 0) };
    }
    v
}

/// A copy of `len` bytes at `base + off` (read through a volatile-free copy after the plugin said so).
fn buf_view(base: *mut u8, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: the range lies inside the receive buffer (`receive` computes it); the bytes may still be
    // landing for an optional completion, which the caller polls for.
    unsafe { std::ptr::copy_nonoverlapping(base.add(off), v.as_mut_ptr(), len) };
    v
}

/// The sending rank's data phase on `comm`.
pub fn send(p: &Plugin, comm: Ptr, o: &Options) -> Result<Report, String> {
    let slot = o.size * o.group;
    let mut buf = touched((slot * o.depth).max(1));
    let base = buf.as_mut_ptr();
    let mh = p.reg_mr(comm, base, buf.len()).map_err(err("regMr"))?;
    let total = o.messages * o.group;
    let mut rep = Report::default();
    let mut reqs: VecDeque<(usize, Ptr)> = VecDeque::new();
    let (mut next, mut done, mut filled) = (0usize, 0usize, usize::MAX);
    let start = Instant::now();
    while done < total {
        if start.elapsed() > o.timeout {
            return Err(format!(
                "send: {done} of {total} done after {:?}",
                o.timeout
            ));
        }
        if next < total && next - done < o.depth * o.group {
            let (k, m) = (next / o.group, next % o.group);
            let len = send_size(o, k, m);
            // SAFETY: inside `buf`; the slot's previous send completed (at most depth × group outstanding).
            let at = unsafe { base.add((k % o.depth) * slot + m * o.size) };
            if o.verify && filled != next {
                // SAFETY: as above; no request uses these bytes now.
                fill(unsafe { std::slice::from_raw_parts_mut(at, len) }, k, m);
                filled = next;
            }
            match p
                .isend(comm, at, len, m as c_int, mh)
                .map_err(err("isend"))?
            {
                Some(r) => {
                    reqs.push_back((len, r));
                    next += 1;
                    continue;
                }
                None => rep.null_retries += 1,
            }
        }
        let Some(&(len, r)) = reqs.front() else {
            idle();
            continue;
        };
        let mut size = [0 as c_int; 1];
        if !p.test(r, &mut size).map_err(err("test"))? {
            idle();
        } else {
            if size[0] as usize != len {
                return Err(format!(
                    "send of {len} bytes completed with size {}",
                    size[0]
                ));
            }
            reqs.pop_front();
            rep.bytes += len as u64;
            done += 1;
        }
    }
    rep.elapsed = start.elapsed();
    rep.requests = done;
    p.dereg_mr(comm, mh).map_err(err("deregMr"))?;
    drop(buf);
    Ok(rep)
}

/// Both ranks in one process, on two threads (as two proxy threads would be), over one connection:
/// each option set in turn. Returns the receiver's and the sender's reports per option set.
pub fn pair(p: &Plugin, runs: &[Options]) -> Result<Vec<(Report, Report)>, String> {
    let timeout = runs
        .iter()
        .map(|o| o.timeout)
        .max()
        .unwrap_or(Duration::from_secs(60));
    let ctx_r = p.init(1).map_err(err("init (receiver)"))?;
    let ctx_s = p.init(2).map_err(err("init (sender)"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let out = std::thread::scope(|s| {
        let recv = s.spawn(move || -> Result<Vec<Report>, String> {
            let (l, r) = accept(
                p,
                ctx_r,
                |h| {
                    let _ = tx.send(h);
                },
                timeout,
            )?;
            let reps = runs
                .iter()
                .map(|o| receive(p, r, o))
                .collect::<Result<Vec<_>, _>>();
            p.close_recv(r).map_err(err("closeRecv"))?;
            p.close_listen(l).map_err(err("closeListen"))?;
            reps
        });
        let send = s.spawn(move || -> Result<Vec<Report>, String> {
            let h = rx
                .recv_timeout(timeout)
                .map_err(|_| "the receiver never listened".to_string())?;
            let c = connect(p, ctx_s, h, timeout)?;
            let reps = runs
                .iter()
                .map(|o| send(p, c, o))
                .collect::<Result<Vec<_>, _>>();
            p.close_send(c).map_err(err("closeSend"))?;
            reps
        });
        let r = recv
            .join()
            .map_err(|_| "receiver thread panicked".to_string())?;
        let s = send
            .join()
            .map_err(|_| "sender thread panicked".to_string())?;
        Ok::<_, String>((r?, s?))
    })?;
    p.finalize(ctx_s).map_err(err("finalize"))?;
    p.finalize(ctx_r).map_err(err("finalize"))?;
    Ok(out.0.into_iter().zip(out.1).collect())
}

/// Hex of a handle (how the two-process mode passes it).
pub fn hex(h: &[u8; NET_HANDLE_MAXSIZE]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// A handle from [`hex`].
pub fn unhex(s: &str) -> Result<[u8; NET_HANDLE_MAXSIZE], String> {
    let s = s.trim();
    if s.len() != 2 * NET_HANDLE_MAXSIZE {
        return Err(format!(
            "a handle is {} hex digits, got {}",
            2 * NET_HANDLE_MAXSIZE,
            s.len()
        ));
    }
    let mut h = [0u8; NET_HANDLE_MAXSIZE];
    for (i, b) in h.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| format!("handle: {e}"))?;
    }
    Ok(h)
}
