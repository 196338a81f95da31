//! The module's version, from the crate's: `MODULE LIST` reports it as one
//! number, `INFO ratelimit` as text.

/// The crate version, e.g. `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version as Redis modules number theirs: major * 10000 + minor * 100
/// + patch (0.1.0 is 100, 1.2.3 is 10203).
pub const VERSION_NUMBER: i32 = number(
    env!("CARGO_PKG_VERSION_MAJOR"),
    env!("CARGO_PKG_VERSION_MINOR"),
    env!("CARGO_PKG_VERSION_PATCH"),
);

const fn number(major: &str, minor: &str, patch: &str) -> i32 {
    let (minor, patch) = (decimal(minor), decimal(patch));
    // Two digits each for minor and patch, or the number would be ambiguous.
    assert!(
        minor < 100 && patch < 100,
        "minor and patch must be below 100"
    );
    decimal(major) * 10_000 + minor * 100 + patch
}

/// A version component (ASCII digits) as a number; a compile error if not.
const fn decimal(s: &str) -> i32 {
    let bytes = s.as_bytes();
    assert!(!bytes.is_empty(), "empty version component");
    let mut n = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "version component not numeric");
        n = n * 10 + (bytes[i] - b'0') as i32;
        i += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_major_minor_patch() {
        assert_eq!(number("0", "1", "0"), 100);
        assert_eq!(number("1", "2", "3"), 10_203);
        assert_eq!(number("12", "34", "56"), 123_456);
    }

    #[test]
    fn the_crate_version_matches_its_number() {
        let parts: Vec<i32> = VERSION.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(
            VERSION_NUMBER,
            parts[0] * 10_000 + parts[1] * 100 + parts[2]
        );
    }
}
