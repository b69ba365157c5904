//! uSID containers and EV expansion with structured input: building, reading and shifting containers, and
//! validating and applying EV templates (single and per plane). Nothing panics; what is built reads back.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mrc::wire::{EvField, EvTemplate, PlaneTemplates, UsidContainer, path_of, plane_of};

#[derive(Debug, Arbitrary)]
struct Field {
    width: u8,
    init: u32,
    mask: u32,
}

impl Field {
    fn get(&self) -> EvField {
        EvField {
            width: self.width,
            init: self.init,
            mask: self.mask,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    block: u32,
    usids: Vec<u16>,
    address: u128,
    fields: Vec<Field>,
    usid_fields: Vec<Field>,
    plane_bits: u8,
    planes: u8,
    evs: Vec<u32>,
}

fuzz_target!(|inp: Input| {
    // Containers built from parts read back as those parts.
    if let Ok(c) = UsidContainer::new(inp.block, &inp.usids) {
        assert_eq!(c.block(), inp.block);
        assert_eq!(c.usids().collect::<Vec<_>>(), inp.usids);
        assert_eq!(UsidContainer::from_ipv6(c.to_ipv6()), c);
        assert_eq!(c.active(), inp.usids.first().copied());
        // Each hop consumes one uSID and keeps the block.
        let shifted = c.shift();
        assert_eq!(shifted.block(), inp.block);
        assert_eq!(shifted.usids().collect::<Vec<_>>(), inp.usids[1..]);
    }
    // Any address is a container: walking it ends within six hops.
    let mut c = UsidContainer::from_bits(inp.address);
    for _ in 0..=mrc::wire::MAX_USIDS {
        let n = c.usids().count();
        assert!(n <= mrc::wire::MAX_USIDS);
        if c.active().is_none() {
            break;
        }
        c = c.shift();
        assert_eq!(c.usids().count(), n - 1);
    }
    assert!(c.active().is_none(), "a container outlived six hops");

    let fields: Vec<EvField> = inp.fields.iter().map(Field::get).collect();
    let usid_fields: Vec<EvField> = inp.usid_fields.iter().map(Field::get).collect();
    let mut templates = Vec::new();
    for t in [
        EvTemplate::new(fields),
        EvTemplate::usid(inp.block, &usid_fields),
    ] {
        let Ok(t) = t else { continue };
        assert!(t.width() <= 128 && t.ev_bits() <= 32);
        for &ev in &inp.evs {
            let fits = t.ev_bits() >= 32 || ev >> t.ev_bits() == 0;
            match t.expand(ev) {
                Ok(bits) => {
                    assert!(
                        fits,
                        "{ev:#x} has bits above the {} the template takes",
                        t.ev_bits()
                    );
                    // Bits outside every mask are the fields' initial values, whatever the EV.
                    let zero = t.expand(0).expect("0 always fits");
                    let mut pos = 128u32;
                    for f in t.fields() {
                        pos -= u32::from(f.width);
                        let get =
                            |v: u128| (v >> pos) as u32 & (u32::MAX >> (32 - u32::from(f.width)));
                        assert_eq!(get(bits) & !f.mask, get(zero) & !f.mask);
                    }
                    assert_eq!(t.expand_ipv6(ev).ok().map(u128::from), Some(bits));
                }
                Err(_) => assert!(!fits, "{ev:#x} fits but did not expand"),
            }
        }
        templates.push(t);
    }
    let planes = usize::from(inp.planes % 4) + 1;
    if let Some(t) = templates.first()
        && let Ok(pt) = PlaneTemplates::new(inp.plane_bits, vec![t.clone(); planes])
    {
        for &ev in &inp.evs {
            let plane = plane_of(ev, pt.plane_bits()) as usize;
            let r = pt.expand(ev);
            if plane < planes {
                assert_eq!(r.ok(), t.expand(path_of(ev, pt.plane_bits())).ok());
            } else {
                assert!(r.is_err(), "plane {plane} has no template");
            }
            let _ = pt.expand_ipv6(ev);
        }
    }
});
