//! EV expansion (spec §7, OCP style): turning a 32-bit entropy value into the bits of a path, typically an
//! SRv6 uSID destination address, through a per-destination template.

use core::fmt;
use std::net::Ipv6Addr;

/// One field of an [`EvTemplate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvField {
    /// Bits the field occupies in the result, 1..=32.
    pub width: u8,
    /// The field's value before EV bits are written into it.
    pub init: u32,
    /// Bit positions (within `width`) that EV bits overwrite; 0 makes the field a constant.
    pub mask: u32,
}

/// Why a template is invalid, or an EV does not fit one. Field indexes count from 0 in template order; in
/// [`EvTemplate::usid`] the block is field 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvTemplateError {
    /// The field's width is not 1..=32.
    BadWidth {
        /// Index of the field.
        field: usize,
        /// Its width.
        width: u8,
    },
    /// The field's initial value has bits at or above its width.
    InitTooWide {
        /// Index of the field.
        field: usize,
    },
    /// The field's mask has bits at or above its width.
    MaskTooWide {
        /// Index of the field.
        field: usize,
    },
    /// With this field the widths add up to more than 128 bits.
    TooWide {
        /// Index of the field.
        field: usize,
    },
    /// With this field the masks take more than 32 EV bits.
    TooManyEvBits {
        /// Index of the field.
        field: usize,
    },
    /// A uSID field of [`EvTemplate::usid`] is not 16 bits wide.
    NotUsidWidth {
        /// Index of the field.
        field: usize,
        /// Its width.
        width: u8,
    },
    /// The path index has bits set above those the template takes.
    UnusedEvBits {
        /// The path index.
        ev: u32,
        /// Index bits the template takes (the low ones).
        ev_bits: u32,
    },
    /// `plane_bits` cannot number the templates (or is over 16, or there are none).
    PlaneBits {
        /// The plane bits.
        plane_bits: u8,
        /// Templates given.
        planes: usize,
    },
    /// No template for this plane.
    NoTemplate {
        /// The plane.
        plane: usize,
    },
}

impl fmt::Display for EvTemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EvTemplateError::BadWidth { field, width } => {
                write!(f, "EV field {field}: width {width} is not 1..=32")
            }
            EvTemplateError::InitTooWide { field } => {
                write!(f, "EV field {field}: initial value does not fit the width")
            }
            EvTemplateError::MaskTooWide { field } => {
                write!(f, "EV field {field}: mask does not fit the width")
            }
            EvTemplateError::TooWide { field } => {
                write!(f, "EV field {field}: the template exceeds 128 bits")
            }
            EvTemplateError::TooManyEvBits { field } => {
                write!(f, "EV field {field}: the masks take more than 32 EV bits")
            }
            EvTemplateError::NotUsidWidth { field, width } => {
                write!(
                    f,
                    "EV field {field}: a uSID field is 16 bits wide, not {width}"
                )
            }
            EvTemplateError::UnusedEvBits { ev, ev_bits } => write!(
                f,
                "path index {ev:#010x} has bits set above the {ev_bits} bits the template takes"
            ),
            EvTemplateError::PlaneBits { plane_bits, planes } => write!(
                f,
                "{plane_bits} plane bits cannot number {planes} plane templates; use 1..=2^plane_bits templates and at most 16 bits"
            ),
            EvTemplateError::NoTemplate { plane } => write!(f, "no template for plane {plane}"),
        }
    }
}

impl std::error::Error for EvTemplateError {}

/// A validated list of fields that expands an EV into up to 128 left-aligned bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvTemplate {
    fields: Vec<EvField>,
    ev_bits: u32,
}

/// Bits `0..width` set.
const fn low_bits(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

/// Writes the low bits of `v` into the set bits of `mask`, lowest first (a software PDEP).
fn deposit(mut v: u32, mut mask: u32) -> u32 {
    let mut out = 0;
    while mask != 0 {
        let lowest = mask & mask.wrapping_neg();
        if v & 1 != 0 {
            out |= lowest;
        }
        v >>= 1;
        mask &= mask - 1;
    }
    out
}

impl EvTemplate {
    // spec: WIRE-EVX-1
    /// Validates the fields: each 1..=32 bits wide with init and mask inside the width, at most 128 bits in
    /// all, and at most 32 EV bits taken.
    pub fn new(fields: Vec<EvField>) -> Result<Self, EvTemplateError> {
        let mut width = 0u32;
        let mut ev_bits = 0u32;
        for (field, f) in fields.iter().enumerate() {
            if !(1..=32).contains(&f.width) {
                return Err(EvTemplateError::BadWidth {
                    field,
                    width: f.width,
                });
            }
            let fits = low_bits(u32::from(f.width));
            if f.init & !fits != 0 {
                return Err(EvTemplateError::InitTooWide { field });
            }
            if f.mask & !fits != 0 {
                return Err(EvTemplateError::MaskTooWide { field });
            }
            width += u32::from(f.width);
            if width > 128 {
                return Err(EvTemplateError::TooWide { field });
            }
            ev_bits += f.mask.count_ones();
            if ev_bits > 32 {
                return Err(EvTemplateError::TooManyEvBits { field });
            }
        }
        Ok(Self { fields, ev_bits })
    }

    /// An SRv6 template: a constant 32-bit block, then uSID fields, each 16 bits wide with its own initial value
    /// and mask.
    pub fn usid(block: u32, usids: &[EvField]) -> Result<Self, EvTemplateError> {
        let mut fields = Vec::with_capacity(1 + usids.len());
        fields.push(EvField {
            width: 32,
            init: block,
            mask: 0,
        });
        for (i, u) in usids.iter().enumerate() {
            if u.width != 16 {
                return Err(EvTemplateError::NotUsidWidth {
                    field: i + 1,
                    width: u.width,
                });
            }
            fields.push(*u);
        }
        Self::new(fields)
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[EvField] {
        &self.fields
    }

    /// EV bits the template takes (from the most significant).
    pub fn ev_bits(&self) -> u32 {
        self.ev_bits
    }

    /// Bits of the expansion (the sum of the widths).
    pub fn width(&self) -> u32 {
        self.fields.iter().map(|f| u32::from(f.width)).sum()
    }

    // spec: WIRE-EVX-1
    /// The expansion of a path index (`ev >> plane_bits`, see [`PlaneTemplates`]), left-aligned in 128 bits.
    /// The index is a right-aligned number of [`ev_bits`](Self::ev_bits) bits, read most significant first; an
    /// index with bits set above those is an error, since two such indices would name the same path.
    pub fn expand(&self, ev: u32) -> Result<u128, EvTemplateError> {
        let k = self.ev_bits;
        if ev & !low_bits(k) != 0 {
            return Err(EvTemplateError::UnusedEvBits {
                ev,
                ev_bits: self.ev_bits,
            });
        }
        // Index bits not taken yet, aligned at the top of a u64 so that a 32-bit take needs no special case.
        let mut rest = if k == 0 { 0 } else { u64::from(ev) << (64 - k) };
        let mut out = 0u128;
        let mut pos = 128u32;
        for f in &self.fields {
            let k = f.mask.count_ones();
            let v = if k == 0 { 0 } else { (rest >> (64 - k)) as u32 };
            rest <<= k;
            let value = (f.init & !f.mask) | deposit(v, f.mask);
            pos -= u32::from(f.width);
            out |= u128::from(value) << pos;
        }
        Ok(out)
    }

    /// The expansion of `ev` as an IPv6 destination address.
    pub fn expand_ipv6(&self, ev: u32) -> Result<Ipv6Addr, EvTemplateError> {
        self.expand(ev).map(Ipv6Addr::from)
    }
}

/// One template per plane: the EV's low `plane_bits` bits pick the plane's template, which expands the rest of the
/// EV (the path index). Per-plane templates hold the plane in their constants, as deployed multi-plane fabrics do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneTemplates {
    plane_bits: u8,
    templates: Vec<EvTemplate>,
}

impl PlaneTemplates {
    /// Templates for planes `0..templates.len()`; `plane_bits` must number them all (at most 16 bits).
    pub fn new(plane_bits: u8, templates: Vec<EvTemplate>) -> Result<Self, EvTemplateError> {
        if plane_bits > 16 || templates.is_empty() || templates.len() > 1usize << plane_bits {
            return Err(EvTemplateError::PlaneBits {
                plane_bits,
                planes: templates.len(),
            });
        }
        Ok(Self {
            plane_bits,
            templates,
        })
    }

    /// EV bits that hold the plane.
    pub fn plane_bits(&self) -> u8 {
        self.plane_bits
    }

    // spec: WIRE-EVX-2
    /// The destination of `ev`: its plane's template applied to its path index.
    pub fn expand(&self, ev: u32) -> Result<u128, EvTemplateError> {
        let plane = plane_of(ev, self.plane_bits) as usize;
        let t = self
            .templates
            .get(plane)
            .ok_or(EvTemplateError::NoTemplate { plane })?;
        t.expand(path_of(ev, self.plane_bits))
    }

    /// [`expand`](Self::expand) as an IPv6 address.
    pub fn expand_ipv6(&self, ev: u32) -> Result<Ipv6Addr, EvTemplateError> {
        self.expand(ev).map(Ipv6Addr::from)
    }
}

/// The path index of `ev`: the bits above its plane.
pub const fn path_of(ev: u32, plane_bits: u8) -> u32 {
    if plane_bits >= 32 {
        0
    } else {
        ev >> plane_bits
    }
}

// spec: WIRE-EVX-2
/// The plane of `ev`: its `plane_bits` least significant bits (0 bits: plane 0; 32 or more: the whole EV).
pub const fn plane_of(ev: u32, plane_bits: u8) -> u32 {
    ev & low_bits(plane_bits as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(width: u8, init: u32, mask: u32) -> EvField {
        EvField { width, init, mask }
    }

    #[test]
    fn reference_example() {
        let t = EvTemplate::usid(
            0xfcbb_bb00,
            &[
                field(16, 0x1000, 0x000F),
                field(16, 0x2000, 0x0000),
                field(16, 0xe000, 0x00FF),
            ],
        )
        .unwrap();
        assert_eq!(t.ev_bits(), 12);
        assert_eq!(t.width(), 80);
        assert_eq!(
            t.expand_ipv6(0x305).unwrap(),
            "fcbb:bb00:1003:2000:e005::".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            t.expand(0x1305),
            Err(EvTemplateError::UnusedEvBits {
                ev: 0x1305,
                ev_bits: 12
            })
        );
        assert_eq!(
            t.expand_ipv6(0xFFF).unwrap(),
            "fcbb:bb00:100f:2000:e0ff::".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn scattered_mask_msb_first() {
        // Mask bits 7, 4, 0: EV bits 1,0,1 go to 7, 4, 0 in that order.
        let t = EvTemplate::new(vec![field(8, 0, 0b1001_0001)]).unwrap();
        assert_eq!(t.expand(0b101).unwrap(), 0b1000_0001u128 << 120);
        assert_eq!(t.expand(0b011).unwrap(), 0b0001_0001u128 << 120);
        // init bits under the mask are overwritten, the others kept.
        let t = EvTemplate::new(vec![field(8, 0xFF, 0x0F)]).unwrap();
        assert_eq!(t.expand(0).unwrap(), 0xF0u128 << 120);
    }

    #[test]
    fn plane_picks_the_template_and_the_rest_is_the_path() {
        // Two planes; each template writes its plane into the uSIDs and takes 4 path bits for the T1.
        let plane = |p: u32| {
            EvTemplate::usid(
                0xfcbb_bb00,
                &[
                    field(16, 0x1000 | p << 8, 0),
                    field(16, 0x2000 | p << 8, 0x000F),
                    field(16, 0xe001, 0),
                ],
            )
            .unwrap()
        };
        let pt = PlaneTemplates::new(1, vec![plane(0), plane(1)]).unwrap();
        // EV = path 5, plane 1.
        assert_eq!(
            pt.expand_ipv6(5 << 1 | 1).unwrap(),
            "fcbb:bb00:1100:2105:e001::".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            pt.expand_ipv6(3 << 1).unwrap(),
            "fcbb:bb00:1000:2003:e001::".parse::<Ipv6Addr>().unwrap()
        );
        assert!(
            pt.expand(16 << 1).is_err(),
            "path index wider than the template"
        );
        assert!(PlaneTemplates::new(0, vec![plane(0), plane(1)]).is_err());
        let one = PlaneTemplates::new(1, vec![plane(0)]).unwrap();
        assert_eq!(one.expand(1), Err(EvTemplateError::NoTemplate { plane: 1 }));
    }

    #[test]
    fn all_32_bits_and_empty() {
        let t = EvTemplate::new(vec![field(32, 0, u32::MAX), field(32, 7, 0)]).unwrap();
        assert_eq!(
            t.expand(0xDEAD_BEEF).unwrap(),
            (0xDEAD_BEEFu128 << 96) | (7 << 64)
        );
        let t = EvTemplate::new(vec![]).unwrap();
        assert_eq!(t.expand(0), Ok(0));
        assert!(t.expand(1).is_err());
    }

    #[test]
    fn validation_names_the_field() {
        use EvTemplateError::*;
        assert_eq!(
            EvTemplate::new(vec![field(8, 0, 1), field(0, 0, 0)]),
            Err(BadWidth { field: 1, width: 0 })
        );
        assert_eq!(
            EvTemplate::new(vec![field(33, 0, 0)]),
            Err(BadWidth {
                field: 0,
                width: 33
            })
        );
        assert_eq!(
            EvTemplate::new(vec![field(4, 0x10, 0)]),
            Err(InitTooWide { field: 0 })
        );
        assert_eq!(
            EvTemplate::new(vec![field(4, 0, 0x10)]),
            Err(MaskTooWide { field: 0 })
        );
        assert_eq!(
            EvTemplate::new(vec![field(32, 0, 0); 5]),
            Err(TooWide { field: 4 })
        );
        assert_eq!(
            EvTemplate::new(vec![field(32, 0, u32::MAX), field(1, 0, 1)]),
            Err(TooManyEvBits { field: 1 })
        );
        assert_eq!(
            EvTemplate::usid(1, &[field(16, 1, 0), field(8, 1, 0)]),
            Err(NotUsidWidth { field: 2, width: 8 })
        );
        assert_eq!(
            EvTemplate::usid(1, &[field(16, 1, 0); 7]),
            Err(TooWide { field: 7 })
        );
        assert!(
            BadWidth { field: 3, width: 0 }
                .to_string()
                .contains("field 3")
        );
    }

    #[test]
    fn planes() {
        assert_eq!(plane_of(0xABCD, 0), 0);
        assert_eq!(plane_of(0xABCD, 2), 1);
        assert_eq!(plane_of(0xABCD, 4), 0xD);
        assert_eq!(plane_of(0xFFFF_FFFF, 32), 0xFFFF_FFFF);
        assert_eq!(plane_of(0xFFFF_FFFF, 200), 0xFFFF_FFFF);
    }
}
