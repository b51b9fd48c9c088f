use std::sync::Arc;
use std::time::Duration;

use super::*;

fn sample(id: u64) -> Sample<'static> {
    Sample {
        id,
        text: "select ? from t",
        tenant: "acme",
        endpoint: "main",
        backend: Duration::from_micros(100),
        lease_wait: Duration::ZERO,
        rows: 1,
        error: false,
        pin: None,
    }
}

fn row(stats: &DigestStats, id: u64) -> Option<DigestRow> {
    let hex = format!("{id:016x}");
    stats.snapshot(None).into_iter().find(|r| r.id == hex)
}

#[test]
fn records_calls_errors_rows_and_times() {
    let stats = DigestStats::new(100);
    assert!(stats.is_empty());
    let mut s = sample(7);
    s.text = "select * from users where id = ?";
    for (us, wait_us, rows, error, at) in [
        (100, 0, 1, false, 1_000),
        (300, 50, 0, true, 2_000),
        (200, 10, 5, false, 1_500),
    ] {
        s.backend = Duration::from_micros(us);
        s.lease_wait = Duration::from_micros(wait_us);
        s.rows = rows;
        s.error = error;
        stats.record_at(&s, at);
    }
    assert_eq!(stats.len(), 1);
    let r = row(&stats, 7).unwrap();
    assert_eq!(r.text, "select * from users where id = ?");
    assert_eq!((r.calls, r.overestimate, r.errors, r.rows), (3, 0, 1, 6));
    assert_eq!(
        (r.total_us, r.min_us, r.max_us, r.mean_us, r.p99_us),
        (600, 100, 300, 200, 300)
    );
    assert_eq!((r.lease_wait_total_us, r.lease_wait_max_us), (60, 50));
    assert_eq!((r.first_seen_unix_ms, r.last_seen_unix_ms), (1_000, 2_000));
    assert_eq!(
        (r.tenants, r.endpoints),
        (vec!["acme".to_owned()], vec!["main".to_owned()])
    );
    assert!(!r.more_tenants && !r.more_endpoints && r.pins.is_empty());
    assert_eq!(stats.evictions(), 0);
}

#[test]
fn durations_are_truncated_to_whole_microseconds_and_saturate() {
    let stats = DigestStats::new(4);
    let mut s = sample(1);
    s.backend = Duration::from_nanos(999);
    stats.record(&s);
    s.backend = Duration::MAX;
    stats.record(&s);
    let r = row(&stats, 1).unwrap();
    assert_eq!((r.min_us, r.max_us, r.total_us), (0, u64::MAX, u64::MAX));
    assert!(r.first_seen_unix_ms > 0, "record reads the wall clock");
}

#[test]
fn a_flood_of_unique_digests_never_grows_the_store() {
    let stats = DigestStats::new(64);
    let heavy = [u64::MAX, u64::MAX - 1, u64::MAX - 2];
    for id in 0..100_000u64 {
        stats.record(&sample(id));
        if id % 10 == 0 {
            for &h in &heavy {
                stats.record(&sample(h));
            }
        }
        if id % 1_000 == 0 {
            assert!(stats.len() <= 64);
        }
    }
    assert_eq!(stats.len(), 64);
    assert_eq!(stats.capacity(), 64);
    for &h in &heavy {
        let r = row(&stats, h).expect("a heavy hitter survives the flood");
        // Space-Saving never undercounts, and the guaranteed part never
        // exceeds the truth.
        assert!(r.calls >= 10_000, "{r:?}");
        assert!(r.calls - r.overestimate <= 10_000, "{r:?}");
    }
    let top: Vec<String> = stats.snapshot(Some(3)).into_iter().map(|r| r.id).collect();
    let mut want: Vec<String> = heavy.iter().map(|h| format!("{h:016x}")).collect();
    want.sort();
    let mut got = top.clone();
    got.sort();
    assert_eq!(got, want, "the heavy hitters are the heaviest");
    // Every miss in a full shard evicts one entry (a heavy hitter may have
    // been evicted early on and come back).
    assert!(stats.evictions() >= 100_000 + 3 - 64);
}

#[test]
fn evicted_slot_inherits_the_minimum_as_overestimate() {
    let stats = DigestStats::new(1);
    let mut a = sample(1);
    a.tenant = "a";
    a.pin = Some("listen");
    for _ in 0..3 {
        stats.record_at(&a, 10);
    }
    let mut b = sample(2);
    b.text = "select b";
    b.tenant = "b";
    b.error = true;
    b.rows = 9;
    b.backend = Duration::from_micros(40);
    stats.record_at(&b, 20);
    assert_eq!(stats.len(), 1);
    assert_eq!(stats.evictions(), 1);
    assert!(row(&stats, 1).is_none());
    let r = row(&stats, 2).unwrap();
    assert_eq!((r.calls, r.overestimate), (4, 3));
    // Everything else describes b's one statement alone.
    assert_eq!(r.text, "select b");
    assert_eq!(
        (r.errors, r.rows, r.total_us, r.mean_us, r.min_us, r.max_us),
        (1, 9, 40, 40, 40, 40)
    );
    assert_eq!(r.tenants, vec!["b".to_owned()]);
    assert!(r.pins.is_empty());
    assert_eq!((r.first_seen_unix_ms, r.last_seen_unix_ms), (20, 20));
    stats.record_at(&a, 30);
    let r = row(&stats, 1).unwrap();
    assert_eq!((r.calls, r.overestimate, r.total_us), (5, 4, 100));
    assert_eq!(stats.evictions(), 2);
}

#[test]
fn the_least_called_entry_is_the_one_replaced() {
    // One shard of two slots.
    let stats = DigestStats {
        capacity: 2,
        shards: Box::new([Mutex::new(entry::Shard::new(2))]),
    };
    for _ in 0..5 {
        stats.record(&sample(1));
    }
    stats.record(&sample(2));
    stats.record(&sample(2));
    stats.record(&sample(3));
    assert!(row(&stats, 2).is_none());
    assert_eq!(row(&stats, 1).unwrap().calls, 5);
    assert_eq!(row(&stats, 3).unwrap().calls, 3);
}

#[test]
fn capacity_is_split_exactly_among_the_shards() {
    for capacity in (0..=100).chain([1_000, 10_007]) {
        let stats = DigestStats::new(capacity);
        let split: Vec<usize> = (0..stats.shards.len()).map(|i| stats.lock(i).capacity()).collect();
        assert_eq!(split.iter().sum::<usize>(), capacity.max(1));
        assert!(split.len() <= SHARDS && split.iter().all(|&c| c >= 1));
        assert!(split.iter().max().unwrap() - split.iter().min().unwrap() <= 1);
    }
}

#[test]
fn names_are_bounded_per_digest() {
    let stats = DigestStats::new(4);
    let names: Vec<String> = (0..20).rev().map(|i| format!("t{i:02}")).collect();
    for n in &names {
        let mut s = sample(5);
        s.tenant = n;
        s.endpoint = "only";
        stats.record(&s);
        stats.record(&s);
    }
    let mut s = sample(5);
    s.tenant = "";
    s.endpoint = "";
    stats.record(&s);
    let r = row(&stats, 5).unwrap();
    assert_eq!(r.tenants.len(), MAX_NAMES_PER_DIGEST);
    let mut first: Vec<String> = names[..MAX_NAMES_PER_DIGEST].to_vec();
    first.sort();
    assert_eq!(r.tenants, first, "the first names are kept, sorted");
    assert!(r.more_tenants);
    assert_eq!(r.endpoints, vec!["only".to_owned()]);
    assert!(!r.more_endpoints);
}

#[test]
fn long_texts_and_names_are_cut_at_char_boundaries() {
    let stats = DigestStats::new(1);
    let text = "é".repeat(MAX_TEXT_BYTES);
    let name = "ü".repeat(MAX_NAME_BYTES);
    let mut s = sample(1);
    s.text = &text;
    s.tenant = &name;
    stats.record(&s);
    // Through `Entry::reuse` too.
    s.id = 2;
    stats.record(&s);
    let r = row(&stats, 2).unwrap();
    assert!(r.text.len() <= MAX_TEXT_BYTES && r.text.len() >= MAX_TEXT_BYTES - 1);
    assert!(r.text.chars().all(|c| c == 'é'));
    assert_eq!(r.tenants[0].len(), MAX_NAME_BYTES);
}

#[test]
fn pins_are_counted_by_reason_and_bounded() {
    let stats = DigestStats::new(1);
    const CODES: [&str; 20] = [
        "c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10", "c11", "c12", "c13", "c14", "c15",
        "c16", "c17", "c18", "c19",
    ];
    let mut s = sample(1);
    for code in CODES {
        s.pin = Some(code);
        stats.record(&s);
    }
    s.pin = Some("c00");
    stats.record(&s);
    s.pin = None;
    stats.record(&s);
    let r = row(&stats, 1).unwrap();
    assert_eq!(r.pins.len(), MAX_PIN_REASONS + 1);
    assert_eq!(r.pins["c00"], 2);
    assert_eq!(r.pins[PIN_OTHER], (CODES.len() - MAX_PIN_REASONS) as u64);
    assert_eq!(r.pins.values().sum::<u64>(), CODES.len() as u64 + 1);
}

#[test]
fn reset_forgets_everything() {
    let stats = DigestStats::new(16);
    for id in 0..1_000 {
        stats.record(&sample(id));
    }
    assert!(stats.evictions() > 0);
    stats.reset();
    assert!(stats.is_empty());
    assert_eq!(stats.evictions(), 0);
    assert!(stats.snapshot(None).is_empty());
    assert_eq!(stats.capacity(), 16);
    stats.record(&sample(3));
    let r = row(&stats, 3).unwrap();
    assert_eq!((r.calls, r.overestimate), (1, 0));
}

#[test]
fn snapshot_is_heaviest_first_and_limited() {
    let stats = DigestStats::new(1_000);
    for id in 1..=50u64 {
        let mut s = sample(id);
        // Totals: id 1 is the lightest; ids 20 and 21 tie.
        s.backend = Duration::from_micros(if id == 21 { 20 * 100 } else { id * 100 });
        stats.record(&s);
    }
    let all = stats.snapshot(None);
    assert_eq!(all.len(), 50);
    assert!(all.windows(2).all(|w| w[0].total_us >= w[1].total_us));
    assert_eq!(all[0].id, format!("{:016x}", 50));
    let tie: Vec<&str> = all
        .iter()
        .filter(|r| r.total_us == 2_000)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(tie, ["0000000000000014", "0000000000000015"], "ties by id");
    let top = stats.snapshot(Some(3));
    assert_eq!(
        top.iter().map(|r| r.total_us).collect::<Vec<_>>(),
        [5_000, 4_900, 4_800]
    );
    assert!(stats.snapshot(Some(0)).is_empty());
}

#[test]
fn rows_serialize_with_hex_ids() {
    let stats = DigestStats::new(4);
    let mut s = sample(u64::MAX - 5);
    s.pin = Some("temp_table");
    stats.record(&s);
    let r = &stats.snapshot(None)[0];
    assert_eq!(r.id, "fffffffffffffffa");
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["id"], "fffffffffffffffa");
    assert_eq!(json["pins"]["temp_table"], 1);
    assert_eq!(json["tenants"][0], "acme");
    assert_eq!(json["more_endpoints"], false);
}

#[test]
fn p99_tracks_the_tail() {
    let stats = DigestStats::new(4);
    let mut s = sample(1);
    for i in 0..1_000u64 {
        s.backend = Duration::from_micros(if i % 50 == 0 { 500_000 + i } else { 1_000 });
        stats.record(&s);
    }
    let r = row(&stats, 1).unwrap();
    // 20 of 1 000 statements (2 %) took about half a second.
    // One significant figure: within 1/16 of the value.
    assert!((465_000..=535_000).contains(&r.p99_us), "{r:?}");
    assert_eq!((r.min_us, r.max_us), (1_000, 500_950));

    // Now the tail is under 1 %: p99 is the body.
    let stats = DigestStats::new(4);
    for i in 0..1_000u64 {
        s.backend = Duration::from_micros(if i % 200 == 0 { 500_000 } else { 1_000 });
        stats.record(&s);
    }
    let r = row(&stats, 1).unwrap();
    assert!((940..=1_070).contains(&r.p99_us), "{r:?}");
}

#[test]
fn samples_beyond_an_hour_are_clamped_in_the_histogram_only() {
    let stats = DigestStats::new(4);
    let mut s = sample(1);
    s.backend = Duration::from_secs(7_200);
    stats.record(&s);
    let r = row(&stats, 1).unwrap();
    assert_eq!((r.max_us, r.total_us), (7_200_000_000, 7_200_000_000));
    assert!(
        r.p99_us >= HISTOGRAM_HIGH_US * 99 / 100 && r.p99_us <= r.max_us,
        "{r:?}"
    );
}

#[test]
fn memory_per_entry_is_fixed_and_within_the_documented_bound() {
    let stats = DigestStats::new(1);
    let mut s = sample(1);
    for us in [0, 1, 1_000, 10_000_000, u64::MAX] {
        s.backend = Duration::from_micros(us);
        stats.record(&s);
    }
    let shard = stats.lock(0);
    let hist = shard.histogram_bytes().unwrap();
    assert_eq!(hist, HISTOGRAM_BYTES, "recording never resizes the histogram");
    let names = 2 * MAX_NAMES_PER_DIGEST * (size_of::<Box<str>>() + MAX_NAME_BYTES);
    // Two B-tree nodes of 11 keys of `&str` and `u64`, and their headers.
    let pins = 2 * (11 * (size_of::<&str>() + size_of::<u64>()) + 128);
    // The entry, its call counter and its index slot (key, value, control byte).
    let fixed = size_of::<entry::Entry>() + size_of::<u64>() + 2 * (size_of::<(u64, usize)>() + 1);
    let bound = hist + MAX_TEXT_BYTES + names + pins + fixed;
    assert!(bound <= ENTRY_BYTES_BOUND, "{bound} > {ENTRY_BYTES_BOUND}");
    assert!(ENTRY_BYTES_BOUND - bound < 2_048, "the bound is tight: {bound}");
}

#[test]
fn concurrent_records_from_threads_are_all_counted() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 10_000;
    // Room for every id in any shard: no evictions.
    let stats = Arc::new(DigestStats::new(SHARDS * 64));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let stats = Arc::clone(&stats);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let mut s = sample(i % 50);
                    s.error = (i + t) % 2 == 0;
                    stats.record(&s);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let rows = stats.snapshot(None);
    assert_eq!(rows.len(), 50);
    assert_eq!(stats.evictions(), 0);
    assert_eq!(rows.iter().map(|r| r.calls).sum::<u64>(), THREADS * PER_THREAD);
    assert_eq!(rows.iter().map(|r| r.errors).sum::<u64>(), THREADS * PER_THREAD / 2);
    assert!(
        rows.iter()
            .all(|r| r.overestimate == 0 && r.calls == THREADS * PER_THREAD / 50)
    );
}

#[test]
fn a_poisoned_shard_still_records() {
    let stats = Arc::new(DigestStats::new(1));
    let poisoner = Arc::clone(&stats);
    let _ = std::thread::spawn(move || {
        let _guard = poisoner.shards[0].lock();
        panic!("poison the shard");
    })
    .join();
    assert!(stats.shards[0].is_poisoned());
    stats.record(&sample(1));
    assert_eq!(row(&stats, 1).unwrap().calls, 1);
    stats.reset();
    assert!(stats.is_empty());
}

#[test]
fn long_statements_are_cut_at_a_char_boundary() {
    assert_eq!(super::cut("héllo", 2), "h");
    assert_eq!(super::cut("abc", 10), "abc");
}
