# tickwire's container image: build the binary and the browser client, then a slim runtime
# with only those two, run as an unprivileged user. docs/OPERATIONS.md, "Scaling out", says
# how to run it (compose.yaml, deploy/kubernetes/) and what was verified how.
#
#   docker build -t tickwire .            # or: buildah bud -t tickwire .
#   docker run -p 8080:8080 -p 7777:7777/udp -p 4433:4433/udp tickwire
#
# The base images are arguments, so a registry mirror (or a local stand-in) can be named.
ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG NODE_IMAGE=docker.io/library/node:20-bookworm-slim
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

# The browser client (clients/ts/web, vite) into clients/ts/web/dist.
FROM ${NODE_IMAGE} AS web
WORKDIR /src/clients/ts
COPY clients/ts/ ./
RUN cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

# The binary, release profile, the lock file's versions.
FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates/ crates/
# A workspace member too: cargo loads every member's manifest to build any of them.
COPY examples/ examples/
RUN cargo build --release --locked -p tickwire \
    && cp target/release/tickwire /tickwire

FROM ${RUNTIME_IMAGE}
# No shell tools are needed at run time; the health probe is the binary itself.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/tickwire --create-home tickwire
COPY --from=build /tickwire /usr/local/bin/tickwire
COPY --from=web /src/clients/ts/web/dist /usr/share/tickwire/web
# Every key can be set as TICKWIRE_<SECTION>__<KEY> (docs/OPERATIONS.md, "Configuration").
# public_ip must be the address players reach: set TICKWIRE_PUBLIC_IP when running.
# The store defaults to SQLite in the working directory; a cluster sets a PostgreSQL URL.
ENV TICKWIRE_WEB__DIR=/usr/share/tickwire/web \
    TICKWIRE_CONSOLE__ENABLED=false
USER 10001:10001
WORKDIR /var/lib/tickwire
# HTTP (API, ws, the web client), the UDP protocol and WebTransport (shard 0's; shard i
# serves on 7777 + i and 4433 + i). The operator listener (the admin page and API,
# /metrics) stays on the container's loopback, 127.0.0.1:9090: `docker exec` reaches it
# (`tickwire drain`), or run `serve --admin 0.0.0.0:9090` with `-p 127.0.0.1:9090:9090`. Without
# TICKWIRE_ADMIN__TOKEN a generated token is in /var/lib/tickwire/tickwire-admin-token.
EXPOSE 8080/tcp 7777/udp 4433/udp
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["/usr/local/bin/tickwire", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tickwire"]
CMD ["serve"]
