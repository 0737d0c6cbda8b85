//! From an experiment's lines to the published per-percent columns, as the artifact's
//! `experiments/analysis/merge_*_discrete.py` compute them with pandas, and the number
//! formats those files are written in.

use crate::engine::Line;

/// Columns 0..=130: the merge scripts' `range(0, 131, 1)`, whatever the inflation.
pub const COLUMNS: usize = 131;

/// Python's `round(x, 2)`: correctly rounded from the exact binary value, ties to even.
pub fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// Python's `repr` of a float, as pandas writes floats to CSV (`2.0`, `91.53`, `1e-05`).
pub fn py_repr(x: f64) -> String {
    if x.is_nan() {
        return String::new();
    }
    let s = format!("{x:?}");
    let Some((mant, exp)) = s.split_once('e') else {
        return s;
    };
    let e: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&e) {
        // Python writes these positionally.
        let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
        let neg = mant.starts_with('-');
        let int_len = mant.trim_start_matches('-').find('.').unwrap_or(mant.len()) as i32;
        let point = int_len + e;
        let body = if point <= 0 {
            format!(
                "0.{}{}",
                "0".repeat((-point) as usize),
                digits.trim_end_matches('0')
            )
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        return if neg { format!("-{body}") } else { body };
    }
    let mant = mant.strip_suffix(".0").unwrap_or(mant);
    format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// numpy's pairwise summation (`pairwise_sum` in `loops_utils.h`).
fn pairwise(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res += x;
        }
        res
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let full = n - n % 8;
        let mut i = 8;
        while i < full {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[full..] {
            res += x;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(&a[..n2]) + pairwise(&a[n2..])
    }
}

/// `Series.mean()`: numpy's `add.reduce` (the first value, plus the pairwise sum of the
/// rest), divided by the count.
pub fn mean(a: &[f64]) -> f64 {
    match a.split_first() {
        None => f64::NAN,
        Some((first, rest)) => (first + pairwise(rest)) / a.len() as f64,
    }
}

/// For each column, the values of the lines whose rounded arrival is the column, else
/// of those within ±1, in line order (`merge_alloc_discrete.py:112-118`).
fn by_column(arrive: &[f64], values: &[f64], reduce: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(COLUMNS);
    let mut buf = Vec::new();
    for c in 0..COLUMNS {
        let c = c as f64;
        buf.clear();
        buf.extend(
            arrive
                .iter()
                .zip(values)
                .filter(|(a, _)| **a == c)
                .map(|(_, v)| *v),
        );
        if buf.is_empty() {
            buf.extend(
                arrive
                    .iter()
                    .zip(values)
                    .filter(|(a, _)| **a >= c - 1.0 && **a <= c + 1.0)
                    .map(|(_, v)| *v),
            );
        }
        out.push(if buf.is_empty() {
            f64::NAN
        } else {
            reduce(&buf)
        });
    }
    out
}

fn arrive(lines: &[Line], total_gpus: i64) -> Vec<f64> {
    let t = total_gpus as f64;
    lines
        .iter()
        .map(|l| (l.arrived as f64 / t / 10.0).round_ties_even())
        .collect()
}

/// The GPU allocation ratio (%) per percent of arrived workload; NaN where no line is.
pub fn allocation(lines: &[Line], total_gpus: i64) -> Vec<f64> {
    let t = total_gpus as f64;
    let alloc: Vec<f64> = lines
        .iter()
        .map(|l| round2(l.used as f64 / t / 10.0))
        .collect();
    by_column(&arrive(lines, total_gpus), &alloc, |v| round2(mean(v)))
}

/// The fragment amount as % of the cluster's GPUs (`merge_frag_discrete.py`): from the
/// logged `%.2f` amount.
pub fn frag_amount(lines: &[Line], total_gpus: i64) -> Vec<f64> {
    let t = total_gpus as f64;
    let milli: Vec<f64> = lines.iter().map(|l| round2(l.frag)).collect();
    by_column(&arrive(lines, total_gpus), &milli, |v| {
        round2(100.0 * mean(v) / 1000.0 / t)
    })
}

/// The fragment as % of idle GPU (`merge_frag_ratio_discrete.py`): the mean of the
/// logged `%.2f%%` ratio, unrounded.
pub fn frag_ratio(lines: &[Line], total_gpus: i64) -> Vec<f64> {
    let ratio: Vec<f64> = lines
        .iter()
        .map(|l| round2(100.0 * l.frag / l.idle))
        .collect();
    by_column(&arrive(lines, total_gpus), &ratio, mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_number_formats() {
        assert_eq!(py_repr(2.0), "2.0");
        assert_eq!(py_repr(91.53), "91.53");
        assert_eq!(py_repr(0.0), "0.0");
        assert_eq!(py_repr(1e-5), "1e-05");
        assert_eq!(py_repr(0.0001), "0.0001");
        assert_eq!(py_repr(5.60642857142857), "5.60642857142857");
        assert_eq!(py_repr(1e16), "1e+16");
        assert_eq!(py_repr(f64::NAN), "");
        // round(x, 2) on the exact binary value, ties to even.
        assert_eq!(round2(0.125), 0.12);
        assert_eq!(round2(0.375), 0.38);
        assert_eq!(round2(2.675), 2.67, "2.675 is 2.67499999... in binary");
        assert_eq!(round2(91.525000001), 91.53);
    }

    #[test]
    fn numpy_mean() {
        let v: Vec<f64> = (0..300).map(|i| i as f64 * 0.01 + 0.1).collect();
        let m = mean(&v);
        assert!((m - (0.1 + 2.99 / 2.0)).abs() < 1e-12);
        assert_eq!(mean(&[1.0, 2.0]), 1.5);
        assert!(mean(&[]).is_nan());
    }

    #[test]
    fn columns_fall_back_to_neighbours() {
        // total 1 GPU: arrival 0.5% -> column round(0.5)=0 (ties to even), 1.5% -> 2.
        let line = |arrived, used| Line {
            arrived,
            used,
            frag: 0.0,
            idle: 1.0,
            failed: false,
        };
        let lines = [line(5, 5), line(15, 10), line(40, 20)];
        let a = allocation(&lines, 1);
        assert_eq!(a[0], 0.5);
        assert_eq!(
            a[1],
            round2(mean(&[0.5, 1.0])),
            "no line at 1: lines at 0 and 2"
        );
        assert_eq!(a[2], 1.0);
        assert_eq!(a[3], 1.5, "no line at 3: the lines at 2 and 4");
        assert_eq!(a[4], 2.0);
        assert!(a[6].is_nan());
    }
}
