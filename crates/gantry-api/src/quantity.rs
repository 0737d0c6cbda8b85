//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource` parses them and rounded up the same way.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
    )]
    Format(String),
    /// Past what an int64 holds in the unit it is counted in (the second field says).
    #[error("quantity {0:?} is too large: {1}")]
    TooLarge(String, &'static str),
}

/// A parsed quantity: `mantissa × 10^exp10 × 2^exp2`, exactly as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exp10: i32,
    exp2: u32,
}

/// Largest magnitude kept exactly; the apimachinery library caps at 2^63-1 as well.
const LIMIT: i128 = i64::MAX as i128;

impl Quantity {
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let err = || QuantityError::Format(text.to_string());
        // No trimming: kube-apiserver's `ParseQuantity` refuses surrounding whitespace.
        let s = text;
        if s.is_empty() {
            return Err(err());
        }
        let (negative, body) = match s.as_bytes()[0] {
            b'+' => (false, &s[1..]),
            b'-' => (true, &s[1..]),
            _ => (false, s),
        };
        let number_len = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(err());
        }
        let mut mantissa: i128 = 0;
        let mut exp10: i32 = 0;
        for (digits, is_frac) in [(int_part, false), (frac_part, true)] {
            for b in digits.bytes() {
                let d = i128::from(b - b'0');
                if mantissa < 10i128.pow(30) {
                    mantissa = mantissa * 10 + d;
                    if is_frac {
                        exp10 -= 1;
                    }
                } else if !is_frac {
                    // Too many significant digits to keep: keep the magnitude.
                    exp10 += 1;
                }
            }
        }
        let (suffix_exp10, exp2) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            other => {
                let exponent = other
                    .strip_prefix(['e', 'E'])
                    .filter(|e| !e.is_empty())
                    .ok_or_else(err)?;
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err());
                }
                (exponent.parse::<i32>().map_err(|_| err())?, 0)
            }
        };
        Ok(Quantity {
            mantissa: if negative { -mantissa } else { mantissa },
            exp10: exp10.checked_add(suffix_exp10).ok_or_else(err)?,
            exp2,
        })
    }

    /// The value in whole units, rounded up (as `Quantity.Value()`): bytes for memory.
    pub fn value(&self) -> Result<i64, QuantityError> {
        self.scaled_ceil(0)
    }

    /// The value in thousandths, rounded up (as `Quantity.MilliValue()`): millicores for cpu.
    pub fn milli_value(&self) -> Result<i64, QuantityError> {
        self.scaled_ceil(3)
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    /// Whether the value is a whole number of units of `10^-digits` (`0`: whole units,
    /// `3`: thousandths), exactly, with no rounding (upstream compares `AsDec()` with
    /// its rounding). A value too large to tell is not.
    pub fn is_whole_in(&self, digits: i32) -> bool {
        let exp10 = self.exp10.saturating_add(digits);
        if self.mantissa == 0 || exp10 >= 0 {
            return true;
        }
        let Some(base) = 1i128
            .checked_shl(self.exp2)
            .and_then(|f| self.mantissa.checked_mul(f))
        else {
            return false;
        };
        u32::try_from(-i64::from(exp10))
            .ok()
            .and_then(|e| 10i128.checked_pow(e))
            .is_some_and(|divisor| base % divisor == 0)
    }

    fn scaled_ceil(&self, extra_exp10: i32) -> Result<i64, QuantityError> {
        let limit = if extra_exp10 == 0 {
            "at most 9223372036854775807, counted in whole units in an int64"
        } else {
            "at most 9223372036854775.807, counted in thousandths in an int64"
        };
        let too_large = || QuantityError::TooLarge(self.to_string(), limit);
        if self.mantissa == 0 {
            return Ok(0);
        }
        let exp10 = self.exp10 + extra_exp10;
        let base = self
            .mantissa
            .checked_mul(1i128.checked_shl(self.exp2).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
        let value = if exp10 >= 0 {
            let factor = 10i128.checked_pow(exp10 as u32).ok_or_else(too_large)?;
            base.checked_mul(factor).ok_or_else(too_large)?
        } else if -exp10 > 38 {
            // Smaller than any representable unit: rounds up to one unit (or to zero when negative).
            i128::from(base > 0)
        } else {
            let divisor = 10i128.pow((-exp10) as u32);
            let quotient = base / divisor;
            if base % divisor > 0 {
                quotient + 1
            } else {
                quotient
            }
        };
        if value.abs() > LIMIT {
            return Err(too_large());
        }
        Ok(value as i64)
    }
}

/// How apimachinery prints a quantity: the format its text was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// `100m`, `2`, `1500k`.
    DecimalSI,
    /// `1Gi`, `512Mi`.
    BinarySI,
    /// `1e3`.
    DecimalExponent,
}

impl QuantityFormat {
    /// The format of a quantity written as `text` (apimachinery keeps the suffix's kind).
    pub fn of(text: &str) -> QuantityFormat {
        let suffix = text
            .trim()
            .trim_start_matches(['+', '-'])
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        if suffix.ends_with('i') {
            QuantityFormat::BinarySI
        } else if suffix.starts_with(['e', 'E']) {
            QuantityFormat::DecimalExponent
        } else {
            QuantityFormat::DecimalSI
        }
    }

    /// apimachinery's `Quantity.String()` (`CanonicalizeBytes`) for an amount in
    /// thousandths of a unit: the largest suffix that keeps the number whole, binary only
    /// for whole amounts from 1024 on.
    pub fn canonical(self, milli: i64) -> String {
        if milli == 0 {
            return "0".to_string();
        }
        let whole = milli % 1000 == 0;
        if self == QuantityFormat::BinarySI && whole && milli.abs() >= 1024 * 1000 {
            let mut amount = milli / 1000;
            let mut power = 0;
            while amount % 1024 == 0 && power < 6 {
                amount /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return format!("{amount}{suffix}");
        }
        // Decimal: trailing zeros removed, the exponent brought down to a multiple of 3.
        let (mut amount, mut exponent) = (i128::from(milli), -3i32);
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            amount *= 10;
            exponent -= 1;
        }
        let suffix = match (self, exponent) {
            (QuantityFormat::DecimalExponent, 0) => String::new(),
            (QuantityFormat::DecimalExponent, e) => format!("e{e}"),
            (_, -3) => "m".into(),
            (_, 0) => String::new(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{amount}{suffix}")
    }
}

/// The amount as a person would write it, for messages: `9223372036854775808`, `1.5Gi`,
/// `0.001`; the exponent only where the digits would run long (`1e40`).
impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.mantissa < 0 {
            f.write_str("-")?;
        }
        let digits = self.mantissa.unsigned_abs().to_string();
        match self.exp10 {
            0 => f.write_str(&digits)?,
            zeros @ 1..=24 => write!(f, "{digits}{}", "0".repeat(zeros as usize))?,
            fraction @ -40..=-1 => {
                let fraction = fraction.unsigned_abs() as usize;
                let padded = format!("{digits:0>width$}", width = fraction + 1);
                let (whole, decimals) = padded.split_at(padded.len() - fraction);
                write!(f, "{whole}.{decimals}")?;
            }
            exp10 => write!(f, "{digits}e{exp10}")?,
        }
        let binary = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        match binary.get(self.exp2 as usize / 10) {
            Some(suffix) if self.exp2.is_multiple_of(10) => f.write_str(suffix),
            _ => write!(f, "*2^{}", self.exp2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_in_units_or_thousandths_exactly() {
        let whole = |text: &str, digits| Quantity::parse(text).unwrap().is_whole_in(digits);
        for (text, units, thousandths) in [
            ("1", true, true),
            ("1Gi", true, true),
            ("1.5Ki", true, true),
            ("100m", false, true),
            ("1500m", false, true),
            ("10u", false, false),
            ("0.0005", false, false),
            ("2e-3", false, true),
            ("0", true, true),
            ("-250m", false, true),
        ] {
            assert_eq!(
                (whole(text, 0), whole(text, 3)),
                (units, thousandths),
                "{text}"
            );
        }
    }

    fn milli(s: &str) -> i64 {
        Quantity::parse(s).unwrap().milli_value().unwrap()
    }
    fn units(s: &str) -> i64 {
        Quantity::parse(s).unwrap().value().unwrap()
    }

    /// A quantity too large says its amount as written, not the parser's mantissa and
    /// exponent, and in which unit it was counted.
    #[test]
    fn too_large_names_the_amount_as_written() {
        for (text, shown) in [
            ("9223372036854775808", "9223372036854775808"),
            ("9.3e18", "9300000000000000000"),
            ("16Ei", "16Ei"),
            ("9300P", "9300000000000000000"),
            ("1e40", "1e40"),
        ] {
            let err = Quantity::parse(text).unwrap().value().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "quantity {shown:?} is too large: at most 9223372036854775807, counted in whole units in an int64"
                ),
                "{text}"
            );
        }
        let cpu = Quantity::parse("9223372036854775.808").unwrap();
        assert_eq!(
            cpu.milli_value().unwrap_err().to_string(),
            "quantity \"9223372036854775.808\" is too large: at most 9223372036854775.807, counted in thousandths in an int64"
        );
        assert_eq!(Quantity::parse("-0.05").unwrap().to_string(), "-0.05");
        assert_eq!(Quantity::parse("1.5Gi").unwrap().to_string(), "1.5Gi");
        assert_eq!(
            units("9223372036854775807"),
            i64::MAX,
            "int64's largest is taken"
        );
    }

    #[test]
    fn cpu_quantities_in_millicores() {
        for (text, expected) in [
            ("1", 1000),
            ("100m", 100),
            ("0.5", 500),
            (".5", 500),
            ("1.", 1000),
            ("2.0005", 2001), // rounds up to the next millicore
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("500u", 1),
            ("1n", 1),
            ("0", 0),
            ("+3", 3000),
            ("1k", 1_000_000),
        ] {
            assert_eq!(milli(text), expected, "{text}");
        }
    }

    #[test]
    fn memory_quantities_in_bytes() {
        for (text, expected) in [
            ("500Mi", 500 * 1024 * 1024),
            ("32Gi", 32 * 1024 * 1024 * 1024),
            ("1Ki", 1024),
            ("1.5Gi", 1536 * 1024 * 1024),
            ("128974848", 128_974_848),
            ("129e6", 129_000_000),
            ("129M", 129_000_000),
            ("123Mi", 128_974_848),
            ("0.1", 1), // fractions of a byte round up
            ("1Ei", 1 << 60),
        ] {
            assert_eq!(units(text), expected, "{text}");
        }
    }

    #[test]
    fn malformed_quantities_are_errors() {
        for text in [
            "", "abc", "1.2.3", "1Gb", "1 Gi", "--1", "1e", "1e+", "Mi", ".", "1ki", "1e1.5",
        ] {
            assert!(Quantity::parse(text).is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(Quantity::parse("100Ei").unwrap().value().is_err());
        assert!(Quantity::parse("1e30").unwrap().value().is_err());
        assert!(Quantity::parse("1e16").unwrap().milli_value().is_err());
    }

    #[test]
    fn negative_quantities_parse_and_say_so() {
        let q = Quantity::parse("-1").unwrap();
        assert!(q.is_negative());
        assert_eq!(q.milli_value().unwrap(), -1000);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,16}") {
            if let Ok(q) = Quantity::parse(&s) {
                let _ = q.value();
                let _ = q.milli_value();
            }
        }

        #[test]
        fn integer_millicores_round_trip(m in 0i64..10_000_000) {
            proptest::prop_assert_eq!(milli(&format!("{m}m")), m);
            proptest::prop_assert_eq!(units(&format!("{m}Ki")), m * 1024);
        }
    }

    #[test]
    fn canonical_forms_as_apimachinery_prints_them() {
        let c = |text: &str| QuantityFormat::of(text).canonical(milli(text));
        // Cases from apimachinery's quantity_test.go TestQuantityCanonicalizeBytes /
        // TestQuantityString.
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("1500m"), "1500m");
        assert_eq!(c("2000m"), "2");
        assert_eq!(c("1Gi"), "1Gi");
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("1000Mi"), "1000Mi");
        assert_eq!(c("1.5Gi"), "1536Mi");
        assert_eq!(c("1000Ki"), "1000Ki");
        assert_eq!(c("100Ki"), "100Ki");
        assert_eq!(c("1G"), "1G");
        assert_eq!(c("1500k"), "1500k");
        assert_eq!(c("1e3"), "1e3");
        assert_eq!(c("0"), "0");
        assert_eq!(QuantityFormat::BinarySI.canonical(1000 * 1000), "1k");
    }
}
