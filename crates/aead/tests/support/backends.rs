//! Which backends a test runs on this host. A backend the processor lacks cannot run, and
//! is skipped with a note; with `TICKWIRE_REQUIRE_ALL_BACKENDS=1` (CI sets it) a test fails
//! instead when the processor has AVX-512F or AVX2 and the matching backend did not run, so
//! a build or detection that loses a backend cannot pass unnoticed.

use std::sync::Once;

use tickwire_aead::Backend;

/// The variable that turns a backend this host has but the tests did not run into a failure.
pub(crate) const REQUIRE_ALL: &str = "TICKWIRE_REQUIRE_ALL_BACKENDS";

/// Every backend, in the order the tests run them.
pub(crate) const ALL: [Backend; 4] = [
    Backend::Portable,
    Backend::Ring,
    Backend::Avx512,
    Backend::Avx2,
];

/// The processor feature each vector backend needs.
const FEATURES: [(Backend, &str); 2] = [(Backend::Avx512, "avx512f"), (Backend::Avx2, "avx2")];

// A backend added to the enum fails to compile here until `ALL` (and, if it needs a
// processor feature, `FEATURES`) lists it.
const _: fn(Backend) = |backend| match backend {
    Backend::Portable | Backend::Ring | Backend::Avx512 | Backend::Avx2 => {}
};

/// The backends this host runs, for a test to hold each of them to what it checks.
///
/// # Panics
/// With `TICKWIRE_REQUIRE_ALL_BACKENDS=1`, if the processor has a vector backend's feature
/// and that backend does not run; if the variable is set to anything but 0 or 1.
pub(crate) fn under_test() -> Vec<Backend> {
    let run: Vec<Backend> = ALL.into_iter().filter(|b| b.is_available()).collect();
    let missing = not_run(&host_supports(), &run);
    if required() {
        assert!(
            missing.is_empty(),
            "{REQUIRE_ALL}=1: this processor has {missing:?}, which these tests did not run \
             (Backend::is_available says no on this build)"
        );
    }
    static NOTE: Once = Once::new();
    NOTE.call_once(|| {
        for (backend, feature) in FEATURES {
            if !run.contains(&backend) {
                let why = if missing.contains(&backend) {
                    "the processor has it, but this build cannot run it"
                } else {
                    "this processor lacks it"
                };
                eprintln!("skipped: the {backend:?} backend ({feature}: {why}); {REQUIRE_ALL}=1 fails instead when the processor has it");
            }
        }
    });
    run
}

/// Whether `TICKWIRE_REQUIRE_ALL_BACKENDS` is 1.
fn required() -> bool {
    match std::env::var(REQUIRE_ALL) {
        Ok(value) if value == "1" => true,
        Ok(value) if value.is_empty() || value == "0" => false,
        Ok(value) => panic!("{REQUIRE_ALL} is {value:?}: set it to 0 or 1"),
        Err(_) => false,
    }
}

/// The vector backends whose feature the processor reports, asked apart from
/// [`Backend::is_available`]: std's runtime detection, and on Linux the kernel's flags in
/// `/proc/cpuinfo` (which name the features of the processor also when this build is for a
/// target that cannot use them).
pub(crate) fn host_supports() -> Vec<Backend> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("flags"))
        .and_then(|rest| rest.trim_start().strip_prefix(':'))
        .map(|flags| flags.split_whitespace().collect())
        .unwrap_or_default();
    FEATURES
        .into_iter()
        .filter(|(_, feature)| detected(feature) || flags.contains(feature))
        .map(|(backend, _)| backend)
        .collect()
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn detected(feature: &str) -> bool {
    match feature {
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        _ => false,
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn detected(_feature: &str) -> bool {
    false
}

/// The backends of `host` that are not among those `run`.
pub(crate) fn not_run(host: &[Backend], run: &[Backend]) -> Vec<Backend> {
    host.iter()
        .copied()
        .filter(|backend| !run.contains(backend))
        .collect()
}
