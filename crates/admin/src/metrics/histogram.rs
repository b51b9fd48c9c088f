//! Histograms in the exposition: [`gatehouse_core::meter`]'s snapshots by label
//! set, encoded as prometheus-client encodes its own (`_sum`, `_count`,
//! then cumulative `_bucket`s up to `le="+Inf"`).

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use gatehouse_core::meter::HistogramSnapshot;

/// One histogram per label set.
#[derive(Debug)]
pub(super) struct Histograms<L>(pub Vec<(L, HistogramSnapshot)>);

impl<L> Default for Histograms<L> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<L: EncodeLabelSet + std::fmt::Debug> EncodeMetric for Histograms<L> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, h) in &self.0 {
            encoder
                .encode_family(labels)?
                .encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &h.buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
