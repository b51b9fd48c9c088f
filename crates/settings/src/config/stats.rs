//! The `[stats]` section: whether `/metrics` keeps latency histograms, and
//! how many tenants get series of their own (`gatehouse::meter`).

use toml::Spanned;

use super::model::StatsSettings;
use super::raw::RawStats;
use super::validate::Ctx;

/// `[stats] tenant_series`: the default, and the most allowed (each is a
/// few series per scrape; more would make `/metrics` a tenant list).
pub const DEFAULT_TENANT_SERIES: usize = 20;
pub const MAX_TENANT_SERIES: usize = 1000;

pub(super) fn stats(cx: &mut Ctx, raw: Option<&Spanned<RawStats>>) -> StatsSettings {
    let defaults = StatsSettings {
        histograms: true,
        tenant_series: DEFAULT_TENANT_SERIES,
    };
    let Some(s) = raw.map(Spanned::get_ref) else {
        return defaults;
    };
    let tenant_series = match &s.tenant_series {
        None => DEFAULT_TENANT_SERIES,
        Some(n) => match usize::try_from(*n.get_ref()) {
            Ok(n) if n <= MAX_TENANT_SERIES => n,
            _ => {
                cx.at(
                    n,
                    format!("stats.tenant_series must be between 0 and {MAX_TENANT_SERIES}"),
                );
                DEFAULT_TENANT_SERIES
            }
        },
    };
    StatsSettings {
        histograms: s.histograms.unwrap_or(defaults.histograms),
        tenant_series,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn parse(stats: &str) -> Result<crate::config::StatsSettings, String> {
        let text = format!(
            "[[clusters]]\nname = \"c\"\nengine = \"postgres\"\nbackends = [\"127.0.0.1:1\"]\n\n\
             [[endpoints]]\nname = \"e\"\nlisten = \"127.0.0.1:0\"\ncluster = \"c\"\nrole = \"read_write\"\n\n{stats}"
        );
        crate::config::parse(&text, Path::new("."))
            .map(|s| s.stats)
            .map_err(|p| p.to_string())
    }

    #[test]
    fn histograms_and_twenty_tenant_series_are_on_by_default() {
        let s = parse("").unwrap_or_else(|e| panic!("{e}"));
        assert!(s.histograms);
        assert_eq!(s.tenant_series, super::DEFAULT_TENANT_SERIES);
    }

    #[test]
    fn both_can_be_turned_off_and_too_many_tenant_series_is_refused() {
        let s = parse("[stats]\nhistograms = false\ntenant_series = 0\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(!s.histograms);
        assert_eq!(s.tenant_series, 0);
        let e = parse("[stats]\ntenant_series = 1001\n").err().unwrap_or_default();
        assert!(e.contains("stats.tenant_series must be between 0 and 1000"), "{e}");
    }
}
