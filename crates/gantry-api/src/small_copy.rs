//! Copying a small inline list of plain values over another, for the hand-written
//! `clone_from`s of the structures copied once per node tried (NodeInfo, the cycle state):
//! `SmallVec::clone_from` clones element by element, and these lists are mostly empty.

use smallvec::{Array, SmallVec};

/// Makes `dst` a copy of `src`, reusing `dst`'s buffer; nothing to do when both are empty.
#[inline]
pub fn copy_into<A: Array>(dst: &mut SmallVec<A>, src: &[A::Item])
where
    A::Item: Copy,
{
    if dst.is_empty() && src.is_empty() {
        return;
    }
    dst.clear();
    dst.extend_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_equals_the_source_whatever_was_there() {
        let mut dst: SmallVec<[u32; 2]> = SmallVec::from_slice(&[7, 8, 9]);
        for src in [&[][..], &[1], &[1, 2], &[1, 2, 3, 4], &[]] {
            copy_into(&mut dst, src);
            assert_eq!(&dst[..], src);
        }
    }
}
