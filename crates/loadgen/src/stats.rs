//! Latency samples and their summary statistics: [`Samples`] (a list of
//! measured durations) and [`Summary`] (count, mean, nearest-rank
//! percentiles, max, throughput).

use std::time::Duration;

/// Measured wall times, one per successful iteration, in arrival order.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    durations: Vec<Duration>,
}

/// Summary of a non-empty [`Samples`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub mean: Duration,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Samples {
    pub fn push(&mut self, sample: Duration) {
        self.durations.push(sample);
    }

    pub fn len(&self) -> usize {
        self.durations.len()
    }

    /// Append all of `other`'s samples.
    pub fn extend(&mut self, other: Samples) {
        self.durations.extend(other.durations);
    }

    /// Arithmetic mean, `None` when empty.
    pub fn mean(&self) -> Option<Duration> {
        let count = u128::try_from(self.durations.len()).ok().filter(|&n| n > 0)?;
        let total: u128 = self.durations.iter().map(Duration::as_nanos).sum();
        Some(nanos(total / count))
    }

    /// All statistics at once (sorts once), `None` when empty.
    pub fn summary(&self) -> Option<Summary> {
        let mut sorted = self.durations.clone();
        sorted.sort_unstable();
        Some(Summary {
            count: sorted.len(),
            mean: self.mean()?,
            p50: nearest_rank(&sorted, 50.0)?,
            p90: nearest_rank(&sorted, 90.0)?,
            p99: nearest_rank(&sorted, 99.0)?,
            max: *sorted.last()?,
        })
    }
}

impl Summary {
    /// Sequential iterations per second implied by the mean.
    pub fn throughput(&self) -> f64 {
        let secs = self.mean.as_secs_f64();
        if secs > 0.0 { 1.0 / secs } else { f64::INFINITY }
    }
}

/// Nearest-rank: the smallest sample such that at least `pct`% of the
/// samples are less than or equal to it (rank `ceil(pct/100 * n)`, min 1).
fn nearest_rank(sorted: &[Duration], pct: f64) -> Option<Duration> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let pct = pct.clamp(0.0, 100.0);
    // n is a sample count (far below 2^52), so the f64 round trip is exact.
    let rank = ((pct / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

/// Milliseconds as a float, for display.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percentile(s: &Samples, pct: f64) -> Option<Duration> {
        let mut sorted = s.durations.clone();
        sorted.sort_unstable();
        nearest_rank(&sorted, pct)
    }

    fn of_millis(values: &[u64]) -> Samples {
        let mut s = Samples::default();
        for &v in values {
            s.push(Duration::from_millis(v));
        }
        s
    }

    #[test]
    fn empty_has_no_statistics() {
        let s = Samples::default();
        assert_eq!(s.mean(), None);
        assert_eq!(percentile(&s, 50.0), None);
        assert_eq!(s.summary(), None);
    }

    #[test]
    fn single_sample_is_every_percentile() {
        let s = of_millis(&[7]);
        let sum = s.summary().unwrap();
        assert_eq!(sum.count, 1);
        for d in [sum.mean, sum.p50, sum.p90, sum.p99, sum.max] {
            assert_eq!(d, Duration::from_millis(7));
        }
        assert_eq!(percentile(&s, 0.0), Some(Duration::from_millis(7)));
    }

    #[test]
    fn nearest_rank_on_one_to_hundred_shuffled() {
        // 1..=100 ms in a scrambled order: pN must be exactly N ms.
        let values: Vec<u64> = (0..100).map(|i| (i * 37) % 100 + 1).collect();
        let s = of_millis(&values);
        let sum = s.summary().unwrap();
        assert_eq!(sum.p50, Duration::from_millis(50));
        assert_eq!(sum.p90, Duration::from_millis(90));
        assert_eq!(sum.p99, Duration::from_millis(99));
        assert_eq!(sum.max, Duration::from_millis(100));
        assert_eq!(sum.mean, Duration::from_micros(50_500));
    }

    #[test]
    fn nearest_rank_rounds_up() {
        // n = 4: p50 -> rank 2, p90 -> rank ceil(3.6) = 4, p25 -> rank 1.
        let s = of_millis(&[40, 10, 30, 20]);
        assert_eq!(percentile(&s, 50.0), Some(Duration::from_millis(20)));
        assert_eq!(percentile(&s, 90.0), Some(Duration::from_millis(40)));
        assert_eq!(percentile(&s, 25.0), Some(Duration::from_millis(10)));
        assert_eq!(percentile(&s, 26.0), Some(Duration::from_millis(20)));
        assert_eq!(percentile(&s, 100.0), Some(Duration::from_millis(40)));
    }

    #[test]
    fn throughput_is_inverse_mean() {
        let sum = of_millis(&[2, 2]).summary().unwrap();
        assert!((sum.throughput() - 500.0).abs() < 1e-9);
        assert!((ms(sum.mean) - 2.0).abs() < 1e-12);
    }
}
