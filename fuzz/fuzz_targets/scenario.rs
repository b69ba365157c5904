//! The simulator's scenario loader (`Scenario::parse`) on arbitrary text: a bad scenario is an error that names
//! a field, never a panic, and a good one survives its own TOML round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc_sim::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let s = match Scenario::parse(text) {
        Ok(s) => s,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    // What the simulator writes next to its results (for replay) must load again.
    let again = s.to_toml();
    if let Err(e) = Scenario::parse(&again) {
        panic!("a scenario does not load its own TOML: {e}\n{again}");
    }
});
