//! Scores read off a shape of (utilisation, score) points, as upstream's
//! `helper.BuildBrokenLinearFunction`: NodeResourcesFit's RequestedToCapacityRatio and
//! VolumeBinding's storage capacity scoring.

use crate::MAX_NODE_SCORE;

/// Piecewise-linear interpolation over (utilisation, score) points, flat beyond the ends;
/// the shape's scores are the config's 0..=10, scaled to 0..=MAX_NODE_SCORE point by
/// point as upstream scales the shape.
pub(crate) fn broken_linear(shape: &[(i64, i64)], x: i64) -> i64 {
    let scale = |s: i64| s * MAX_NODE_SCORE / 10;
    let Some(&(first_u, first_s)) = shape.first() else {
        return 0;
    };
    if x <= first_u {
        return scale(first_s);
    }
    for pair in shape.windows(2) {
        let ((u0, s0), (u1, s1)) = (pair[0], pair[1]);
        if x <= u1 {
            let (s0, s1) = (scale(s0), scale(s1));
            return s0 + (s1 - s0) * (x - u0) / (u1 - u0).max(1);
        }
    }
    shape.last().map_or(0, |p| scale(p.1))
}

#[cfg(test)]
mod tests {
    use super::broken_linear;

    #[test]
    fn interpolates_between_points_and_is_flat_beyond_them() {
        let shape = [(10, 2), (50, 10), (100, 0)];
        assert_eq!(broken_linear(&shape, 0), 20);
        assert_eq!(broken_linear(&shape, 10), 20);
        assert_eq!(broken_linear(&shape, 30), 60);
        assert_eq!(broken_linear(&shape, 75), 50);
        assert_eq!(broken_linear(&shape, 100), 0);
        assert_eq!(broken_linear(&shape, 150), 0);
        // Integer arithmetic truncates toward zero, as Go's does.
        assert_eq!(broken_linear(&[(0, 0), (3, 1)], 1), 3);
    }
}
