//! BTH opcodes (spec §3): what each value means and which headers follow it.

use core::fmt;

// spec: WIRE-OP-1
/// An MRC v1 opcode. The value is the BTH opcode byte; any byte not listed here is
/// [`Error::UnknownOpcode`](super::Error::UnknownOpcode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs, reason = "the variant names are the spec's opcode names")]
pub enum Opcode {
    WriteFirst = 0xC6,
    WriteMiddle,
    WriteLast,
    WriteLastImm,
    WriteOnly,
    WriteOnlyImm,
    Ack = 0xD1,
    EpRequest = 0xD8,
    EpResponse = 0xD9,
    Sack = 0xDC,
    Nack = 0xDD,
    Probe = 0xDE,
    SendFirst = 0xE0,
    SendMiddle,
    SendLast,
    SendLastImm,
    SendOnly,
    SendOnlyImm,
    ReadRequest = 0xE8,
    ReadResponseFirst,
    ReadResponseMiddle,
    ReadResponseLast,
    ReadResponseOnly,
}

/// The operation family of an opcode, without its position in the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "one variant per opcode family of spec §3")]
pub enum OpKind {
    Write,
    Send,
    ReadRequest,
    ReadResponse,
    Ack,
    EpRequest,
    EpResponse,
    Sack,
    Nack,
    Probe,
}

/// Where a data packet sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The message is this one packet.
    Only,
}

impl Opcode {
    /// Every opcode, in wire order.
    pub const ALL: [Opcode; 23] = [
        Opcode::WriteFirst,
        Opcode::WriteMiddle,
        Opcode::WriteLast,
        Opcode::WriteLastImm,
        Opcode::WriteOnly,
        Opcode::WriteOnlyImm,
        Opcode::Ack,
        Opcode::EpRequest,
        Opcode::EpResponse,
        Opcode::Sack,
        Opcode::Nack,
        Opcode::Probe,
        Opcode::SendFirst,
        Opcode::SendMiddle,
        Opcode::SendLast,
        Opcode::SendLastImm,
        Opcode::SendOnly,
        Opcode::SendOnlyImm,
        Opcode::ReadRequest,
        Opcode::ReadResponseFirst,
        Opcode::ReadResponseMiddle,
        Opcode::ReadResponseLast,
        Opcode::ReadResponseOnly,
    ];

    // spec: WIRE-OP-1
    /// The opcode of a BTH opcode byte, or `None` for a byte the spec does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0xC6 => Opcode::WriteFirst,
            0xC7 => Opcode::WriteMiddle,
            0xC8 => Opcode::WriteLast,
            0xC9 => Opcode::WriteLastImm,
            0xCA => Opcode::WriteOnly,
            0xCB => Opcode::WriteOnlyImm,
            0xD1 => Opcode::Ack,
            0xD8 => Opcode::EpRequest,
            0xD9 => Opcode::EpResponse,
            0xDC => Opcode::Sack,
            0xDD => Opcode::Nack,
            0xDE => Opcode::Probe,
            0xE0 => Opcode::SendFirst,
            0xE1 => Opcode::SendMiddle,
            0xE2 => Opcode::SendLast,
            0xE3 => Opcode::SendLastImm,
            0xE4 => Opcode::SendOnly,
            0xE5 => Opcode::SendOnlyImm,
            0xE8 => Opcode::ReadRequest,
            0xE9 => Opcode::ReadResponseFirst,
            0xEA => Opcode::ReadResponseMiddle,
            0xEB => Opcode::ReadResponseLast,
            0xEC => Opcode::ReadResponseOnly,
            _ => return None,
        })
    }

    /// The BTH opcode byte.
    pub const fn to_u8(self) -> u8 {
        self as u8
    }

    /// The operation family.
    pub const fn kind(self) -> OpKind {
        match self {
            Opcode::WriteFirst
            | Opcode::WriteMiddle
            | Opcode::WriteLast
            | Opcode::WriteLastImm
            | Opcode::WriteOnly
            | Opcode::WriteOnlyImm => OpKind::Write,
            Opcode::SendFirst
            | Opcode::SendMiddle
            | Opcode::SendLast
            | Opcode::SendLastImm
            | Opcode::SendOnly
            | Opcode::SendOnlyImm => OpKind::Send,
            Opcode::ReadRequest => OpKind::ReadRequest,
            Opcode::ReadResponseFirst
            | Opcode::ReadResponseMiddle
            | Opcode::ReadResponseLast
            | Opcode::ReadResponseOnly => OpKind::ReadResponse,
            Opcode::Ack => OpKind::Ack,
            Opcode::EpRequest => OpKind::EpRequest,
            Opcode::EpResponse => OpKind::EpResponse,
            Opcode::Sack => OpKind::Sack,
            Opcode::Nack => OpKind::Nack,
            Opcode::Probe => OpKind::Probe,
        }
    }

    /// Position in the message of a data opcode (a READ_REQUEST is a one-packet message); `None` for control
    /// opcodes.
    pub const fn position(self) -> Option<Position> {
        Some(match self {
            Opcode::WriteFirst | Opcode::SendFirst | Opcode::ReadResponseFirst => Position::First,
            Opcode::WriteMiddle | Opcode::SendMiddle | Opcode::ReadResponseMiddle => {
                Position::Middle
            }
            Opcode::WriteLast
            | Opcode::WriteLastImm
            | Opcode::SendLast
            | Opcode::SendLastImm
            | Opcode::ReadResponseLast => Position::Last,
            Opcode::WriteOnly
            | Opcode::WriteOnlyImm
            | Opcode::SendOnly
            | Opcode::SendOnlyImm
            | Opcode::ReadRequest
            | Opcode::ReadResponseOnly => Position::Only,
            Opcode::Ack
            | Opcode::EpRequest
            | Opcode::EpResponse
            | Opcode::Sack
            | Opcode::Nack
            | Opcode::Probe => return None,
        })
    }

    // spec: WIRE-IMM-1
    /// Whether an ImmDt header follows the RETH (only the last packet of a message carries immediate data).
    pub const fn has_imm(self) -> bool {
        matches!(
            self,
            Opcode::WriteLastImm | Opcode::WriteOnlyImm | Opcode::SendLastImm | Opcode::SendOnlyImm
        )
    }

    /// Whether the packet carries METH and RETH (writes, sends, READ requests and responses) and consumes a PSN.
    pub const fn is_data(self) -> bool {
        self.position().is_some()
    }

    // spec: WIRE-OP-2
    /// Whether the opcode is a project extension (SEND, READ) that needs the peer's capability.
    pub const fn is_extension(self) -> bool {
        matches!(
            self.kind(),
            OpKind::Send | OpKind::ReadRequest | OpKind::ReadResponse
        )
    }

    /// The data opcode of a family, position and immediate flag; `None` for combinations the spec lacks
    /// (immediate data on a FIRST/MIDDLE packet or on a READ, a READ_REQUEST that is not `Only`, control kinds).
    pub fn data(kind: OpKind, pos: Position, imm: bool) -> Option<Self> {
        use Position::*;
        Some(match (kind, pos, imm) {
            (OpKind::Write, First, false) => Opcode::WriteFirst,
            (OpKind::Write, Middle, false) => Opcode::WriteMiddle,
            (OpKind::Write, Last, false) => Opcode::WriteLast,
            (OpKind::Write, Last, true) => Opcode::WriteLastImm,
            (OpKind::Write, Only, false) => Opcode::WriteOnly,
            (OpKind::Write, Only, true) => Opcode::WriteOnlyImm,
            (OpKind::Send, First, false) => Opcode::SendFirst,
            (OpKind::Send, Middle, false) => Opcode::SendMiddle,
            (OpKind::Send, Last, false) => Opcode::SendLast,
            (OpKind::Send, Last, true) => Opcode::SendLastImm,
            (OpKind::Send, Only, false) => Opcode::SendOnly,
            (OpKind::Send, Only, true) => Opcode::SendOnlyImm,
            (OpKind::ReadRequest, Only, false) => Opcode::ReadRequest,
            (OpKind::ReadResponse, First, false) => Opcode::ReadResponseFirst,
            (OpKind::ReadResponse, Middle, false) => Opcode::ReadResponseMiddle,
            (OpKind::ReadResponse, Last, false) => Opcode::ReadResponseLast,
            (OpKind::ReadResponse, Only, false) => Opcode::ReadResponseOnly,
            _ => return None,
        })
    }

    /// The spec's name of the opcode, e.g. `"WRITE_ONLY_IMM"`.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::WriteFirst => "WRITE_FIRST",
            Opcode::WriteMiddle => "WRITE_MIDDLE",
            Opcode::WriteLast => "WRITE_LAST",
            Opcode::WriteLastImm => "WRITE_LAST_IMM",
            Opcode::WriteOnly => "WRITE_ONLY",
            Opcode::WriteOnlyImm => "WRITE_ONLY_IMM",
            Opcode::Ack => "ACK",
            Opcode::EpRequest => "EP_REQUEST",
            Opcode::EpResponse => "EP_RESPONSE",
            Opcode::Sack => "SACK",
            Opcode::Nack => "NACK",
            Opcode::Probe => "PROBE",
            Opcode::SendFirst => "SEND_FIRST",
            Opcode::SendMiddle => "SEND_MIDDLE",
            Opcode::SendLast => "SEND_LAST",
            Opcode::SendLastImm => "SEND_LAST_IMM",
            Opcode::SendOnly => "SEND_ONLY",
            Opcode::SendOnlyImm => "SEND_ONLY_IMM",
            Opcode::ReadRequest => "READ_REQUEST",
            Opcode::ReadResponseFirst => "READ_RESPONSE_FIRST",
            Opcode::ReadResponseMiddle => "READ_RESPONSE_MIDDLE",
            Opcode::ReadResponseLast => "READ_RESPONSE_LAST",
            Opcode::ReadResponseOnly => "READ_RESPONSE_ONLY",
        }
    }

    /// The opcode whose [`name`](Self::name) is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u8_covers_exactly_the_table() {
        let known: Vec<u8> = (0..=255u8)
            .filter(|&v| Opcode::from_u8(v).is_some())
            .collect();
        assert_eq!(known.len(), 23);
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert_eq!(Opcode::from_name(op.name()), Some(op));
        }
        assert_eq!(Opcode::WriteOnlyImm as u8, 0xCB);
        assert_eq!(Opcode::SendOnlyImm as u8, 0xE5);
        assert_eq!(Opcode::ReadResponseOnly as u8, 0xEC);
        assert_eq!(Opcode::from_u8(0xCC), None);
        assert_eq!(Opcode::from_u8(0x04), None);
    }

    #[test]
    fn data_is_the_inverse_of_kind_position_imm() {
        for op in Opcode::ALL {
            match op.position() {
                Some(pos) => assert_eq!(Opcode::data(op.kind(), pos, op.has_imm()), Some(op)),
                None => {
                    assert!(!op.is_data() && !op.has_imm() && !op.is_extension());
                    for pos in [
                        Position::First,
                        Position::Middle,
                        Position::Last,
                        Position::Only,
                    ] {
                        assert_eq!(Opcode::data(op.kind(), pos, false), None);
                    }
                }
            }
        }
        assert_eq!(Opcode::data(OpKind::Write, Position::First, true), None);
        assert_eq!(
            Opcode::data(OpKind::ReadRequest, Position::Last, false),
            None
        );
        assert_eq!(
            Opcode::data(OpKind::ReadResponse, Position::Only, true),
            None
        );
        assert_eq!(Opcode::ReadRequest.position(), Some(Position::Only));
        assert!(Opcode::ReadRequest.is_data());
    }
}
