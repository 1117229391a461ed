//! Prints the case each `plan_output` input decodes to (what `cargo fuzz fmt` printed before).
//!
//! `cargo run -p operator-host-fuzzing --example plan_output_case -- FILE...`

fn main() {
    for path in std::env::args_os().skip(1) {
        let data = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.to_string_lossy()));
        println!("== {}", path.to_string_lossy());
        match operator_host_fuzzing::Case::decode(&data) {
            Ok(case) => println!("{case:?}"),
            Err(e) => println!("not decodable (the target skips it): {e}"),
        }
    }
}
