# Single entry point: the README's commands are targets here, and .ci/run calls them.

CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR
WASM_OUT := $(CARGO_TARGET_DIR)/wasm32-wasip2/plugin
PLUGINS_DIR := target/plugins
TEST_PLUGINS_DIR := target/test-plugins
# Example plugins, served by `operator-host run`.
PLUGINS := memcached mysql
# Test-only plugins: hostile guests, another contract version, a parent kind of its own for
# the CRD-ownership tests (squatter), the v2 Memcached.
TEST_PLUGINS := hostile wrong-contract squatter

.PHONY: build host plugins test-plugins test lint fmt bench bench-cluster cluster-down cluster demo clean fuzz image

build: host plugins

host:
	cargo build --release -p operator-host

plugins:
	cargo build --target wasm32-wasip2 --profile plugin $(addprefix -p ,$(PLUGINS))
	mkdir -p $(PLUGINS_DIR)
	for p in $(PLUGINS); do cp $(WASM_OUT)/$$p.wasm $(PLUGINS_DIR)/$$p.wasm.tmp && mv $(PLUGINS_DIR)/$$p.wasm.tmp $(PLUGINS_DIR)/$$p.wasm; done

# The container images (deploy/image/build.sh): the static musl host and the bundled plugins,
# as reproducible OCI layouts and archives under target/image; prints reference@digest of each.
image: plugins
	deploy/image/build.sh $(PLUGINS)

test-plugins: plugins
	cargo build --target wasm32-wasip2 --profile plugin $(addprefix -p ,$(TEST_PLUGINS))
	mkdir -p $(TEST_PLUGINS_DIR)
	for p in $(TEST_PLUGINS); do cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm $(TEST_PLUGINS_DIR)/$$p.wasm; done
	cp $(PLUGINS_DIR)/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-v1.wasm
	# The v2 variant has a target dir of its own, so neither build invalidates the other.
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-v2 cargo build --target wasm32-wasip2 --profile plugin -p memcached --features v2
	cp $(CARGO_TARGET_DIR)/variant-v2/wasm32-wasip2/plugin/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-v2.wasm

# The README's test command: every test, including those against the local control plane.
test: test-plugins
	cargo test --workspace --no-fail-fast

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

fmt:
	cargo fmt --all

bench: test-plugins
	cargo bench -p operator-host --bench sandbox
	cargo bench -p operator-host --bench reload

cluster:
	deploy/devcluster/start.sh

cluster-down:
	deploy/devcluster/stop.sh

clean:
	cargo clean
	rm -rf $(PLUGINS_DIR) $(TEST_PLUGINS_DIR)

# The README's main command: the host with the example plugins against the local control plane.
demo:
	deploy/demo.sh

# Benchmarks on the devcluster: N Memcached CRs, the wasm host vs a native kube-rs
# controller; re-convergence after a hot swap vs convergence from scratch; the API writes of a
# status-counter plugin with the policy's write protections relaxed vs the defaults.
bench-cluster: test-plugins
	cargo bench -p operator-host-tests --bench convergence
	cargo bench -p operator-host-tests --bench hot_swap
	cargo bench -p operator-host-tests --bench write_budget

# Fuzzing (nightly + cargo-fuzz, not part of `make test`; see docs/fuzzing.md): arbitrary
# plugin output through the plan and the policy check, for FUZZ_SECONDS. The corpus grows in
# fuzz/corpus (ignored); the committed seeds are read from fuzz/seeds.
FUZZ_SECONDS ?= 600
FUZZ_TARGET_DIR ?= $(CARGO_TARGET_DIR)/fuzz
fuzz:
	mkdir -p fuzz/corpus/plan_output
	cargo +nightly fuzz run --sanitizer none --target-dir $(FUZZ_TARGET_DIR) plan_output \
		fuzz/corpus/plan_output fuzz/seeds/plan_output \
		-- -max_total_time=$(FUZZ_SECONDS) -dict=fuzz/plan_output.dict
