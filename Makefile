# The two commands a new user needs: `make run` and `make test`.
# Everything else here is for working on tickwire itself.

CARGO ?= cargo

.PHONY: run web test test-image test-ts test-e2e test-example test-csharp colyseus-deps lint fmt bench-wire bench-udp bench-relay bench-arena bench-colyseus bench fuzz-smoke

## Build the browser client and start the server: open http://localhost:8080 and play.
## HTTP, matchmaking and ws on :8080, UDP on :7777, WebTransport on UDP :4433, the admin
## console on 127.0.0.1:7000; the admin page (http://127.0.0.1:9090/admin/), the admin API
## and /metrics on the operator listener 127.0.0.1:9090, the admin token in
## ./tickwire-admin-token unless admin.token is set.
## Ctrl-C shuts it down gracefully.
run: web
	$(CARGO) run --release --locked -p tickwire -- serve

## The browser client (clients/ts/web, pixi.js + vite) into clients/ts/web/dist, which
## `tickwire serve` serves at / ([web] dir). Needs Node 20.19+.
web:
	cd clients/ts/web && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

## Every test: unit, integration, property, golden vectors and doc tests, the TypeScript
## SDK's, the browser end-to-end tests (the arena's and the four-in-a-row example's) and the
## C# SDK's. colyseus-deps first: an integration test runs a tiny Colyseus bench.
test: test-image test-ts test-e2e test-example test-csharp colyseus-deps
	$(CARGO) test --workspace --locked --all-targets
	$(CARGO) test --workspace --locked --doc

## The container image's build stages without a Docker daemon: each stage's context laid out
## as the Dockerfile's COPY lines say (honouring .dockerignore) in target/image-stages/, and
## its build run there (cargo offline, debug profile, sharing target/; npm ci and the web
## build). About two minutes once the workspace's dependencies are built.
test-image:
	$(CARGO) test --locked -p tickwire --test image_stages -- --ignored

## The TypeScript SDK (clients/ts): a clean install from package-lock.json, the strict
## typecheck and the vitest suite (golden wire and movement vectors included).
test-ts:
	cd clients/ts && npm ci --no-audit --no-fund --loglevel=error && npm test --silent

## The browser end to end: the built client served by a debug `tickwire serve` on free
## ports (WebTransport included), SDK bots over WebSocket and `tickwire bots` over UDP,
## Debian's chromium (/usr/bin/chromium, never a downloaded browser; QUIC on) driven by
## playwright-core: the arena, WebTransport, a mixed room, the fallback to WebSocket; and
## the SDK packed (`scripts/pack.mjs`), installed in a directory outside the repository and joining
## the server from Node.
## Screenshots and logs in target/e2e/.
test-e2e: web
	$(CARGO) build --locked -p tickwire
	cd clients/ts && npm ci --no-audit --no-fund --loglevel=error
	cd clients/ts/web && npm run test:e2e --silent

## The guide's examples played in Debian's chromium by playwright-core. Four in a row
## (examples/four-in-a-row): two browser contexts play to a win, an illegal move is refused
## with its reason shown, a tab reloads mid-game and keeps its seat. Tag (examples/tag, its
## page bundled by esbuild from the SDK's source and the generated mirror): two players see
## each other run, one tags the other, a tab reloads and keeps its seat. Screenshots in
## target/e2e/.
test-example:
	$(CARGO) build --locked -p four-in-a-row -p tag
	cd examples/four-in-a-row/e2e && npm ci --no-audit --no-fund --loglevel=error && npm test --silent
	cd examples/tag/web && npm ci --no-audit --no-fund --loglevel=error && npm test --silent

## The C# SDK (clients/csharp), built with Debian's Mono (mcs; .ci/run installs mono-mcs and
## mono-devel) and run by its own console test runner: the golden wire, arena and RFC 8439
## vectors, the link simulator, and against a debug `tickwire serve` on free ports: a C#
## and a Rust client (crates/client/examples/relay_peer.rs) in one relay room over UDP and
## WebSocket, reconnection, and a C# bot playing the arena for 10 s. About 30 s once built.
CARGO_TARGET_DIR ?= target
test-csharp:
	$(CARGO) build --locked -p tickwire
	$(CARGO) build --locked -p tickwire-client --example relay_peer
	clients/csharp/build.sh
	TICKWIRE_REPO=$(CURDIR) TICKWIRE_BIN=$(abspath $(CARGO_TARGET_DIR))/debug/tickwire \
		TICKWIRE_RELAY_PEER=$(abspath $(CARGO_TARGET_DIR))/debug/examples/relay_peer \
		mono --debug clients/csharp/bin~/Tickwire.Tests.exe

## What CI checks besides the tests.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

## Benchmarks, pinned to CPU 1 (see docs/BENCHMARKS.md for the figures and anchors).
bench-wire:
	$(CARGO) build --release --locked -p tickwire
	taskset -c 1 target/release/tickwire bench wire

## The UDP protocol path against the raw sendmmsg limit. No taskset: the benchmark pins its
## own threads, the server (and the raw sender) to CPU 1, the clients (and receiver) to CPU 0.
bench-udp:
	$(CARGO) build --release --locked -p tickwire
	target/release/tickwire bench udp

## The relay scenarios (seeds 001 and 004) over UDP and WebSocket: server and bots as two
## processes, pinned by the harness (server on CPU 1, bots on CPU 0). About 35 s each.
bench-relay:
	$(CARGO) build --release --locked -p tickwire
	for scenario in sfs nettest; do for transport in udp ws; do \
		target/release/tickwire bench $$scenario --transport $$transport --duration 20 || exit 1; \
	done; done

## The arena scenarios (seeds 000 and 003, and a soak): hobo at seed 000's size and scaled
## to 3,000 players, the 5,000-player teleport burst, and bots playing. About 40 s each.
bench-arena:
	$(CARGO) build --release --locked -p tickwire
	target/release/tickwire bench hobo --duration 20 || exit 1
	target/release/tickwire bench hobo --players 3000 --rooms 100 --duration 20 || exit 1
	target/release/tickwire bench teleport --duration 20 || exit 1
	target/release/tickwire bench arena --duration 20 || exit 1

## Issue 17: the hobo load at 1,000 players (100 rooms of 10) over WebSocket against
## Colyseus 0.18 (bench/colyseus, one Node process) and then against tickwire, pinned as
## the other benches are (server on CPU 1, bots on CPU 0). About a minute each.
bench-colyseus: colyseus-deps
	$(CARGO) build --release --locked -p tickwire
	$(CARGO_TARGET_DIR)/release/tickwire bench hobo --transport ws --against colyseus \
		--players 1000 --rooms 100 --duration 20 || exit 1
	$(CARGO_TARGET_DIR)/release/tickwire bench hobo --transport ws \
		--players 1000 --rooms 100 --duration 20 || exit 1

## The Colyseus bench server's dependencies (bench/colyseus), from its package-lock.json.
colyseus-deps:
	npm ci --prefix bench/colyseus --no-audit --no-fund --loglevel=error

bench:
	taskset -c 1 $(CARGO) bench --workspace

## A short libFuzzer run of every fuzz target (needs cargo-fuzz; RUSTC_BOOTSTRAP lets the
## stable toolchain accept the sanitizer flags).
FUZZ_SECONDS ?= 30
fuzz-smoke:
	cd fuzz && targets=$$(RUSTC_BOOTSTRAP=1 $(CARGO) fuzz list) && [ -n "$$targets" ] && \
	for target in $$targets; do \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run -O $$target -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done
