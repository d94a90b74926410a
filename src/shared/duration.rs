//! Short durations (`45s`, `1h30m`, `600`) and `H:MM:SS` ages: parsing, formatting and the GC body's `keep_fork_for` value.
//!
//! Not `humantime`: the API's grammar (whole seconds, or `d`/`h`/`m`/`s` largest first) is
//! narrower than its, which takes `500ms`, `1 h` and repeated units the spec answers 400 to.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// Why a duration or age string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string was empty.
    #[error("duration is empty")]
    Empty,
    /// The string started with a minus sign.
    #[error("duration `{0}` must not be negative")]
    Negative(String),
    /// A unit letter was not one of `d`, `h`, `m`, `s`.
    #[error("duration `{input}` has unknown unit `{unit}` (allowed: d, h, m, s)")]
    UnknownUnit {
        /// The whole duration as given.
        input: String,
        /// The unrecognised unit.
        unit: String,
    },
    /// A unit had no number before it, or a number had no unit after it.
    #[error(
        "duration `{0}` is malformed: use a number of seconds (`600`) or numbers with units, e.g. `45s`, `10m`, `2h`, `1d`, `1h30m`"
    )]
    Malformed(String),
    /// Units were repeated or not in descending order (`30m1h`, `1m1m`).
    #[error("duration `{0}` must give each unit at most once, largest first (e.g. `1h30m`)")]
    UnitOrder(String),
    /// The value does not fit in 64-bit seconds.
    #[error("duration `{0}` is too large")]
    Overflow(String),
    /// An age was not in `H:MM:SS` form.
    #[error("age `{0}` is not in H:MM:SS form (minutes and seconds two digits, below 60)")]
    InvalidAge(String),
}

/// Parses `45s`, `10m`, `2h`, `1d`, combinations such as `1h30m`, or a plain number of seconds (`600`).
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    if input.starts_with('-') {
        return Err(DurationError::Negative(input.to_string()));
    }
    let overflow = || DurationError::Overflow(input.to_string());
    if input.bytes().all(|b| b.is_ascii_digit()) {
        if input.len() > MAX_SECONDS_DIGITS {
            return Err(overflow());
        }
        return input
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| overflow());
    }

    let mut total: u64 = 0;
    // Rank of the last unit seen (d=4 … s=1); each next unit must rank strictly lower.
    let mut last_rank = u8::MAX;
    let mut rest = input;
    while !rest.is_empty() {
        let digits_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_len == 0 || digits_len == rest.len() {
            return Err(DurationError::Malformed(input.to_string()));
        }
        let (digits, after) = rest.split_at(digits_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let (rank, seconds_per_unit) = match unit {
            "d" => (4, 86_400),
            "h" => (3, 3_600),
            "m" => (2, 60),
            "s" => (1, 1),
            _ => {
                return Err(DurationError::UnknownUnit {
                    input: input.to_string(),
                    unit: unit.to_string(),
                });
            }
        };
        if rank >= last_rank {
            return Err(DurationError::UnitOrder(input.to_string()));
        }
        last_rank = rank;
        if digits.len() > MAX_UNIT_DIGITS {
            return Err(overflow());
        }
        let amount: u64 = digits.parse().map_err(|_| overflow())?;
        total = amount
            .checked_mul(seconds_per_unit)
            .and_then(|secs| total.checked_add(secs))
            .ok_or_else(overflow)?;
        rest = next;
    }
    Ok(Duration::from_secs(total))
}

/// Formats whole seconds with the largest units first (600 s → `10m`, 5400 s → `1h30m`, 45 s → `45s`, 0 → `0s`).
pub fn format_duration_short(duration: Duration) -> String {
    let mut secs = duration.as_secs();
    if secs == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let amount = secs / size;
        if amount > 0 {
            out.push_str(&amount.to_string());
            out.push_str(unit);
            secs %= size;
        }
    }
    out
}

/// Formats an age in seconds as `H:MM:SS` with unbounded hours (`0:00:05`, `1:02:03`, `123:00:00`).
pub fn format_age(secs: u64) -> String {
    format!("{}:{:02}:{:02}", secs / 3600, (secs / 60) % 60, secs % 60)
}

/// Parses an `H:MM:SS` age back into seconds.
pub fn parse_age(input: &str) -> Result<u64, DurationError> {
    let invalid = || DurationError::InvalidAge(input.to_string());
    let mut parts = input.split(':');
    let (Some(hours), Some(minutes), Some(seconds), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(hours)
        || !all_digits(minutes)
        || !all_digits(seconds)
        || minutes.len() != 2
        || seconds.len() != 2
    {
        return Err(invalid());
    }
    let hours: u64 = hours
        .parse()
        .map_err(|_| DurationError::Overflow(input.to_string()))?;
    let minutes: u64 = minutes.parse().map_err(|_| invalid())?;
    let seconds: u64 = seconds.parse().map_err(|_| invalid())?;
    if minutes >= 60 || seconds >= 60 {
        return Err(invalid());
    }
    hours
        .checked_mul(3600)
        .and_then(|h| h.checked_add(minutes * 60 + seconds))
        .ok_or_else(|| DurationError::Overflow(input.to_string()))
}

/// Digits of a bare number of seconds, and of each number before a unit: the bounds the API
/// document's pattern states (well inside `u64` seconds).
const MAX_SECONDS_DIGITS: usize = 18;
const MAX_UNIT_DIGITS: usize = 12;

/// The text form's syntax, as the API document states it.
pub const DURATION_PATTERN: &str = "^([0-9]{1,18}|[0-9]{1,12}d([0-9]{1,12}h)?([0-9]{1,12}m)?([0-9]{1,12}s)?|[0-9]{1,12}h([0-9]{1,12}m)?([0-9]{1,12}s)?|[0-9]{1,12}m([0-9]{1,12}s)?|[0-9]{1,12}s)$";

/// A duration as given in a JSON body: either a string such as `"10m"` or an integer number of seconds such as `600`.
// The original form is kept so it can be echoed back; `to_duration` checks and converts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum DurationValue {
    /// Duration text: `45s`, `10m`, `2h`, `1d`, `1h30m` or digits meaning seconds.
    Text(String),
    /// Whole seconds.
    Seconds(u64),
}

impl DurationValue {
    /// Converts to a `Duration`, failing when the text form does not parse or the number is
    /// above the document's maximum (`i64::MAX` seconds).
    pub fn to_duration(&self) -> Result<Duration, DurationError> {
        match self {
            DurationValue::Text(text) => parse_duration(text),
            DurationValue::Seconds(secs) if i64::try_from(*secs).is_err() => {
                Err(DurationError::Overflow(secs.to_string()))
            }
            DurationValue::Seconds(secs) => Ok(Duration::from_secs(*secs)),
        }
    }
}

impl utoipa::PartialSchema for DurationValue {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        let text = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Duration text: `45s`, `10m`, `2h`, `1d`, `1h30m` (units in that order) or digits meaning seconds.",
            ))
            .pattern(Some(DURATION_PATTERN));
        let seconds = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Int64,
            )))
            .description(Some("Whole seconds."))
            .minimum(Some(0));
        OneOfBuilder::new().item(text).item(seconds).into()
    }
}

impl utoipa::ToSchema for DurationValue {}

impl fmt::Display for DurationValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationValue::Text(text) => f.write_str(text),
            DurationValue::Seconds(secs) => write!(f, "{secs}"),
        }
    }
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = DurationValue;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration string such as \"10m\" or a non-negative integer of seconds",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationValue, E> {
                Ok(DurationValue::Text(v.to_string()))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<DurationValue, E> {
                Ok(DurationValue::Text(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationValue, E> {
                Ok(DurationValue::Seconds(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationValue, E> {
                u64::try_from(v)
                    .map(DurationValue::Seconds)
                    .map_err(|_| E::custom(format!("duration `{v}` must not be negative")))
            }
        }

        deserializer.deserialize_any(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> u64 {
        match parse_duration(text) {
            Ok(d) => d.as_secs(),
            Err(e) => panic!("`{text}` should parse: {e}"),
        }
    }

    #[test]
    fn parses_single_units() {
        assert_eq!(secs("45s"), 45);
        assert_eq!(secs("10m"), 600);
        assert_eq!(secs("2h"), 7200);
        assert_eq!(secs("1d"), 86_400);
        assert_eq!(secs("0s"), 0);
    }

    #[test]
    fn parses_combinations_and_plain_seconds() {
        assert_eq!(secs("1h30m"), 5400);
        assert_eq!(secs("1d2h3m4s"), 93_784);
        assert_eq!(secs("2h5s"), 7205);
        assert_eq!(secs("600"), 600);
        assert_eq!(secs("0"), 0);
    }

    #[test]
    fn rejects_bad_durations() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration("-5"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("-10m"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("10x"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("10ms"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("10M"),
            Err(DurationError::UnknownUnit { .. })
        ));
        for text in ["m10", "m", "1h30", "h1", " 10m", "10m ", "1.5h", "+5"] {
            assert!(parse_duration(text).is_err(), "{text:?}");
        }
        assert!(matches!(
            parse_duration("30m1h"),
            Err(DurationError::UnitOrder(_))
        ));
        assert!(matches!(
            parse_duration("1m1m"),
            Err(DurationError::UnitOrder(_))
        ));
    }

    #[test]
    fn rejects_overflow() {
        for text in [
            "99999999999999999999",
            "99999999999999999999s",
            "300000000000000d",
            "5124095576030431h1m",
        ] {
            assert!(
                matches!(parse_duration(text), Err(DurationError::Overflow(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn unknown_unit_message_lists_allowed_units() {
        let message = parse_duration("10x").expect_err("invalid").to_string();
        assert!(message.contains("`x`"), "{message}");
        assert!(message.contains("d, h, m, s"), "{message}");
    }

    #[test]
    fn formats_short_durations() {
        assert_eq!(format_duration_short(Duration::from_secs(600)), "10m");
        assert_eq!(format_duration_short(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration_short(Duration::from_secs(45)), "45s");
        assert_eq!(format_duration_short(Duration::from_secs(0)), "0s");
        assert_eq!(
            format_duration_short(Duration::from_secs(90_061)),
            "1d1h1m1s"
        );
        assert_eq!(format_duration_short(Duration::from_millis(1500)), "1s");
        for n in [1u64, 59, 60, 3599, 3600, 86_399, 86_400, 1_000_000] {
            let text = format_duration_short(Duration::from_secs(n));
            assert_eq!(secs(&text), n, "{text}");
        }
    }

    #[test]
    fn formats_ages() {
        assert_eq!(format_age(5), "0:00:05");
        assert_eq!(format_age(3723), "1:02:03");
        assert_eq!(format_age(123 * 3600), "123:00:00");
        assert_eq!(format_age(0), "0:00:00");
    }

    #[test]
    fn parses_ages() {
        assert_eq!(parse_age("0:00:05"), Ok(5));
        assert_eq!(parse_age("1:02:03"), Ok(3723));
        assert_eq!(parse_age("123:00:00"), Ok(123 * 3600));
        assert_eq!(parse_age("01:00:00"), Ok(3600));
        for n in [0u64, 59, 3599, 3600, 1_000_000] {
            assert_eq!(parse_age(&format_age(n)), Ok(n));
        }
    }

    #[test]
    fn rejects_bad_ages() {
        for text in [
            "",
            "1:60:00",
            "1:00:60",
            "1:2:3",
            "1:02",
            "1:02:03:04",
            ":02:03",
            "a:02:03",
            "1:0a:03",
            "1:02:03 ",
            "-1:02:03",
            "1:+2:03",
        ] {
            assert!(
                matches!(parse_age(text), Err(DurationError::InvalidAge(_))),
                "{text:?}"
            );
        }
        assert!(matches!(
            parse_age("99999999999999999999:00:00"),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn duration_value_accepts_string_or_integer() {
        let text: DurationValue = serde_json::from_str("\"10m\"").expect("string form");
        assert_eq!(text, DurationValue::Text("10m".to_string()));
        assert_eq!(text.to_duration(), Ok(Duration::from_secs(600)));
        assert_eq!(serde_json::to_string(&text).expect("serialize"), "\"10m\"");

        let number: DurationValue = serde_json::from_str("600").expect("integer form");
        assert_eq!(number, DurationValue::Seconds(600));
        assert_eq!(number.to_duration(), Ok(Duration::from_secs(600)));
        assert_eq!(serde_json::to_string(&number).expect("serialize"), "600");
    }

    #[test]
    fn duration_value_rejects_wrong_types_and_bad_text() {
        assert!(serde_json::from_str::<DurationValue>("-5").is_err());
        assert!(serde_json::from_str::<DurationValue>("1.5").is_err());
        assert!(serde_json::from_str::<DurationValue>("true").is_err());
        assert!(serde_json::from_str::<DurationValue>("[1]").is_err());
        let bad: DurationValue = serde_json::from_str("\"10x\"").expect("any string parses");
        assert!(bad.to_duration().is_err());
    }
}
