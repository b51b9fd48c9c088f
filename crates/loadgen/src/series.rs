//! One measured series: the successful samples of a (target, measurement)
//! pair plus its attempt/failure counts and the first failure message.

use std::time::Duration;

use crate::stats::Samples;

/// Samples and failures of one (target, measurement) pair, across rounds.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub samples: Samples,
    pub attempts: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Series {
    /// Record one iteration: its wall time, or why it failed.
    pub fn record(&mut self, outcome: anyhow::Result<Duration>) {
        self.attempts += 1;
        match outcome {
            Ok(elapsed) => self.samples.push(elapsed),
            Err(err) => self.note_error(&err),
        }
    }

    /// Record `count` iterations that could not run at all (e.g. the
    /// connection they needed failed).
    pub fn record_failures(&mut self, count: u64, err: &anyhow::Error) {
        self.attempts += count;
        self.errors += count - 1;
        self.note_error(err);
    }

    /// Add `other`'s samples and counts; the first error stays the earlier
    /// one (`self`'s when both have one).
    pub fn merge(&mut self, other: Series) {
        self.samples.extend(other.samples);
        self.attempts += other.attempts;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn note_error(&mut self, err: &anyhow::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{err:#}"));
        }
    }

    /// Failed fraction of attempts (0 when nothing was attempted).
    pub fn failure_rate(&self) -> f64 {
        if self.attempts == 0 {
            0.0
        } else {
            self.errors as f64 / self.attempts as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_successes_and_failures() {
        let mut s = Series::default();
        s.record(Ok(Duration::from_millis(1)));
        s.record(Err(anyhow::anyhow!("boom")));
        s.record(Err(anyhow::anyhow!("second")));
        s.record_failures(5, &anyhow::anyhow!("no connection"));
        assert_eq!(s.attempts, 8);
        assert_eq!(s.errors, 7);
        assert_eq!(s.samples.len(), 1);
        assert_eq!(s.first_error.as_deref(), Some("boom"));
        assert!((s.failure_rate() - 7.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn merge_adds_counts_and_keeps_the_first_error() {
        let mut a = Series::default();
        a.record(Ok(Duration::from_millis(1)));
        let mut b = Series::default();
        b.record(Ok(Duration::from_millis(2)));
        b.record(Err(anyhow::anyhow!("later")));
        a.merge(b);
        assert_eq!((a.attempts, a.errors, a.samples.len()), (3, 1, 2));
        assert_eq!(a.first_error.as_deref(), Some("later"));
        let mut c = Series::default();
        c.record(Err(anyhow::anyhow!("third")));
        a.merge(c);
        assert_eq!(a.first_error.as_deref(), Some("later"));
        assert_eq!(a.errors, 2);
    }
}
