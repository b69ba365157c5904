//! Capture on and off: a host's datagrams to a pcapng file.

use crate::capture::{Capture, CaptureConfig, CaptureStats};
use crate::error::HostError;
use crate::plane::PlaneIo;

use super::state::Host;

impl<P: PlaneIo> Host<P> {
    /// Starts writing every datagram this host sends and receives to `cfg.path` (pcapng, one interface per
    /// plane), finishing a capture already on.
    pub fn start_capture(&self, cfg: &CaptureConfig) -> Result<(), HostError> {
        let zero = self.with_datapath(|dp, _, _| dp.zero_checksum());
        let capture = Capture::open(cfg, &self.local().planes, zero)?;
        let old = self.with_datapath(|dp, _, _| dp.set_capture(Some(capture)));
        if let Some(old) = old {
            old.finish()?;
        }
        Ok(())
    }

    /// Stops the capture and completes its file; what it wrote, or `None` when none was on.
    pub fn stop_capture(&self) -> Result<Option<CaptureStats>, HostError> {
        match self.with_datapath(|dp, _, _| dp.set_capture(None)) {
            Some(c) => Ok(Some(c.finish()?)),
            None => Ok(None),
        }
    }

    /// What the capture wrote so far, if one is on.
    pub fn capture_stats(&self) -> Option<CaptureStats> {
        self.with_datapath(|dp, _, _| dp.capture_stats())
    }
}
