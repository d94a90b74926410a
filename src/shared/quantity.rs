//! Kubernetes resource quantities (`500m`, `512Mi`, `1e3`): exact parsing and the formatting helpers.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string was empty.
    #[error("quantity is empty")]
    Empty,
    /// The string contained whitespace somewhere.
    #[error("quantity `{0}` must not contain whitespace")]
    Whitespace(String),
    /// The string started with a minus sign.
    #[error("quantity `{0}` must not be negative")]
    Negative(String),
    /// The numeric part was missing or malformed.
    #[error("quantity `{0}` must start with a number such as `1`, `0.5` or `250`")]
    InvalidNumber(String),
    /// The text after the number is not a known suffix.
    #[error(
        "quantity `{input}` has unknown suffix `{suffix}` (allowed: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
    )]
    UnknownSuffix {
        /// The whole quantity as given.
        input: String,
        /// The unrecognised suffix.
        suffix: String,
    },
    /// More digits than the API document's pattern allows.
    #[error(
        "quantity `{0}` has too many digits: at most 15 before the point (6 with T, P, E, Ti, Pi or Ei) and 6 after it"
    )]
    TooManyDigits(String),
    /// The value does not fit in 128 bits of milli-units.
    #[error("quantity `{0}` is too large")]
    Overflow(String),
}

/// A parsed, non-negative Kubernetes resource quantity.
///
/// The value is kept exactly as a count of milli-units (values finer than a milli-unit are
/// rounded up, as Kubernetes does), next to the original text, which is what `Display` and
/// serde write back. Equality and ordering compare the value, so `1` equals `1000m`.
#[derive(Debug, Clone)]
pub struct Quantity {
    millis: u128,
    text: String,
}

/// How the suffix scales the number.
enum Scale {
    /// Multiply by `10^n` (`n` may be negative).
    Decimal(i64),
    /// Multiply by `2^n`.
    Binary(u32),
}

/// Digits before the point (with a suffix up to `G`/`Gi`, or none), with the larger suffixes,
/// and after it: the bounds `formats::QuantityText` documents, well inside 128 bits.
const MAX_INT_DIGITS: usize = 15;
const MAX_BIG_INT_DIGITS: usize = 6;
const MAX_FRAC_DIGITS: usize = 6;

/// Decimal digits that fit into a `u128` power of ten.
const MAX_POW10: i64 = 38;

impl Quantity {
    /// Parses a quantity such as `1`, `0.5`, `250m`, `10M`, `512Mi` or `1e3`.
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        if input.is_empty() {
            return Err(QuantityError::Empty);
        }
        if input.chars().any(char::is_whitespace) {
            return Err(QuantityError::Whitespace(input.to_string()));
        }
        if input.starts_with('-') {
            return Err(QuantityError::Negative(input.to_string()));
        }
        let number_len = input
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(input.len());
        let (number, suffix) = input.split_at(number_len);
        let invalid = || QuantityError::InvalidNumber(input.to_string());
        let overflow = || QuantityError::Overflow(input.to_string());

        let (int_part, frac_part) = match number.split_once('.') {
            Some((int_part, frac_part)) => (int_part, frac_part),
            None => (number, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(invalid());
        }
        let exponent = suffix.starts_with(['e', 'E']) && !matches!(suffix, "E" | "Ei");
        let big = matches!(suffix, "T" | "P" | "E" | "Ti" | "Pi" | "Ei");
        let max_int = if big {
            MAX_BIG_INT_DIGITS
        } else {
            MAX_INT_DIGITS
        };
        if !exponent && (int_part.len() > max_int || frac_part.len() > MAX_FRAC_DIGITS) {
            return Err(QuantityError::TooManyDigits(input.to_string()));
        }
        // Trailing zeros after the point change nothing but would inflate the mantissa.
        let frac_part = frac_part.trim_end_matches('0');
        let mut mantissa: u128 = 0;
        for digit in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(digit - b'0')))
                .ok_or_else(overflow)?;
        }
        let frac_digits = i64::try_from(frac_part.len()).map_err(|_| overflow())?;

        let scale = match suffix {
            "" => Scale::Decimal(0),
            "m" => Scale::Decimal(-3),
            "k" => Scale::Decimal(3),
            "M" => Scale::Decimal(6),
            "G" => Scale::Decimal(9),
            "T" => Scale::Decimal(12),
            "P" => Scale::Decimal(15),
            "E" => Scale::Decimal(18),
            "Ki" => Scale::Binary(10),
            "Mi" => Scale::Binary(20),
            "Gi" => Scale::Binary(30),
            "Ti" => Scale::Binary(40),
            "Pi" => Scale::Binary(50),
            "Ei" => Scale::Binary(60),
            _ => Scale::Decimal(parse_exponent(input, suffix)?),
        };

        let millis = match scale {
            Scale::Decimal(exp) => {
                let power = exp
                    .checked_add(3)
                    .and_then(|p| p.checked_sub(frac_digits))
                    .ok_or_else(overflow)?;
                scale_pow10(mantissa, power).ok_or_else(overflow)?
            }
            Scale::Binary(bits) => {
                let numerator = mantissa
                    .checked_mul(1000)
                    .and_then(|n| n.checked_mul(1u128 << bits))
                    .ok_or_else(overflow)?;
                scale_pow10(numerator, -frac_digits).ok_or_else(overflow)?
            }
        };
        Ok(Quantity {
            millis,
            text: input.to_string(),
        })
    }

    /// The value in milli-units, rounded up (cpu `500m` → 500, `2` → 2000).
    pub fn millis(&self) -> u128 {
        self.millis
    }

    /// The value in whole units, rounded up (memory `512Mi` → 536870912, `10M` → 10000000).
    pub fn value_ceil(&self) -> u128 {
        self.millis.div_ceil(1000)
    }

    /// The original text of the quantity.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Parses the exponent form of a suffix (`e3`, `E-2`, `e+6`).
fn parse_exponent(input: &str, suffix: &str) -> Result<i64, QuantityError> {
    let unknown = || QuantityError::UnknownSuffix {
        input: input.to_string(),
        suffix: suffix.to_string(),
    };
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))
        .ok_or_else(unknown)?;
    let digits = rest
        .strip_prefix('-')
        .or_else(|| rest.strip_prefix('+'))
        .unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unknown());
    }
    rest.parse::<i64>()
        .map_err(|_| QuantityError::Overflow(input.to_string()))
}

/// `value * 10^power`, rounded up when `power` is negative; `None` on overflow.
fn scale_pow10(value: u128, power: i64) -> Option<u128> {
    if value == 0 {
        return Some(0);
    }
    if power >= 0 {
        if power > MAX_POW10 {
            return None;
        }
        let factor = 10u128.checked_pow(u32::try_from(power).ok()?)?;
        value.checked_mul(factor)
    } else if -power > MAX_POW10 {
        // Any u128 divided by 10^39 or more is below one: round up to the smallest unit.
        Some(1)
    } else {
        let divisor = 10u128.checked_pow(u32::try_from(-power).ok()?)?;
        Some(value.div_ceil(divisor))
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.millis == other.millis
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.millis.cmp(&other.millis)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Quantity::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Quantity {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "Kubernetes resource quantity: a number with an optional suffix m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3",
            ))
            .examples(["500m", "512Mi"])
            .into()
    }
}

impl utoipa::ToSchema for Quantity {}

/// Formats millicores as a cpu quantity (`250` → `"250m"`).
pub fn format_cpu_millis(millis: u64) -> String {
    format!("{millis}m")
}

/// Formats a byte count in mebibytes rounded to the nearest one (`12582912` → `"12Mi"`).
pub fn format_mebibytes(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    let mebibytes = bytes / MIB + u64::from(bytes % MIB >= MIB / 2);
    format!("{mebibytes}Mi")
}

/// Formats a byte count with the largest binary suffix that divides it exactly
/// (`1073741824` → `"1Gi"`, 1536 MiB → `"1536Mi"`, `1000` → `"1000"`).
pub fn format_bytes_binary(bytes: u64) -> String {
    const SUFFIXES: [(&str, u32); 6] = [
        ("Ei", 60),
        ("Pi", 50),
        ("Ti", 40),
        ("Gi", 30),
        ("Mi", 20),
        ("Ki", 10),
    ];
    if bytes == 0 {
        return "0".to_string();
    }
    for (suffix, bits) in SUFFIXES {
        let unit = 1u64 << bits;
        if bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(text: &str) -> u128 {
        match Quantity::parse(text) {
            Ok(q) => q.millis(),
            Err(e) => panic!("`{text}` should parse: {e}"),
        }
    }

    fn units(text: &str) -> u128 {
        match Quantity::parse(text) {
            Ok(q) => q.value_ceil(),
            Err(e) => panic!("`{text}` should parse: {e}"),
        }
    }

    #[test]
    fn plain_numbers() {
        assert_eq!(millis("1"), 1000);
        assert_eq!(millis("0"), 0);
        assert_eq!(millis("0.5"), 500);
        assert_eq!(millis("1.5"), 1500);
        assert_eq!(millis(".5"), 500);
        assert_eq!(millis("2."), 2000);
        assert_eq!(millis("007"), 7000);
        assert_eq!(millis("1.250000"), 1250);
    }

    #[test]
    fn decimal_suffixes() {
        assert_eq!(millis("500m"), 500);
        assert_eq!(millis("2"), 2000);
        assert_eq!(units("1k"), 1_000);
        assert_eq!(units("10M"), 10_000_000);
        assert_eq!(units("1G"), 1_000_000_000);
        assert_eq!(units("1T"), 1_000_000_000_000);
        assert_eq!(units("1P"), 1_000_000_000_000_000);
        assert_eq!(units("1E"), 1_000_000_000_000_000_000);
        assert_eq!(units("1.5G"), 1_500_000_000);
    }

    #[test]
    fn binary_suffixes() {
        assert_eq!(units("1Ki"), 1024);
        assert_eq!(units("512Mi"), 536_870_912);
        assert_eq!(units("1Gi"), 1 << 30);
        assert_eq!(units("1.5Gi"), 1_610_612_736);
        assert_eq!(units("1Ti"), 1 << 40);
        assert_eq!(units("1Pi"), 1 << 50);
        assert_eq!(units("2Ei"), 1 << 61);
    }

    #[test]
    fn exponent_form() {
        assert_eq!(units("1e3"), 1000);
        assert_eq!(units("1E3"), 1000);
        assert_eq!(units("1.5e+2"), 150);
        assert_eq!(millis("1e-3"), 1);
        assert_eq!(millis("5e0"), 5000);
    }

    #[test]
    fn rounds_up_below_a_milli_unit() {
        assert_eq!(millis("0.1m"), 1);
        assert_eq!(millis("1.5m"), 2);
        assert_eq!(millis("1e-4"), 1);
        assert_eq!(millis("1e-100"), 1);
        assert_eq!(millis("0e-100"), 0);
        assert_eq!(units("1500m"), 2);
        assert_eq!(units("0.5"), 1);
    }

    #[test]
    fn keeps_original_text() {
        let q = Quantity::parse("512Mi").expect("valid");
        assert_eq!(q.as_str(), "512Mi");
        assert_eq!(q.to_string(), "512Mi");
    }

    #[test]
    fn equality_and_order_follow_the_value() {
        let one = Quantity::parse("1").expect("valid");
        let thousand_milli = Quantity::parse("1000m").expect("valid");
        let two = Quantity::parse("2").expect("valid");
        assert_eq!(one, thousand_milli);
        assert!(one < two);
        assert!(Quantity::parse("1Gi").expect("valid") > Quantity::parse("1G").expect("valid"));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert!(matches!(
            Quantity::parse("-1"),
            Err(QuantityError::Negative(_))
        ));
        assert!(matches!(
            Quantity::parse("-500m"),
            Err(QuantityError::Negative(_))
        ));
        for text in ["1 Gi", " 1", "1\t", "1Gi\n"] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::Whitespace(_))),
                "{text:?}"
            );
        }
        for text in ["Gi", "m", ".", "1.2.3", "+1", "abc"] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::InvalidNumber(_))),
                "{text:?}"
            );
        }
        for text in [
            "1x", "1gi", "1KI", "1mi", "1e", "1E+", "1e3m", "1Gib", "1K", "1ei",
        ] {
            assert!(
                matches!(
                    Quantity::parse(text),
                    Err(QuantityError::UnknownSuffix { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn rejects_more_digits_than_the_document_allows() {
        for text in [
            "1.2500000",
            "1234567890123456",
            "999999999999999999999999999999999999999999",
            "340282366920938463463374607431768211455",
            "1000000Ei",
            "1000000T",
        ] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::TooManyDigits(_))),
                "{text:?}"
            );
        }
        assert_eq!(millis("123456789012345"), 123_456_789_012_345_000);
        assert_eq!(millis("999999Ei"), 999_999 * (1u128 << 60) * 1000);
    }

    #[test]
    fn rejects_overflow() {
        for text in ["1e100", "1e99999999999999999999"] {
            assert!(
                matches!(Quantity::parse(text), Err(QuantityError::Overflow(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn error_messages_name_the_input() {
        let err = Quantity::parse("1x").expect_err("invalid");
        let message = err.to_string();
        assert!(message.contains("`1x`"), "{message}");
        assert!(message.contains("Mi"), "{message}");
    }

    #[test]
    fn serde_uses_the_string_form() {
        let q: Quantity = serde_json::from_str("\"250m\"").expect("valid");
        assert_eq!(q.millis(), 250);
        assert_eq!(serde_json::to_string(&q).expect("serialize"), "\"250m\"");
        assert!(serde_json::from_str::<Quantity>("\"-1\"").is_err());
        assert!(serde_json::from_str::<Quantity>("1").is_err());
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(format_cpu_millis(250), "250m");
        assert_eq!(format_cpu_millis(0), "0m");
        assert_eq!(format_mebibytes(12 * 1024 * 1024), "12Mi");
        assert_eq!(format_mebibytes(12 * 1024 * 1024 + 524_287), "12Mi");
        assert_eq!(format_mebibytes(12 * 1024 * 1024 + 524_288), "13Mi");
        assert_eq!(format_mebibytes(0), "0Mi");
        assert_eq!(format_bytes_binary(1_073_741_824), "1Gi");
        assert_eq!(format_bytes_binary(1536 * 1024 * 1024), "1536Mi");
        assert_eq!(format_bytes_binary(2048), "2Ki");
        assert_eq!(format_bytes_binary(1000), "1000");
        assert_eq!(format_bytes_binary(0), "0");
        assert_eq!(format_bytes_binary(1 << 60), "1Ei");
    }

    #[test]
    fn formatted_values_parse_back() {
        for bytes in [1u64 << 30, 1536 << 20, 12345, 7 << 10] {
            let text = format_bytes_binary(bytes);
            assert_eq!(units(&text), u128::from(bytes), "{text}");
        }
        assert_eq!(millis(&format_cpu_millis(250)), 250);
    }
}
