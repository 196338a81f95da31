//! The penalty box's layout: a key in a block holds `TAG, end_us: u64`
//! (little-endian, the instant the block ends on the limiter clock), then
//! the limit's own state as it would be stored alone (nothing: no state).
//! A key that never began a block keeps its limit's layout unchanged.

use super::{le_u64, Bytes};
use crate::algorithm::Micros;

/// The tag of a key in the penalty box (see the tag table in `codec`).
pub const TAG: u8 = 0xB3;
/// The header's length: what the limit's state is shifted by.
pub const HEADER: usize = 9;

/// Whether `value` starts with the penalty box's header.
pub fn is_boxed(value: &[u8]) -> bool {
    value.first() == Some(&TAG)
}

/// The end of the block of a boxed `value`, and the limit's state after
/// the header (`None`: none); `None` for a header cut short.
pub fn decode(value: &[u8]) -> Option<(Micros, Option<&[u8]>)> {
    if !is_boxed(value) {
        return None;
    }
    let end = Micros::new(le_u64(value, 1)?);
    let inner = &value[HEADER..];
    Some((end, (!inner.is_empty()).then_some(inner)))
}

/// A block ending at `end` before the limit's state `inner`.
pub fn encode(end: Micros, inner: Option<&[u8]>) -> Bytes {
    let inner = inner.unwrap_or_default();
    let mut value = Bytes::with_capacity(HEADER + inner.len());
    value.push(TAG);
    value.extend_from_slice(&end.as_u64().to_le_bytes());
    value.extend_from_slice(inner);
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Kind;

    #[test]
    fn a_block_round_trips_and_is_no_limit_s_state() {
        let end = Micros::new(123_456_789);
        let v = encode(end, Some(&[0xA1, 1, 2]));
        assert_eq!(decode(&v), Some((end, Some(&[0xA1, 1, 2][..]))));
        assert_eq!(decode(&encode(end, None)), Some((end, None)));
        assert_eq!(Kind::of(&v), None, "no limit reads it as its own");
        assert!(std::str::from_utf8(&[TAG]).is_err());
        assert_eq!(decode(&[TAG, 1, 2]), None);
        assert_eq!(decode(&[0xA1; 9]), None);
    }
}
