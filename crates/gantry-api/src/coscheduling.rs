//! PodGroup of scheduler-plugins' Coscheduling (`scheduling.x-k8s.io/v1alpha1`): the gangs
//! of clusters that schedule them with the out-of-tree plugin rather than kube-scheduler's
//! own Workload API. Pods join a group by the label `scheduling.x-k8s.io/pod-group`, in
//! the group's namespace; `minMember` of them must be placed (waiting at Permit) before
//! any is bound.

use crate::{Pod, QuantityFormat, Sym};

/// The label naming a pod's group (`v1alpha1.PodGroupLabel`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// A Coscheduling PodGroup, as the plugin reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoschedulingGroup {
    pub namespace: Sym,
    pub name: Sym,
    /// `spec.minMember` (0 when left out: the CRD's minimum of 1 applies to a given value).
    pub min_member: u32,
    /// `spec.minResources`, by resource name (sorted, as Go prints a map); `None` when
    /// left out (an empty map still asks for `minMember` pod slots).
    pub min_resources: Option<Vec<(String, GoQuantity)>>,
    /// `spec.scheduleTimeoutSeconds`: how long members wait at Permit (the plugin's
    /// `permitWaitingTimeSeconds` when left out).
    pub schedule_timeout_seconds: Option<i32>,
    /// `metadata.creationTimestamp` in seconds: the queue orders groups by it.
    pub created: i64,
}

impl CoschedulingGroup {
    /// `namespace/name`, as the plugin names a group in its messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// A group of `min_member` (a builder for tests).
    pub fn new(namespace: &str, name: &str, min_member: u32) -> CoschedulingGroup {
        CoschedulingGroup {
            namespace: Sym::new(namespace),
            name: Sym::new(name),
            min_member,
            min_resources: None,
            schedule_timeout_seconds: None,
            created: 0,
        }
    }
}

/// The group a pod's label names, if any (`util.GetPodGroupLabel`; an empty value is none).
pub fn group_name(pod: &Pod) -> Option<Sym> {
    // Interned once: every assume, forget and bind of every pod asks.
    static LABEL: std::sync::LazyLock<Sym> = std::sync::LazyLock::new(|| Sym::new(POD_GROUP_LABEL));
    pod.labels
        .get(*LABEL)
        .filter(|name| !name.as_str().is_empty())
}

/// A quantity as apimachinery holds it after `ParseQuantity`'s fast path: an integer
/// `value × 10^scale` in the format it was written in, and whether it kept its text. The
/// plugin prints quantities with Go's `%v`, which shows exactly these fields
/// (`{{8000 -3} {<nil>}  DecimalSI}`), so they are kept as apimachinery keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoQuantity {
    pub value: i64,
    pub scale: i32,
    pub format: QuantityFormat,
    /// The text apimachinery caches when it is already canonical (cleared by arithmetic).
    pub text: Option<String>,
}

impl GoQuantity {
    /// `ParseQuantity`'s fast path (`int64Amount`). `None` for what it leaves to
    /// arbitrary precision (more than 18 digits, binary fractions, scales below nano),
    /// which Gantry does not model.
    pub fn parse(text: &str) -> Option<GoQuantity> {
        if text == "0" {
            return Some(GoQuantity {
                value: 0,
                scale: 0,
                format: QuantityFormat::DecimalSI,
                text: Some(text.to_string()),
            });
        }
        let (positive, body) = match text.as_bytes().first()? {
            b'-' => (false, &text[1..]),
            b'+' => (true, &text[1..]),
            _ => (true, text),
        };
        let body = body.trim_start_matches('0');
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let num_len = digits(body);
        let (num, rest) = body.split_at(num_len);
        let num = if num.is_empty() { "0" } else { num };
        let (denom, suffix) = match rest.strip_prefix('.') {
            Some(after) => after.split_at(digits(after)),
            None => ("", rest),
        };
        let (binary, exponent, format) = match suffix {
            "" => (false, 0, QuantityFormat::DecimalSI),
            "n" => (false, -9, QuantityFormat::DecimalSI),
            "u" => (false, -6, QuantityFormat::DecimalSI),
            "m" => (false, -3, QuantityFormat::DecimalSI),
            "k" => (false, 3, QuantityFormat::DecimalSI),
            "M" => (false, 6, QuantityFormat::DecimalSI),
            "G" => (false, 9, QuantityFormat::DecimalSI),
            "T" => (false, 12, QuantityFormat::DecimalSI),
            "P" => (false, 15, QuantityFormat::DecimalSI),
            "E" => (false, 18, QuantityFormat::DecimalSI),
            "Ki" => (true, 10, QuantityFormat::BinarySI),
            "Mi" => (true, 20, QuantityFormat::BinarySI),
            "Gi" => (true, 30, QuantityFormat::BinarySI),
            "Ti" => (true, 40, QuantityFormat::BinarySI),
            "Pi" => (true, 50, QuantityFormat::BinarySI),
            "Ei" => (true, 60, QuantityFormat::BinarySI),
            other => {
                let exp = other.strip_prefix(['e', 'E'])?;
                (
                    false,
                    exp.parse::<i32>().ok()?,
                    QuantityFormat::DecimalExponent,
                )
            }
        };
        let (mut scale, mantissa, precision) = if binary {
            if !denom.is_empty() {
                return None;
            }
            let precision = 15 - num.len() as i32 - (exponent as f32 * 3.0 / 10.0) as i32 - 1;
            (0, 1i64 << exponent, precision)
        } else {
            (exponent, 1, 18 - (num.len() + denom.len()) as i32)
        };
        if precision < 0 {
            return None;
        }
        scale -= denom.len() as i32;
        if scale < -9 {
            return None;
        }
        let shifted = format!("{num}{denom}");
        let value: i64 = shifted.parse().ok()?;
        let signed = value.checked_mul(mantissa)?;
        let signed = if positive { signed } else { -signed };
        let canonical = if binary {
            exponent % 10 == 0 && value & 0x07 != 0
        } else {
            scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
        };
        Some(GoQuantity {
            value: signed,
            scale,
            format,
            text: canonical.then(|| text.to_string()),
        })
    }

    /// `resource.NewMilliQuantity(milli, format)`.
    pub fn milli(milli: i64, format: QuantityFormat) -> GoQuantity {
        GoQuantity {
            value: milli,
            scale: -3,
            format,
            text: None,
        }
    }

    /// `resource.NewQuantity(value, format)`.
    pub fn whole(value: i64, format: QuantityFormat) -> GoQuantity {
        GoQuantity {
            value,
            scale: 0,
            format,
            text: None,
        }
    }

    /// `Quantity.Sub` on integer amounts (`int64Amount.Add` of the negation: both brought
    /// to the smaller scale). `false` when it would overflow, where apimachinery moves to
    /// arbitrary precision.
    pub fn sub(&mut self, other: &GoQuantity) -> bool {
        self.text = None;
        if self.value == 0 {
            self.format = other.format;
        }
        let Some(negated) = other.value.checked_neg() else {
            return false;
        };
        if negated == 0 {
            return true;
        }
        if self.value == 0 {
            self.value = negated;
            self.scale = other.scale;
            return true;
        }
        let scaled = |value: i64, by: i32| {
            u32::try_from(by)
                .ok()
                .and_then(|by| 10i64.checked_pow(by))
                .and_then(|factor| value.checked_mul(factor))
        };
        let sum = if self.scale == other.scale {
            self.value.checked_add(negated)
        } else if self.scale > other.scale {
            let value = scaled(self.value, self.scale - other.scale);
            self.scale = other.scale;
            value.and_then(|v| v.checked_add(negated))
        } else {
            scaled(negated, other.scale - self.scale).and_then(|v| self.value.checked_add(v))
        };
        match sum {
            Some(value) => {
                self.value = value;
                true
            }
            None => false,
        }
    }

    /// Go's `%v` of the `Quantity` value: `{{value scale} {<nil>} text Format}`.
    pub fn go_debug(&self) -> String {
        let format = match self.format {
            QuantityFormat::DecimalSI => "DecimalSI",
            QuantityFormat::BinarySI => "BinarySI",
            QuantityFormat::DecimalExponent => "DecimalExponent",
        };
        format!(
            "{{{{{} {}}} {{<nil>}} {} {format}}}",
            self.value,
            self.scale,
            self.text.as_deref().unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (i64, i32, QuantityFormat, Option<&str>) {
        let q = GoQuantity::parse(text).unwrap();
        let GoQuantity {
            value,
            scale,
            format,
            text: _,
        } = q.clone();
        (value, scale, format, q.text.map(|_| text))
    }

    /// apimachinery's fast path, case by case (`quantity.go` ParseQuantity).
    #[test]
    fn parses_as_the_fast_path_does() {
        use QuantityFormat::*;
        assert_eq!(parsed("20"), (20, 0, DecimalSI, Some("20")));
        assert_eq!(parsed("100m"), (100, -3, DecimalSI, Some("100m")));
        assert_eq!(parsed("1.5"), (15, -1, DecimalSI, None));
        assert_eq!(parsed("2000"), (2000, 0, DecimalSI, None));
        assert_eq!(parsed("1Gi"), (1 << 30, 0, BinarySI, Some("1Gi")));
        assert_eq!(parsed("8Gi"), (8 << 30, 0, BinarySI, None));
        assert_eq!(parsed("2e3"), (2, 3, DecimalExponent, Some("2e3")));
        assert_eq!(parsed("-3k"), (-3, 3, DecimalSI, Some("-3k")));
        assert_eq!(GoQuantity::parse("1.5Gi"), None);
        assert_eq!(GoQuantity::parse("1234567890123456789"), None);
    }

    /// The recorded gap: 20 cpu less three nodes' 4000m each.
    #[test]
    fn subtraction_keeps_the_smaller_scale_and_prints_as_go() {
        let mut cpu = GoQuantity::parse("20").unwrap();
        assert_eq!(cpu.go_debug(), "{{20 0} {<nil>} 20 DecimalSI}");
        for _ in 0..3 {
            assert!(cpu.sub(&GoQuantity::milli(4000, QuantityFormat::DecimalSI)));
        }
        assert_eq!(cpu.go_debug(), "{{8000 -3} {<nil>}  DecimalSI}");
        let mut memory = GoQuantity::parse("1Gi").unwrap();
        assert!(memory.sub(&GoQuantity::whole(0, QuantityFormat::BinarySI)));
        assert_eq!(memory.go_debug(), "{{1073741824 0} {<nil>}  BinarySI}");
        let mut huge = GoQuantity::parse("9E").unwrap();
        assert!(!huge.sub(&GoQuantity::milli(1, QuantityFormat::DecimalSI)));
    }
}
