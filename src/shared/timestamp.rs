//! Timestamps on the wire: unix seconds or RFC 3339 with an offset in, ISO 8601 UTC (`2026-11-25T10:00:00Z`) out.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// Why a timestamp string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// The string was empty.
    #[error("timestamp is empty")]
    Empty,
    /// Digits that do not fit a unix timestamp.
    #[error("timestamp `{0}` is out of range")]
    OutOfRange(String),
    /// Neither unix seconds nor RFC 3339 with an offset.
    #[error(
        "timestamp `{0}` is neither unix seconds (e.g. 1700000000) nor RFC 3339 with an offset (e.g. 2026-11-25T10:00:00Z or 2026-11-25T10:00:00+02:00)"
    )]
    Invalid(String),
}

/// Parses unix seconds (`1700000000`) or RFC 3339 with an offset (`2026-11-25T10:00:00Z`, `…+02:00`) into unix seconds.
pub fn parse_timestamp(input: &str) -> Result<i64, TimestampError> {
    if input.is_empty() {
        return Err(TimestampError::Empty);
    }
    if input.bytes().all(|b| b.is_ascii_digit()) {
        // At most 11 digits (year 5138), as the API document says.
        if input.len() > 11 {
            return Err(TimestampError::OutOfRange(input.to_string()));
        }
        let secs: i64 = input
            .parse()
            .map_err(|_| TimestampError::OutOfRange(input.to_string()))?;
        // Only accept what can also be formatted back as a date.
        if OffsetDateTime::from_unix_timestamp(secs).is_err() {
            return Err(TimestampError::OutOfRange(input.to_string()));
        }
        return Ok(secs);
    }
    OffsetDateTime::parse(input, &Rfc3339)
        .map(OffsetDateTime::unix_timestamp)
        .map_err(|_| TimestampError::Invalid(input.to_string()))
}

/// Formats unix seconds as ISO 8601 UTC, e.g. `2026-11-25T10:00:00Z`.
///
/// Values outside the years 0000–9999 are clamped to that range so the output always has
/// the fixed RFC 3339 shape.
pub fn format_rfc3339_utc(unix: i64) -> String {
    // 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
    const MIN: i64 = -62_167_219_200;
    const MAX: i64 = 253_402_300_799;
    let format = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::from_unix_timestamp(unix.clamp(MIN, MAX))
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// The current time in unix seconds.
pub fn now_unix() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_seconds() {
        assert_eq!(parse_timestamp("1700000000"), Ok(1_700_000_000));
        assert_eq!(parse_timestamp("0"), Ok(0));
    }

    #[test]
    fn parses_rfc3339_with_offset() {
        assert_eq!(parse_timestamp("2026-11-25T10:00:00Z"), Ok(1_795_600_800));
        assert_eq!(
            parse_timestamp("2026-11-25T10:00:00+02:00"),
            Ok(1_795_600_800 - 7200)
        );
        assert_eq!(
            parse_timestamp("2026-11-25T10:00:00.5-01:30"),
            Ok(1_795_600_800 + 5400)
        );
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Ok(0));
    }

    #[test]
    fn rejects_bad_timestamps() {
        assert_eq!(parse_timestamp(""), Err(TimestampError::Empty));
        for text in [
            "2026-11-25T10:00:00",
            "2026-11-25",
            "2026-11-25 10:00:00",
            "yesterday",
            "-1",
            " 1700000000",
            "1700000000 ",
            "1.5",
            "2026-13-25T10:00:00Z",
        ] {
            assert!(
                matches!(parse_timestamp(text), Err(TimestampError::Invalid(_))),
                "{text:?}"
            );
        }
        for text in ["99999999999999999999", "9999999999999999"] {
            assert!(
                matches!(parse_timestamp(text), Err(TimestampError::OutOfRange(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn formats_utc() {
        assert_eq!(format_rfc3339_utc(1_795_600_800), "2026-11-25T10:00:00Z");
        assert_eq!(format_rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339_utc(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(format_rfc3339_utc(i64::MIN), "0000-01-01T00:00:00Z");
    }

    #[test]
    fn format_and_parse_round_trip() {
        for secs in [0i64, 1_700_000_000, 1_795_600_800] {
            assert_eq!(parse_timestamp(&format_rfc3339_utc(secs)), Ok(secs));
        }
    }

    #[test]
    fn now_is_after_2024() {
        assert!(now_unix() > 1_704_067_200);
    }
}
