# anteroom: build with the Rust toolchain, run on slim Debian as a non-root user.
#   docker build -t anteroom .
#   docker run -p 8080:8080 -e ANTEROOM_COOKIE_KEY=... -e ANTEROOM_ADMIN_TOKEN=... anteroom
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Everything the build reads: the workspace's manifests (bench/load is a member, so cargo needs
# its manifest and sources to load the workspace, though only the anteroom binary is built), the
# sources, and the files the binary embeds (lua/*.lua, templates/, conf/demo.toml).
COPY Cargo.toml Cargo.lock ./
COPY bench/load ./bench/load
COPY src ./src
COPY lua ./lua
COPY templates ./templates
COPY conf ./conf
RUN cargo build --release --locked --bin anteroom

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin anteroom
WORKDIR /app
COPY --from=build /src/target/release/anteroom /usr/local/bin/anteroom
COPY templates ./templates
COPY conf ./conf
USER anteroom
# 8080: visitors (listen.http). 9180: admin API (listen.admin; loopback in the shipped config:
# mount a config that binds it to a private address to reach it from outside the container).
EXPOSE 8080 9180
# Liveness from inside the container: the admin API's /healthz (no token, no curl needed).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["anteroom", "health", "--admin", "http://127.0.0.1:9180"]
ENTRYPOINT ["anteroom"]
CMD ["run", "--config", "/app/conf/anteroom.toml"]
