//! The `plan_output` oracle on stable: the committed seeds, and a bounded pseudo-random run.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use operator_host::plan::plan_from_response;
use operator_host::policy::Policy;
use operator_host::runtime::{Child, ReconcileResponse};
use operator_host_fuzzing::{Case, check_plan_output};

fn seed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/plan_output")
}

/// Every file of fuzz/seeds/plan_output, by name, in name order.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = seed_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list the seeds in {}: {e}", dir.display()));
    let mut seeds: Vec<(String, Vec<u8>)> = entries
        .map(|entry| {
            let path = entry.expect("a readable directory entry").path();
            let data = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                data,
            )
        })
        .collect();
    seeds.sort();
    seeds
}

/// `check_plan_output`, naming the input (escaped, ready for a seed file) if it panics.
fn check_reporting(what: &str, data: &[u8]) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check_plan_output(data))) {
        eprintln!(
            "{what} broke an invariant; input: b\"{}\"",
            data.escape_ascii()
        );
        resume_unwind(panic);
    }
}

#[test]
fn every_seed_keeps_every_invariant() {
    let seeds = seeds();
    for (name, data) in &seeds {
        check_reporting(&format!("seed {name}"), data);
    }
    assert!(!seeds.is_empty(), "no seeds in {}", seed_dir().display());
}

/// SplitMix64: a fixed-seed byte stream, so every run checks the same inputs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

/// Random control bytes, alone (sometimes with NULs, so random segments follow) or in front
/// of a seed's raw segments with a few bytes changed: both the generators and the
/// perturbation of real plugin output get exercised.
fn random_input(rng: &mut SplitMix64, seeds: &[(String, Vec<u8>)]) -> Vec<u8> {
    // Mostly short: exhausted control bytes take the first, valid choice, so more inputs
    // get as far as a plan and the policies.
    let longest = rng.below(200) + 1;
    let len = rng.below(longest);
    let mut input: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
    if rng.below(3) == 0 {
        return input;
    }
    let (_, seed) = &seeds[rng.below(seeds.len())];
    let Some(start) = seed.iter().position(|b| *b == 0) else {
        return input;
    };
    let mut segments = seed[start..].to_vec();
    for _ in 0..rng.below(3) {
        let at = rng.below(segments.len());
        segments[at] = rng.byte();
    }
    // No NUL in the control bytes, so the seed's segments stay what they were.
    input.retain(|b| *b != 0);
    input.extend(segments);
    input
}

/// Inputs of the bounded run: about 2 s in a debug build on the 2-core project machine.
const BOUNDED_RUN_INPUTS: u64 = 10_000;

/// `name` from the environment as a number, else `default`: a longer run on stable is
/// `PLAN_OUTPUT_INPUTS=1000000 PLAN_OUTPUT_SEED=7 cargo test --release -p operator-host-fuzzing`.
fn from_env(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
    })
}

#[test]
fn bounded_pseudo_random_run_keeps_every_invariant() {
    let seeds = seeds();
    let inputs = from_env("PLAN_OUTPUT_INPUTS", BOUNDED_RUN_INPUTS);
    let mut rng = SplitMix64(from_env("PLAN_OUTPUT_SEED", 0x0bad_5eed));
    let started = Instant::now();
    for index in 0..inputs {
        let input = random_input(&mut rng, &seeds);
        check_reporting(&format!("pseudo-random input #{index}"), &input);
    }
    eprintln!("{inputs} pseudo-random inputs in {:.2?}", started.elapsed());
}

/// The pod-template seeds reach the rules they are named for: a plan is made, and the
/// policy's verdict is the one the name promises.
#[test]
fn pod_template_seeds_reach_the_policy_rules() {
    let policy = |yaml: &str| {
        let text = format!("apiVersion: operator-host.dev/v1alpha1\nkind: Policy\n{yaml}");
        Policy::parse(&text, Path::new("test.yaml")).expect("a valid policy")
    };
    let own_secrets = policy("defaults: {allowSecrets: true}");
    let restricted = policy("defaults: {podSecurity: restricted, secretReferences: none}");
    let expectations: [(&str, &Policy, Option<&str>); 5] = [
        (
            "pod-template-privileged-deployment",
            &Policy::default(),
            Some("hostNetwork: true"),
        ),
        (
            "pod-template-foreign-secret",
            &Policy::default(),
            Some("Secret \"other\""),
        ),
        ("pod-template-own-secret-and-account", &own_secrets, None),
        ("pod-template-restricted-clean", &restricted, None),
        ("pod-template-restricted-clean", &Policy::default(), None),
    ];
    for (name, policy, refusal) in expectations {
        let data = std::fs::read(seed_dir().join(name)).expect("the seed exists");
        let case = Case::decode(&data).expect("the seed decodes");
        let response = ReconcileResponse {
            children: case.children.iter().cloned().map(Child::in_place).collect(),
            status: case.status.clone(),
            requeue_after_ms: case.requeue_after_ms,
        };
        let decl = operator_host_fuzzing::declaration();
        let plan = plan_from_response(decl, &case.parent, &case.observed, response, "now")
            .unwrap_or_else(|e| panic!("{name}: no plan: {e}"));
        let verdict = policy.check(decl, &case.parent, &plan);
        match refusal {
            None => assert_eq!(verdict, Ok(()), "{name}"),
            Some(words) => {
                let message = verdict.expect_err(name).0;
                assert!(message.contains(words), "{name}: {message}");
            }
        }
    }
}
