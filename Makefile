# Single entry point: the README's commands are targets here, and .ci/run calls them.

CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR
WASM_OUT := $(CARGO_TARGET_DIR)/wasm32-wasip2/plugin
PLUGINS_DIR := target/plugins
TEST_PLUGINS_DIR := target/test-plugins
# Example plugins, served by `operator-host run`.
PLUGINS := memcached mysql etcd
# The example plugins the host image carries (deploy/image/build.sh) and the install
# manifests' RBAC covers: tests/src/manifests.rs's BUNDLED_PLUGINS.
IMAGE_PLUGINS := memcached mysql
# Test-only plugins: hostile guests, a contract version that does not exist, a plugin of contract
# 0.2.0 built without the SDK (contract-v0-2), a CRD of two versions with conversion for the
# webhooks' tests (versioned), a parent kind of its own for the CRD-ownership tests
# (squatter), the v2 Memcached.
TEST_PLUGINS := hostile wrong-contract contract-v0-2 versioned squatter staged
# Builds of the hostile plugin whose declarations lie about a kind (plugins/hostile features).
HOSTILE_LIES := lie-child-plural lie-related-plural lie-scope
# Example plugins `make demo` does not serve: plugins/redis and plugins/webapp, written as a
# third-party author would with the SDK (checked by the conformance tests).
EXAMPLE_PLUGINS := redis webapp
EXAMPLE_PLUGINS_DIR := target/example-plugins
# The scale benchmark's plugins: fleet built once per FLEET_INDEX (one directory, served by one
# host's --plugins), and config-bundle (a directory of its own).
SCALE_PLUGINS_DIR := target/scale-plugins
FLEET_INDICES := 0 1 2 3 4 5 6 7 8 9

.PHONY: prerequisites test-prerequisites bench-languages build host plugins rust-plugins python-env python-plugins python-test-plugins python-test js-env js-plugins js-test-plugins js-test go-plugins go-test-plugins go-test test-plugins scale-plugins test lint fmt bench bench-cluster bench-scale cluster-down cluster demo clean fuzz image manifests

build: host plugins

# The rustup targets the plugins need (rustup adds what rust-toolchain.toml names only where it
# installs by itself); `make test`'s adds the musl target and the Debian packages its tests use.
prerequisites:
	deploy/prerequisites.sh build
test-prerequisites:
	deploy/prerequisites.sh test

host:
	cargo build --release -p operator-host

# Every bundled plugin: the Rust ones (served by `make demo`), and the Memcached plugin in the
# other guest languages (Python, JavaScript, Go).
plugins: rust-plugins python-plugins js-plugins go-plugins

rust-plugins: prerequisites
	cargo build --target wasm32-wasip2 --profile plugin $(addprefix -p ,$(PLUGINS))
	mkdir -p $(PLUGINS_DIR)
	for p in $(PLUGINS); do cp $(WASM_OUT)/$$p.wasm $(PLUGINS_DIR)/$$p.wasm.tmp && mv $(PLUGINS_DIR)/$$p.wasm.tmp $(PLUGINS_DIR)/$$p.wasm; done

# Python plugins (plugins/sdk-python, built with componentize-py) in a virtual environment of
# pinned tools, kept between runs. Each language's Memcached has a directory of its own: a
# plugin is known by its file name, and all three are `memcached`.
PYTHON_ENV ?= $(HOME)/.cache/operator-host/python-env
PYTHON := $(PYTHON_ENV)/bin/python
PYTHON_PLUGINS_DIR := target/plugins-python
PYTHON_SDK_SOURCES := $(wildcard plugins/sdk-python/operator_host/*.py plugins/sdk-python/operator_host/wit/*.wit)

python-env: $(PYTHON_ENV)/.installed
$(PYTHON_ENV)/.installed: plugins/sdk-python/requirements.txt
	[ -x $(PYTHON) ] || python3 -m venv $(PYTHON_ENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check -r plugins/sdk-python/requirements.txt
	touch $@

python-plugins: $(PYTHON_PLUGINS_DIR)/memcached.wasm
$(PYTHON_PLUGINS_DIR)/memcached.wasm: $(PYTHON_ENV)/.installed $(PYTHON_SDK_SOURCES) plugins/memcached-py/memcached.py
	mkdir -p $(PYTHON_PLUGINS_DIR)
	PYTHONPATH=plugins/sdk-python $(PYTHON) -m operator_host.build memcached:operator \
		-p plugins/memcached-py -o $@

# The Python hostile plugin: the sandbox's limits against a Python guest (host/tests/suite/guest_languages.rs).
PYTHON_TEST_PLUGINS_DIR := target/test-plugins-python
python-test-plugins: $(PYTHON_TEST_PLUGINS_DIR)/hostile.wasm
$(PYTHON_TEST_PLUGINS_DIR)/hostile.wasm: $(PYTHON_ENV)/.installed $(PYTHON_SDK_SOURCES) plugins/hostile-py/hostile.py
	mkdir -p $(PYTHON_TEST_PLUGINS_DIR)
	PYTHONPATH=plugins/sdk-python $(PYTHON) -m operator_host.build hostile:operator \
		-p plugins/hostile-py -o $@

# JavaScript plugins (plugins/sdk-js, built with componentize-js from npm, pinned in its
# package-lock.json). The build needs only the SDK's packages; the Memcached package links the
# SDK for its own tests.
JS_PLUGINS_DIR := target/plugins-js
JS_TEST_PLUGINS_DIR := target/test-plugins-js
JS_SDK_SOURCES := $(wildcard plugins/sdk-js/src/*.js plugins/sdk-js/bin/*.mjs plugins/sdk-js/wit/*.wit)
JS_ENV := plugins/sdk-js/node_modules/.operator-host-installed

js-env: $(JS_ENV)
$(JS_ENV): plugins/sdk-js/package-lock.json plugins/memcached-js/package-lock.json
	cd plugins/sdk-js && npm ci --no-audit --no-fund
	cd plugins/memcached-js && npm ci --no-audit --no-fund
	touch $@

js-plugins: $(JS_PLUGINS_DIR)/memcached.wasm
$(JS_PLUGINS_DIR)/memcached.wasm: $(JS_ENV) $(JS_SDK_SOURCES) plugins/memcached-js/src/memcached.js
	node plugins/sdk-js/bin/build.mjs plugins/memcached-js/src/memcached.js -o $@

# The JavaScript hostile plugin: the sandbox's limits against a JavaScript guest.
js-test-plugins: $(JS_TEST_PLUGINS_DIR)/hostile.wasm
$(JS_TEST_PLUGINS_DIR)/hostile.wasm: $(JS_ENV) $(JS_SDK_SOURCES) plugins/hostile-js/src/hostile.js
	node plugins/sdk-js/bin/build.mjs plugins/hostile-js/src/hostile.js -o $@

# Go plugins (plugins/sdk-go): Go's own toolchain builds a WASI preview1 module
# (-buildmode=c-shared, //go:wasmexport), which `operator-host componentize` makes a component
# with the contract's WIT and the preview1 adapter of the host's wasmtime.
GO_PLUGINS_DIR := target/plugins-go
GO_BUILD_DIR := target/go-build
GO_SDK_SOURCES := $(wildcard plugins/sdk-go/*.go plugins/sdk-go/go.mod)
# The host build that componentizes them: the release build `make build` and `make demo` make
# anyway; `make test` asks for the debug one, which its tests build anyway (TOOL_PROFILE=debug).
TOOL_PROFILE ?= release
OPERATOR_HOST_TOOL := $(CARGO_TARGET_DIR)/$(TOOL_PROFILE)/operator-host

# go_component(plugin dir, output): the module Go builds, made a component by the host.
define go_component
	mkdir -p $(dir $(2)) $(GO_BUILD_DIR)
	cd $(1) && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath \
		-o $(CURDIR)/$(GO_BUILD_DIR)/$(notdir $(1)).wasm .
	cargo build -q -p operator-host $(if $(filter release,$(TOOL_PROFILE)),--release)
	$(OPERATOR_HOST_TOOL) componentize $(GO_BUILD_DIR)/$(notdir $(1)).wasm -o $(2)
endef

go-plugins: $(GO_PLUGINS_DIR)/memcached.wasm
$(GO_PLUGINS_DIR)/memcached.wasm: $(GO_SDK_SOURCES) $(wildcard plugins/memcached-go/*.go plugins/memcached-go/go.mod)
	$(call go_component,plugins/memcached-go,$@)

# The Go hostile plugin: the sandbox's limits against a Go guest.
GO_TEST_PLUGINS_DIR := target/test-plugins-go
go-test-plugins: $(GO_TEST_PLUGINS_DIR)/hostile.wasm
$(GO_TEST_PLUGINS_DIR)/hostile.wasm: $(GO_SDK_SOURCES) $(wildcard plugins/hostile-go/*.go plugins/hostile-go/go.mod)
	$(call go_component,plugins/hostile-go,$@)

# The Go SDK's and plugins' own tests, natively (go test); the SDK's canonical ABI is also
# checked against the host ($(OPERATOR_HOST_TOOL), built first: a `go test` without it skips
# that check, which `make test` must not).
go-test:
	cargo build -q -p operator-host $(if $(filter release,$(TOOL_PROFILE)),--release)
	cd plugins/sdk-go && go vet ./... && OPERATOR_HOST=$(abspath $(OPERATOR_HOST_TOOL)) go test -v ./...
	@# The canonical ABI turns the host's addresses into pointers: that is its job.
	cd plugins/sdk-go && GOOS=wasip1 GOARCH=wasm go vet -unsafeptr=false ./...
	cd plugins/memcached-go && go vet ./... && go test -v ./...
	cd plugins/hostile-go && go vet ./...

# The JavaScript SDK's and plugins' own tests, natively (node --test, no host).
js-test: js-env
	node --test plugins/sdk-js/test/ plugins/memcached-js/test/

# The Python SDK's and plugins' own tests, natively (pytest, no host).
python-test: python-env
	cd plugins/sdk-python && $(PYTHON) -m pytest -q tests
	cd plugins/memcached-py && PYTHONPATH=../sdk-python:. $(PYTHON) -m pytest -q tests

# The container images (deploy/image/build.sh): the static musl host and the bundled plugins,
# as reproducible OCI layouts and archives under target/image; prints reference@digest of each.
image: rust-plugins
	deploy/image/build.sh $(IMAGE_PLUGINS)

test-plugins: plugins python-test-plugins js-test-plugins go-test-plugins
	cargo build --target wasm32-wasip2 --profile plugin $(addprefix -p ,$(TEST_PLUGINS) $(EXAMPLE_PLUGINS))
	mkdir -p $(TEST_PLUGINS_DIR) $(EXAMPLE_PLUGINS_DIR)
	for p in $(TEST_PLUGINS); do cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm $(TEST_PLUGINS_DIR)/$$p.wasm; done
	for p in $(EXAMPLE_PLUGINS); do cp $(WASM_OUT)/$$p.wasm $(EXAMPLE_PLUGINS_DIR)/$$p.wasm; done
	cp $(PLUGINS_DIR)/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-v1.wasm
	# The v2 variant has a target dir of its own, so neither build invalidates the other.
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-v2 cargo build --target wasm32-wasip2 --profile plugin -p memcached --features v2
	cp $(CARGO_TARGET_DIR)/variant-v2/wasm32-wasip2/plugin/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-v2.wasm
	# A release of Memcached with a bug: no children at all (the prune guard's tests).
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-no-children cargo build --target wasm32-wasip2 --profile plugin -p memcached --features no-children
	cp $(CARGO_TARGET_DIR)/variant-no-children/wasm32-wasip2/plugin/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-no-children.wasm
	# A release that adds a child kind (a PodDisruptionBudget): a new controller, not a swap.
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-pdb cargo build --target wasm32-wasip2 --profile plugin -p memcached --features pdb
	cp $(CARGO_TARGET_DIR)/variant-pdb/wasm32-wasip2/plugin/memcached.wasm $(TEST_PLUGINS_DIR)/memcached-pdb.wasm
	# The release of the versioned test plugin that stores v2 (a storage-version migration).
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-versioned cargo build --target wasm32-wasip2 --profile plugin -p versioned --features storage-v2
	cp $(CARGO_TARGET_DIR)/variant-versioned/wasm32-wasip2/plugin/versioned.wasm $(TEST_PLUGINS_DIR)/versioned-storage-v2.wasm
	# The hostile plugin's declarations that spell a kind to reach another resource.
	for lie in $(HOSTILE_LIES); do \
		CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)/variant-hostile cargo build --target wasm32-wasip2 --profile plugin -p hostile --features $$lie && \
		cp $(CARGO_TARGET_DIR)/variant-hostile/wasm32-wasip2/plugin/hostile.wasm $(TEST_PLUGINS_DIR)/hostile-$$lie.wasm || exit 1; \
	done

# fleet is built alone: with memcached in the same command, cargo would unify memcached's
# `export` feature into it and fleet.wasm would carry two guests.
scale-plugins: rust-plugins
	mkdir -p $(SCALE_PLUGINS_DIR)/fleet $(SCALE_PLUGINS_DIR)/config-bundle
	cargo build --target wasm32-wasip2 --profile plugin -p config-bundle
	cp $(WASM_OUT)/config_bundle.wasm $(SCALE_PLUGINS_DIR)/config-bundle/config-bundle.wasm.tmp
	mv $(SCALE_PLUGINS_DIR)/config-bundle/config-bundle.wasm.tmp $(SCALE_PLUGINS_DIR)/config-bundle/config-bundle.wasm
	for i in $(FLEET_INDICES); do \
		FLEET_INDEX=$$i cargo build --target wasm32-wasip2 --profile plugin -p fleet && \
		cp $(WASM_OUT)/fleet.wasm $(SCALE_PLUGINS_DIR)/fleet/fleet-$$i.wasm.tmp && \
		mv $(SCALE_PLUGINS_DIR)/fleet/fleet-$$i.wasm.tmp $(SCALE_PLUGINS_DIR)/fleet/fleet-$$i.wasm || exit 1; \
	done

# The install manifests' roles (deploy/install/base/rbac.generated.yaml): what `operator-host
# rbac` prints for the bundled plugins under the base's policy, with --install-crds and the
# leader-election Lease of the base's Deployment; and the sharded overlay's roles (the same
# with --shard). tests/tests/cluster/manifests.rs fails on drift.
MANIFESTS_BASE := deploy/install/base
MANIFESTS_SHARDED := deploy/install/overlays/sharded
manifests: host rust-plugins
	{ printf '%s\n' \
		'# GENERATED by `make manifests` (operator-host rbac): do not edit. Regenerate after' \
		'# changing a plugin'"'"'s kinds, the policy ($(MANIFESTS_BASE)/policy.yaml) or the Lease.' \
		'# tests/tests/cluster/manifests.rs checks that the roles equal what operator-host rbac prints.' \
		'#' \
		'# operator-host rbac $(IMAGE_PLUGINS:%=target/plugins/%.wasm) --install-crds --name operator-host' \
		'#   --policy $(MANIFESTS_BASE)/policy.yaml --leader-elect' \
		'#   --leader-elect-namespace operator-host --leader-elect-lease operator-host' \
		'#   --plugins-from-cluster --webhooks' \
		'#'; \
	  $(CARGO_TARGET_DIR)/release/operator-host rbac $(IMAGE_PLUGINS:%=$(PLUGINS_DIR)/%.wasm) \
		--install-crds --name operator-host --policy $(MANIFESTS_BASE)/policy.yaml \
		--leader-elect --leader-elect-namespace operator-host --leader-elect-lease operator-host \
		--plugins-from-cluster --webhooks; \
	} > $(MANIFESTS_BASE)/rbac.generated.yaml.tmp
	mv $(MANIFESTS_BASE)/rbac.generated.yaml.tmp $(MANIFESTS_BASE)/rbac.generated.yaml
	{ printf '%s\n' \
		'# GENERATED by `make manifests` (operator-host rbac --shard): do not edit. The roles of' \
		'# the sharded overlay, patched over the base'"'"'s: the same ClusterRole, and a Lease Role' \
		'# for the shard Leases. tests/tests/cluster/manifests.rs checks them.' \
		'#' \
		'# operator-host rbac $(IMAGE_PLUGINS:%=target/plugins/%.wasm) --install-crds --name operator-host' \
		'#   --policy $(MANIFESTS_BASE)/policy.yaml --leader-elect --shard' \
		'#   --leader-elect-namespace operator-host --leader-elect-lease operator-host' \
		'#   --plugins-from-cluster --webhooks' \
		'#'; \
	  $(CARGO_TARGET_DIR)/release/operator-host rbac $(IMAGE_PLUGINS:%=$(PLUGINS_DIR)/%.wasm) \
		--install-crds --name operator-host --policy $(MANIFESTS_BASE)/policy.yaml \
		--leader-elect --shard --leader-elect-namespace operator-host --leader-elect-lease operator-host \
		--plugins-from-cluster --webhooks; \
	} > $(MANIFESTS_SHARDED)/rbac.generated.yaml.tmp
	mv $(MANIFESTS_SHARDED)/rbac.generated.yaml.tmp $(MANIFESTS_SHARDED)/rbac.generated.yaml
	{ printf '%s\n' \
		'# GENERATED by `make manifests` (operator-host crd --operator-plugin): do not edit.' \
		'# The host installs the same CRD (run --plugins-from-cluster --install-crds);' \
		'# tests/tests/cluster/manifests.rs checks that they are equal.'; \
	  $(CARGO_TARGET_DIR)/release/operator-host crd --operator-plugin; \
	} > $(MANIFESTS_BASE)/operatorplugin-crd.generated.yaml.tmp
	mv $(MANIFESTS_BASE)/operatorplugin-crd.generated.yaml.tmp $(MANIFESTS_BASE)/operatorplugin-crd.generated.yaml

# The README's test command: every test, including those against the local control plane.
# Each suite runs even when one before it failed; the target fails if any did.
# Tests run TEST_THREADS at once. The cluster tests wait on the API server most of the time, and
# four at once took their suite from 1249 to 803 s here, but the load showed races that two
# never did (docs/benchmarks.md §15): CI keeps two until those are understood. The host image's
# musl build starts with the first cluster test (tests/src/image.rs), beside the tests that
# wait, instead of stalling the image and real-node tests' threads when they come up.
TEST_THREADS ?= 2
test: test-prerequisites
	$(MAKE) test-plugins TOOL_PROFILE=debug
	status=0; \
	$(MAKE) python-test || status=1; \
	$(MAKE) js-test || status=1; \
	$(MAKE) go-test TOOL_PROFILE=debug || status=1; \
	OPERATOR_HOST_TEST_PREBUILD_IMAGE=1 cargo test --workspace --no-fail-fast -- --test-threads=$(TEST_THREADS) || status=1; \
	exit $$status

GO_DIRS := plugins/sdk-go plugins/memcached-go plugins/hostile-go deploy/install/monitoring/tools
lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	@# The runtime layer knows nothing of Kubernetes (ARCHITECTURE.md): no such crate below it.
	@if cargo tree -q -p operator-host-runtime -e normal --prefix none | grep -E '^(kube|k8s-openapi)[ -]'; then \
		echo "operator-host-runtime depends on a Kubernetes crate (above): the runtime layer must not"; exit 1; fi
	@# The core is pure (ARCHITECTURE.md): no wasm engine, no kube client or runtime, no HTTP, no
	@# tokio; nor the contract's types or the authors' testing crate, built on it.
	@if cargo tree -q -p operator-host-core -p operator-host-contract -p operator-host-testing -e normal --prefix none | grep -E '^(wasmtime|operator-host-runtime|kube-client|kube-runtime|tokio|hyper|oci-client|axum) '; then \
		echo "the core, the contract or the testing crate depends on a crate above them (above): they must not"; exit 1; fi
	@unformatted="$$(gofmt -l $(GO_DIRS))"; [ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted"; exit 1; }

fmt:
	cargo fmt --all
	gofmt -w $(GO_DIRS)

bench: test-plugins
	cargo bench -p operator-host --bench sandbox
	cargo bench -p operator-host --bench reload
	cargo bench -p operator-host --bench languages
	cargo bench -p operator-host --bench swap_memory
	cargo bench -p operator-host --bench admission

# The Memcached plugin in each guest language: size, compile, cache load, fresh-instance call,
# against the Rust logic run natively (host/benches/languages.rs).
bench-languages: plugins
	cargo bench -p operator-host --bench languages

cluster:
	deploy/devcluster/start.sh

cluster-down:
	deploy/devcluster/stop.sh

clean:
	cargo clean
	rm -rf $(PLUGINS_DIR) $(TEST_PLUGINS_DIR) $(EXAMPLE_PLUGINS_DIR) $(SCALE_PLUGINS_DIR) $(PYTHON_PLUGINS_DIR) $(PYTHON_TEST_PLUGINS_DIR) $(JS_PLUGINS_DIR) $(JS_TEST_PLUGINS_DIR)

# The README's main command: the host with the example plugins against the local control plane.
demo:
	deploy/demo.sh

# Benchmarks on the devcluster: N Memcached CRs, the wasm host vs a native kube-rs
# controller; re-convergence after a hot swap vs convergence from scratch; the API writes of a
# status-counter plugin with the policy's write protections relaxed vs the defaults; the
# takeover after a leader is killed; a new version through an OperatorPlugin vs the plugin
# directory; the host's memory across 100 hot swaps per guest language vs a fresh host;
# `diff` over 1,000 live parents vs reconciling them once.
bench-cluster: test-plugins
	cargo bench -p operator-host-tests --bench convergence
	cargo bench -p operator-host-tests --bench hot_swap
	cargo bench -p operator-host-tests --bench write_budget
	cargo bench -p operator-host-tests --bench takeover
	cargo bench -p operator-host-tests --bench plugin_rollout
	cargo bench -p operator-host-tests --bench swap_memory
	cargo bench -p operator-host-tests --bench diff
	cargo bench -p operator-host-tests --bench canary

# Scale on the devcluster (tests/benches/scale.rs): 10 operands in one host vs 10 native
# controllers, RSS per parent at 10,000 parents, restart with 10 plugins, 1 vs 3 sharded
# replicas on 1,000 CRs and a projection of throughput against replicas.
bench-scale: scale-plugins
	cargo bench -p operator-host-tests --bench scale

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
