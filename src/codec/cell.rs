//! `CL.THROTTLE`'s state, laid out as redis-cell lays it out, so that the
//! two modules can take over each other's keys: the TAT as a decimal,
//! non-negative number of nanoseconds since the Unix epoch, with no tag.

use super::{Kind, StateError};

/// Reads redis-cell's state: the TAT in nanoseconds. A value holding an
/// RL.* state is [`StateError::OtherKind`]; any other value that is not
/// digits only (no sign, no spaces) up to `i64::MAX` is
/// [`StateError::Foreign`].
pub fn decode_cell_state(value: &[u8]) -> Result<i64, StateError> {
    if let Some(kind) = Kind::of(value) {
        return Err(StateError::OtherKind(kind));
    }
    if value.is_empty() {
        return Err(StateError::Foreign);
    }
    value
        .iter()
        .try_fold(0i64, |acc, &b| {
            if !b.is_ascii_digit() {
                return None;
            }
            acc.checked_mul(10)?.checked_add(i64::from(b - b'0'))
        })
        .ok_or(StateError::Foreign)
}

/// Writes redis-cell's state: the TAT in nanoseconds, in decimal.
pub fn encode_cell_state(tat_ns: i64) -> Vec<u8> {
    tat_ns.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_decoding() {
        assert_eq!(
            decode_cell_state(b"1700000000000000000"),
            Ok(1_700_000_000_000_000_000)
        );
        assert_eq!(decode_cell_state(b"-5"), Err(StateError::Foreign));
        assert_eq!(decode_cell_state(b"abc"), Err(StateError::Foreign));
        assert_eq!(decode_cell_state(b""), Err(StateError::Foreign));
        assert_eq!(
            decode_cell_state(&[0xA1, 0]),
            Err(StateError::OtherKind(Kind::Gcra))
        );
    }

    #[test]
    fn state_round_trips_up_to_i64_max() {
        for tat in [0, 7, 1_700_000_000_000_000_000, i64::MAX] {
            assert_eq!(decode_cell_state(&encode_cell_state(tat)), Ok(tat));
        }
        assert_eq!(encode_cell_state(1_002_000_000_000), b"1002000000000");
        assert_eq!(decode_cell_state(b"007"), Ok(7));
        assert_eq!(
            decode_cell_state(b"9223372036854775808"),
            Err(StateError::Foreign)
        );
        assert_eq!(decode_cell_state(b" 1"), Err(StateError::Foreign));
        assert_eq!(decode_cell_state(b"+1"), Err(StateError::Foreign));
    }
}
