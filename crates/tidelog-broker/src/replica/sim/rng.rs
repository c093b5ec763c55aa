//! The simulation's only source of chance: SplitMix64, so that a seed names one run on
//! every machine and with every dependency version (no crate's algorithm may change it).

pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A whole number in `low..=high`.
    pub(super) fn range(&mut self, low: i64, high: i64) -> i64 {
        let span = u64::try_from(high.saturating_sub(low)).unwrap_or(0);
        let offset = self.next_u64() % span.saturating_add(1);
        low.saturating_add(i64::try_from(offset).unwrap_or(0))
    }

    /// True with probability `per_mille` / 1000.
    pub(super) fn chance(&mut self, per_mille: u64) -> bool {
        self.next_u64() % 1000 < per_mille
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let len = u64::try_from(items.len()).ok()?;
        if len == 0 {
            return None;
        }
        items.get(usize::try_from(self.next_u64() % len).ok()?)
    }
}
