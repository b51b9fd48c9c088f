//! Replays the committed fuzz inputs on stable, in the normal test suite:
//! every file of `fuzz/corpus/<target>/` (the hand-made seeds, plus any
//! corpus a local fuzzing run left there) and of `fuzz/regressions/<target>/`
//! (inputs of past findings) goes through the target's harness. Also keeps
//! the fuzz targets, the harness list and the seed files in step.

#![forbid(unsafe_code)]

use std::fs;
use std::path::{Path, PathBuf};

use gatehouse_fuzz_harness::seeds::seeds;
use gatehouse_fuzz_harness::{TARGETS, harness};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted; none if it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_corpus_and_regression_input_passes_its_harness() {
    let mut failed = Vec::new();
    let mut replayed = 0;
    for (name, run) in TARGETS {
        for kind in ["corpus", "regressions"] {
            for path in files(&fuzz_dir().join(kind).join(name)) {
                let data = fs::read(&path).expect("a readable input");
                replayed += 1;
                if std::panic::catch_unwind(|| run(&data)).is_err() {
                    failed.push(path);
                }
            }
        }
    }
    assert!(failed.is_empty(), "inputs that break their harness: {failed:#?}");
    assert!(replayed >= TARGETS.len(), "only {replayed} inputs replayed");
}

#[test]
fn every_target_has_its_seeds_committed() {
    for (name, _) in TARGETS {
        assert!(
            !files(&fuzz_dir().join("corpus").join(name)).is_empty(),
            "fuzz/corpus/{name} has no input"
        );
    }
    for (target, name, data) in seeds() {
        assert!(harness(target).is_some(), "a seed for the unknown target {target}");
        let path = fuzz_dir().join("corpus").join(target).join(format!("seed-{name}"));
        let committed = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == data,
            "{} differs from its seed: run the ignored test write_the_seed_corpus",
            path.display()
        );
    }
}

#[test]
fn the_fuzz_targets_are_the_harness_list() {
    let mut on_disk: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = TARGETS.iter().map(|(n, _)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    let manifest = fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        let source =
            fs::read_to_string(fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"))).expect("a target source");
        assert!(
            source.contains(&format!("harness::{name}(")) || source.contains(&format!("::{name}(data)")),
            "fuzz_targets/{name}.rs does not call its harness"
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lacks {name}"
        );
    }
}

/// Rewrites `fuzz/corpus/<target>/seed-*` from the seeds in the code.
#[test]
#[ignore = "writes fuzz/corpus; run after changing the seeds"]
fn write_the_seed_corpus() {
    for (target, name, data) in seeds() {
        let dir = fuzz_dir().join("corpus").join(target);
        fs::create_dir_all(&dir).expect("the corpus directory");
        fs::write(dir.join(format!("seed-{name}")), data).expect("the seed file");
    }
}
